//! `minik8s-add-user NAME`: a student in one command (what `scripts/add-user.sh`
//! runs on the master). It makes
//!
//! ```text
//!  namespace NAME              labelled pod-security.kubernetes.io/enforce=restricted (and warn, audit)
//!  RoleBinding NAME-edit       ClusterRole edit → User NAME, in that namespace only
//!  NAME.kubeconfig             a client certificate (CN=NAME, O=--group) from the cluster CA,
//!                              the server, and the namespace as the context's default
//!  ResourceQuota NAME-quota    with --quota pods=10,requests.cpu=2,...: the student's share
//!                              (read-only to the student: `edit` may only view quotas)
//! ```
//!
//! It needs the cluster PKI (the CA's key signs the certificate) and the
//! admin kubeconfig, so it runs where the master runs.
use anyhow::Context;
use clap::Parser;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::RoleBinding;
use minik8s_api::registry;
use minik8s_client::Client;
use serde_json::json;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "minik8s-add-user",
    about = "a namespace, an edit RoleBinding and a kubeconfig for one user"
)]
struct Args {
    /// The user's name (the certificate's CN).
    name: String,
    /// The user's namespace (default: the name).
    #[arg(long)]
    namespace: Option<String>,
    /// The group the certificate puts the user in (its O).
    #[arg(long, default_value = "students")]
    group: String,
    /// The cluster PKI (ca.crt, ca.key, admin.conf).
    #[arg(long, default_value = "/var/lib/minik8s/pki")]
    pki_dir: PathBuf,
    /// The apiserver URL the user's kubeconfig names (default: the admin kubeconfig's).
    #[arg(long)]
    server: Option<String>,
    /// The Pod Security level the namespace enforces.
    #[arg(long, default_value = "restricted")]
    level: String,
    /// Where to write the kubeconfig (default: ./NAME.kubeconfig).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Days the certificate is valid.
    #[arg(long, default_value_t = 365)]
    days: i64,
    /// A ResourceQuota for the namespace, as `kubectl create quota --hard`
    /// takes it: `pods=10,requests.cpu=2,requests.memory=4Gi`.
    #[arg(long)]
    quota: Option<String>,
}

/// `pods=10,requests.cpu=2` as a resource list.
fn parse_hard(spec: &str) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
    let mut hard = serde_json::Map::new();
    for pair in spec.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .with_context(|| format!("--quota: {pair:?} is not resource=quantity"))?;
        if minik8s_api::amount::Amount::parse(v).is_none() {
            anyhow::bail!("--quota: {v:?} (for {k}) is not a quantity");
        }
        hard.insert(k.trim().to_string(), json!(v.trim()));
    }
    Ok(hard)
}

/// Long on purpose: the command's steps in the order it takes them,
/// read top to bottom.
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let ns = args.namespace.clone().unwrap_or_else(|| args.name.clone());
    if minik8s_validation::podsecurity::Level::parse(&args.level).is_none() {
        anyhow::bail!(
            "--level {:?}: one of privileged, baseline, restricted",
            args.level
        );
    }
    let admin_conf = args.pki_dir.join("admin.conf");
    let target = minik8s_client::config::from_kubeconfig(&admin_conf)
        .with_context(|| format!("the admin kubeconfig {}", admin_conf.display()))?;
    let admin = Client::for_target(&target)?;
    let server = args.server.clone().unwrap_or_else(|| target.server.clone());

    let labels = json!({"pod-security.kubernetes.io/enforce": args.level, "pod-security.kubernetes.io/enforce-version": "latest",
                        "pod-security.kubernetes.io/warn": args.level, "pod-security.kubernetes.io/audit": args.level});
    let namespaces = admin.dynamic(registry::of::<Namespace>(), None);
    match namespaces
        .create(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}))
        .await
    {
        Ok(_) => println!("namespace/{ns} created (pod security: {})", args.level),
        Err(e) if e.api().is_some_and(|a| a.is_already_exists()) => {
            namespaces
                .patch(&ns, None, minik8s_client::rest::content::MERGE_PATCH, &json!({"metadata": {"labels": labels}}))
                .await?;
            println!("namespace/{ns} labelled (pod security: {})", args.level);
        }
        Err(e) => return Err(e).context(format!("creating namespace {ns}")),
    }
    let binding = format!("{}-edit", args.name);
    let rb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": binding, "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": args.name}]});
    match admin
        .dynamic(registry::of::<RoleBinding>(), Some(&ns))
        .create(&rb)
        .await
    {
        Ok(_) => println!("rolebinding.rbac.authorization.k8s.io/{binding} created (edit in {ns})"),
        Err(e) if e.api().is_some_and(|a| a.is_already_exists()) => {
            println!("rolebinding.rbac.authorization.k8s.io/{binding} kept")
        }
        Err(e) => return Err(e).context("creating the RoleBinding"),
    }

    if let Some(spec) = &args.quota {
        let hard = parse_hard(spec)?;
        let name = format!("{}-quota", args.name);
        let quotas = admin.dynamic(
            registry::of::<k8s_openapi::api::core::v1::ResourceQuota>(),
            Some(&ns),
        );
        let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": ns}, "spec": {"hard": hard}});
        match quotas.create(&quota).await {
            Ok(_) => println!("resourcequota/{name} created ({spec})"),
            Err(e) if e.api().is_some_and(|a| a.is_already_exists()) => {
                let mut current = quotas.get(&name).await?;
                current["spec"]["hard"] = json!(hard);
                quotas.replace(&name, &current).await?;
                println!("resourcequota/{name} updated ({spec})");
            }
            Err(e) => return Err(e).context("creating the ResourceQuota"),
        }
    }

    let pki = minik8s_pki::Ca::load(&args.pki_dir)?;
    let cert = pki.issue(
        &args.name,
        &[args.group.as_str()],
        &[],
        minik8s_pki::Usage::Client,
        args.days,
    )?;
    let mut config: serde_json::Value = serde_yaml::from_str(&minik8s_pki::kubeconfig(
        "minik8s",
        &server,
        &pki.cert_pem,
        &args.name,
        &cert,
    ))?;
    config["contexts"][0]["context"]["namespace"] = json!(ns);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.kubeconfig", args.name)));
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&out)
            .with_context(|| format!("writing {}", out.display()))?;
        f.write_all(serde_yaml::to_string(&config)?.as_bytes())?;
    }
    println!(
        "wrote {} (user {}, group {}, namespace {ns}); try: KUBECONFIG={} kubectl get pods",
        out.display(),
        args.name,
        args.group,
        out.display()
    );
    Ok(())
}
