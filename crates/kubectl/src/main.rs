//! `kubectl` for minik8s: create/apply/replace/get/describe/delete/scale/logs,
//! top and api-resources against any apiserver that speaks the Kubernetes API.
//! Resource names come from the server's discovery; tables from its Table
//! responses, so columns are the server's.

mod manifest;
mod printer;
mod top;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use futures::StreamExt;
use manifest::Manifest;
use minik8s_api::patch::three_way_merge_patch;
use minik8s_api::registry::{Column, ResourceInfo};
use minik8s_client::rest::content;
use minik8s_client::{Client, ClientError, DeleteParams, DynamicApi, ListParams, WatchEvent};
use serde_json::{json, Value};
use std::time::Duration;

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

#[derive(Parser)]
#[command(
    name = "kubectl",
    about = "kubectl controls the minik8s cluster manager",
    version
)]
struct Cli {
    #[command(flatten)]
    client: minik8s_client::config::ClientFlags,
    /// The namespace scope for this request.
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create resources from files or stdin.
    Create {
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<String>,
    },
    /// Apply a configuration to resources (client-side apply).
    Apply {
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<String>,
    },
    /// Replace resources from files or stdin.
    Replace {
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<String>,
    },
    /// Display one or many resources.
    Get {
        /// TYPE[,TYPE...] [NAME...] or TYPE/NAME...
        args: Vec<String>,
        #[arg(short = 'o', long)]
        output: Option<String>,
        #[arg(short = 'l', long)]
        selector: Option<String>,
        #[arg(long)]
        field_selector: Option<String>,
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        #[arg(short = 'w', long)]
        watch: bool,
        #[arg(long)]
        show_labels: bool,
        /// Print tables without their header line.
        #[arg(long)]
        no_headers: bool,
    },
    /// Show details of a resource.
    Describe {
        args: Vec<String>,
        #[arg(short = 'l', long)]
        selector: Option<String>,
    },
    /// Delete resources by name, file or label selector.
    Delete {
        args: Vec<String>,
        #[arg(short = 'f', long = "filename")]
        files: Vec<String>,
        #[arg(short = 'l', long)]
        selector: Option<String>,
        #[arg(long)]
        all: bool,
        /// background, foreground or orphan.
        #[arg(long, default_value = "background")]
        cascade: String,
        #[arg(long)]
        grace_period: Option<i64>,
        #[arg(long)]
        now: bool,
        #[arg(long)]
        force: bool,
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        wait: bool,
        /// How long to wait for the deletion (e.g. 60s, 5m).
        #[arg(long, default_value = "5m")]
        timeout: String,
    },
    /// Set a new size for a ReplicaSet, StatefulSet or LeaderWorkerSet.
    Scale {
        args: Vec<String>,
        #[arg(long)]
        replicas: i64,
        #[arg(long)]
        current_replicas: Option<i64>,
    },
    /// Print the logs of a container in a pod.
    Logs {
        pod: String,
        #[arg(short = 'c', long)]
        container: Option<String>,
        #[arg(short = 'f', long)]
        follow: bool,
        #[arg(long)]
        tail: Option<i64>,
        #[arg(short = 'p', long)]
        previous: bool,
    },
    /// Display resource (CPU/memory) usage of pods or nodes.
    #[command(subcommand)]
    Top(TopCommand),
    /// Print the supported API resources on the server.
    ApiResources,
    /// Print the client and server version.
    Version,
}

#[derive(Subcommand)]
enum TopCommand {
    /// CPU and memory of pods.
    #[command(visible_aliases = ["pod", "po"])]
    Pods {
        name: Option<String>,
        #[arg(short = 'l', long)]
        selector: Option<String>,
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// One line per container.
        #[arg(long)]
        containers: bool,
    },
    /// CPU and memory of nodes.
    #[command(visible_aliases = ["node", "no"])]
    Nodes {
        name: Option<String>,
        #[arg(short = 'l', long)]
        selector: Option<String>,
    },
}

/// Resources the server offers, from discovery.
struct Discovery {
    resources: Vec<&'static ResourceInfo>,
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

impl Discovery {
    /// Reads `/api/v1` and every `/apis/<group>/<version>`.
    async fn load(client: &Client) -> Result<Discovery, ClientError> {
        let mut gvs: Vec<(String, String)> = vec![(String::new(), "v1".into())];
        let groups = client.get_json("/apis").await?;
        for g in groups
            .get("groups")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(pv) = g
                .pointer("/preferredVersion/version")
                .and_then(Value::as_str)
            {
                gvs.push((g["name"].as_str().unwrap_or("").to_string(), pv.to_string()));
            }
        }
        let mut resources = Vec::new();
        for (group, version) in gvs {
            let path = if group.is_empty() {
                format!("/api/{version}")
            } else {
                format!("/apis/{group}/{version}")
            };
            let list = client.get_json(&path).await?;
            for r in list
                .get("resources")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let name = r["name"].as_str().unwrap_or("");
                if name.contains('/') {
                    continue;
                }
                let shorts: Vec<&'static str> = r
                    .get("shortNames")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(leak)
                    .collect();
                let info = ResourceInfo {
                    group: leak(&group),
                    version: leak(&version),
                    kind: leak(r["kind"].as_str().unwrap_or("")),
                    plural: leak(name),
                    singular: leak(r["singularName"].as_str().unwrap_or("")),
                    short_names: Box::leak(shorts.into_boxed_slice()),
                    namespaced: r["namespaced"].as_bool().unwrap_or(true),
                    subresources: &[],
                    categories: Box::leak(
                        r.get("categories")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                            .map(leak)
                            .collect::<Vec<_>>()
                            .into_boxed_slice(),
                    ),
                    columns: &[] as &[Column],
                };
                resources.push(&*Box::leak(Box::new(info)));
            }
        }
        Ok(Discovery { resources })
    }

    /// The resource a user means by `name` (plural, singular, short name, kind, `plural.group`).
    fn resolve(&self, name: &str) -> Result<&'static ResourceInfo> {
        self.resources
            .iter()
            .copied()
            .find(|r| r.matches_alias(name))
            .ok_or_else(|| anyhow!("the server doesn't have a resource type \"{name}\""))
    }

    /// The resource of a manifest's apiVersion and kind.
    fn for_manifest(&self, m: &Manifest) -> Result<&'static ResourceInfo> {
        let api_version = m.object["apiVersion"].as_str().unwrap_or("");
        let kind = m.object["kind"].as_str().unwrap_or("");
        self.resources.iter().copied().find(|r| r.api_version() == api_version && r.kind == kind).ok_or_else(|| {
            anyhow!(
                "resource mapping not found for name: {:?} namespace: {:?} from {:?}: no matches for kind {kind:?} in version {api_version:?}\nensure CRDs are installed first",
                m.object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or(""),
                m.object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or(""),
                m.source
            )
        })
    }

    /// Expands `all` into the resources of category "all".
    fn resolve_list(&self, spec: &str) -> Result<Vec<&'static ResourceInfo>> {
        let mut out = Vec::new();
        for part in spec.split(',').filter(|p| !p.is_empty()) {
            if part == "all" {
                out.extend(
                    self.resources
                        .iter()
                        .copied()
                        .filter(|r| r.categories.contains(&"all")),
                );
            } else {
                out.push(self.resolve(part)?);
            }
        }
        Ok(out)
    }
}

/// `pod` or `replicaset.apps`: how kubectl names a resource type in messages.
fn type_name(info: &ResourceInfo) -> String {
    let kind = info.kind.to_lowercase();
    if info.group.is_empty() {
        kind
    } else {
        format!("{kind}.{}", info.group)
    }
}

/// Renders a client error the way kubectl does.
fn render_error(e: &anyhow::Error) -> String {
    if let Some(ClientError::Api(api)) = e.downcast_ref::<ClientError>() {
        if api.code == 422 {
            let mut s = format!(
                "The {} is invalid: ",
                api.message.split(" is invalid").next().unwrap_or("")
            );
            let causes = api.causes();
            if causes.len() == 1 {
                s.push_str(&format!("{}: {}", causes[0].0, causes[0].1));
            } else if causes.is_empty() {
                s.push_str(&api.message);
            } else {
                for (field, msg) in causes {
                    s.push_str(&format!("\n* {field}: {msg}"));
                }
            }
            return s;
        }
        let reason = if api.reason.is_empty() {
            "Unknown".to_string()
        } else {
            api.reason.clone()
        };
        return format!("Error from server ({reason}): {}", api.message);
    }
    format!("error: {e:#}")
}

struct Ctx {
    client: Client,
    namespace: String,
    explicit_namespace: bool,
    discovery: Option<Discovery>,
}

impl Ctx {
    async fn discovery(&mut self) -> Result<&Discovery> {
        if self.discovery.is_none() {
            self.discovery = Some(Discovery::load(&self.client).await?);
        }
        Ok(self.discovery.as_ref().expect("just loaded"))
    }

    /// The API for a manifest, honouring its namespace or `-n`.
    fn api_for(&self, info: &'static ResourceInfo, m: &Manifest) -> Result<DynamicApi> {
        let file_ns = m
            .object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        if let (Some(f), true) = (file_ns, self.explicit_namespace) {
            if info.namespaced && f != self.namespace {
                bail!("the namespace from the provided object {f:?} does not match the namespace {:?}. You must pass '--namespace={f}' to perform this operation.", self.namespace);
            }
        }
        let ns = file_ns.unwrap_or(&self.namespace);
        Ok(self.client.dynamic(info, Some(ns)))
    }
}

fn manifest_name(m: &Manifest) -> String {
    m.object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let code = match run(cli).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{}", render_error(&e));
            1
        }
    };
    std::process::exit(code);
}

async fn run(cli: Cli) -> Result<i32> {
    let target = cli.client.resolve()?;
    let client = Client::new(&target.server);
    let explicit_namespace = cli.namespace.is_some();
    let mut ctx = Ctx {
        client,
        namespace: cli.namespace.unwrap_or(target.namespace),
        explicit_namespace,
        discovery: None,
    };
    match cli.command {
        Command::Create { files } => apply_each(&mut ctx, &files, Verb::Create).await,
        Command::Apply { files } => apply_each(&mut ctx, &files, Verb::Apply).await,
        Command::Replace { files } => apply_each(&mut ctx, &files, Verb::Replace).await,
        Command::Get {
            args,
            output,
            selector,
            field_selector,
            all_namespaces,
            watch,
            show_labels,
            no_headers,
        } => {
            let opts = GetOptions {
                output,
                selector,
                field_selector,
                all_namespaces,
                watch,
                show_labels,
                no_headers,
            };
            get(&mut ctx, &args, &opts).await
        }
        Command::Describe { args, selector } => describe(&mut ctx, &args, selector).await,
        Command::Delete {
            args,
            files,
            selector,
            all,
            cascade,
            grace_period,
            now,
            force,
            wait,
            timeout,
        } => {
            let policy = match cascade.as_str() {
                "background" | "true" => "Background",
                "foreground" => "Foreground",
                "orphan" | "false" => "Orphan",
                other => bail!("invalid cascade value ({other}). Must be \"background\", \"foreground\", or \"orphan\""),
            };
            let grace = if force && grace_period.is_none() {
                Some(0)
            } else if now {
                Some(1)
            } else {
                grace_period
            };
            let dp = DeleteParams {
                propagation_policy: Some(policy.into()),
                grace_period_seconds: grace,
                ..Default::default()
            };
            let timeout = parse_duration(&timeout)?;
            delete(&mut ctx, &args, &files, selector, all, &dp, wait, timeout).await
        }
        Command::Scale {
            args,
            replicas,
            current_replicas,
        } => scale(&mut ctx, &args, replicas, current_replicas).await,
        Command::Logs {
            pod,
            container,
            follow,
            tail,
            previous,
        } => logs(&mut ctx, &pod, container, follow, tail, previous).await,
        Command::Top(TopCommand::Pods {
            name,
            selector,
            all_namespaces,
            containers,
        }) => {
            top::pods(
                &ctx.client,
                &ctx.namespace,
                name.as_deref(),
                selector.as_deref(),
                all_namespaces,
                containers,
            )
            .await
        }
        Command::Top(TopCommand::Nodes { name, selector }) => {
            top::nodes(&ctx.client, name.as_deref(), selector.as_deref()).await
        }
        Command::ApiResources => {
            let d = ctx.discovery().await?;
            let mut rows = vec![vec![
                "NAME".into(),
                "SHORTNAMES".into(),
                "APIVERSION".into(),
                "NAMESPACED".into(),
                "KIND".into(),
            ]];
            let mut rs: Vec<&&ResourceInfo> = d.resources.iter().collect();
            rs.sort_by_key(|r| (r.plural, r.group));
            for r in rs {
                rows.push(vec![
                    r.plural.into(),
                    r.short_names.join(","),
                    r.api_version(),
                    r.namespaced.to_string(),
                    r.kind.into(),
                ]);
            }
            print!("{}", printer::columns(&rows));
            Ok(0)
        }
        Command::Version => {
            println!("Client Version: v1.32.0-minik8s");
            let v = ctx.client.get_json("/version").await?;
            println!(
                "Server Version: {}",
                v["gitVersion"].as_str().unwrap_or("unknown")
            );
            Ok(0)
        }
    }
}

fn parse_duration(s: &str) -> Result<Duration> {
    minik8s_api::meta::parse_duration(s).map_err(|e| anyhow::anyhow!("invalid duration {e}"))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verb {
    Create,
    Apply,
    Replace,
}

/// create / apply / replace for every object in the files; errors are reported per object.
async fn apply_each(ctx: &mut Ctx, files: &[String], verb: Verb) -> Result<i32> {
    let manifests = manifest::load(files)?;
    ctx.discovery().await?;
    let mut failed = false;
    for m in &manifests {
        let result = async {
            let info = ctx.discovery.as_ref().expect("loaded").for_manifest(m)?;
            let api = ctx.api_for(info, m)?;
            let name = manifest_name(m);
            let what = format!("{}/{}", type_name(info), name);
            match verb {
                Verb::Create => {
                    api.create(&m.object)
                        .await
                        .map_err(|e| with_source(e, "creating", m))?;
                    println!("{what} created");
                }
                Verb::Replace => {
                    let current = api
                        .get(&name)
                        .await
                        .map_err(|e| with_source(e, "replacing", m))?;
                    let mut obj = m.object.clone();
                    obj["metadata"]["resourceVersion"] =
                        current["metadata"]["resourceVersion"].clone();
                    api.replace(&name, &obj)
                        .await
                        .map_err(|e| with_source(e, "replacing", m))?;
                    println!("{what} replaced");
                }
                Verb::Apply => {
                    let outcome = apply_one(&api, m, &name).await?;
                    println!("{what} {outcome}");
                }
            }
            Ok::<(), anyhow::Error>(())
        }
        .await;
        if let Err(e) = result {
            eprintln!("{}", render_error(&e));
            failed = true;
        }
    }
    Ok(if failed { 1 } else { 0 })
}

fn with_source(e: ClientError, verb: &str, m: &Manifest) -> anyhow::Error {
    match e {
        ClientError::Api(mut api) if api.code != 422 => {
            api.message = format!("error when {verb} {:?}: {}", m.source, api.message);
            anyhow::Error::new(ClientError::Api(api))
        }
        other => anyhow::Error::new(other),
    }
}

/// Client-side apply: create with the last-applied annotation, or a three-way merge patch.
async fn apply_one(api: &DynamicApi, m: &Manifest, name: &str) -> Result<&'static str> {
    let mut desired = m.object.clone();
    if api.info.namespaced {
        desired["metadata"]["namespace"] =
            json!(api.namespace.clone().unwrap_or_else(|| "default".into()));
    }
    let mut recorded = desired.clone();
    if let Some(a) = recorded
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(LAST_APPLIED);
    }
    let annotation = format!("{}\n", serde_json::to_string(&recorded)?);
    desired["metadata"]["annotations"][LAST_APPLIED] = json!(annotation);
    for _ in 0..5 {
        let current = match api.get(name).await {
            Ok(c) => c,
            Err(e) if e.is_not_found() => {
                api.create(&desired)
                    .await
                    .map_err(|e| with_source(e, "creating", m))?;
                return Ok("created");
            }
            Err(e) => return Err(with_source(e, "retrieving current configuration of", m)),
        };
        let original: Value = current
            .pointer(&format!(
                "/metadata/annotations/{}",
                LAST_APPLIED.replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or(json!({}));
        let patch = three_way_merge_patch(&original, &desired, &current);
        if patch.as_object().is_some_and(|p| p.is_empty()) {
            return Ok("unchanged");
        }
        match api.patch(name, None, content::MERGE_PATCH, &patch).await {
            Ok(_) => return Ok("configured"),
            Err(e) if e.is_conflict() => continue,
            Err(e) => return Err(with_source(e, "applying patch to", m)),
        }
    }
    bail!("applying {}: too many conflicts", m.source)
}

struct GetOptions {
    output: Option<String>,
    selector: Option<String>,
    field_selector: Option<String>,
    all_namespaces: bool,
    watch: bool,
    show_labels: bool,
    no_headers: bool,
}

/// Splits `TYPE[,TYPE] NAME...` or `TYPE/NAME...` into (type, names) pairs.
fn targets(d: &Discovery, args: &[String]) -> Result<Vec<(&'static ResourceInfo, Vec<String>)>> {
    if args.is_empty() {
        bail!("You must specify the type of resource to get.");
    }
    if args.iter().any(|a| a.contains('/')) {
        let mut out: Vec<(&'static ResourceInfo, Vec<String>)> = Vec::new();
        for a in args {
            let (t, n) = a.split_once('/').ok_or_else(|| anyhow!("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form"))?;
            let info = d.resolve(t)?;
            match out.iter_mut().find(|(i, _)| std::ptr::eq(*i, info)) {
                Some((_, names)) => names.push(n.to_string()),
                None => out.push((info, vec![n.to_string()])),
            }
        }
        return Ok(out);
    }
    let types = d.resolve_list(&args[0])?;
    Ok(types.into_iter().map(|t| (t, args[1..].to_vec())).collect())
}

async fn get(ctx: &mut Ctx, args: &[String], o: &GetOptions) -> Result<i32> {
    ctx.discovery().await?;
    let targets = targets(ctx.discovery.as_ref().expect("loaded"), args)?;
    let multi = targets.len() > 1 || args.first().is_some_and(|a| a == "all");
    let lp = ListParams {
        label_selector: o.selector.clone(),
        field_selector: o.field_selector.clone(),
        ..Default::default()
    };
    let output = o.output.clone().unwrap_or_default();
    let mut structured: Vec<Value> = Vec::new();
    let mut single: Option<Value> = None;
    let mut any = false;
    let mut exit = 0;
    for (info, names) in &targets {
        let ns = if o.all_namespaces {
            None
        } else {
            Some(ctx.namespace.as_str())
        };
        let api = ctx.client.dynamic(info, ns);
        let with_ns = o.all_namespaces && info.namespaced;
        match output.as_str() {
            "yaml" | "json" | "name" => {
                let items: Vec<Value> = if names.is_empty() {
                    api.list(&lp).await?["items"].as_array().cloned().unwrap_or_default()
                } else {
                    let mut v = Vec::new();
                    for n in names {
                        match api.get(n).await {
                            Ok(obj) => v.push(obj),
                            Err(e) => {
                                eprintln!("{}", render_error(&anyhow::Error::new(e)));
                                exit = 1;
                            }
                        }
                    }
                    v
                };
                if output == "name" {
                    for i in &items {
                        println!("{}/{}", type_name(info), i["metadata"]["name"].as_str().unwrap_or(""));
                    }
                } else if names.len() == 1 && targets.len() == 1 && items.len() == 1 {
                    single = items.into_iter().next();
                } else {
                    structured.extend(items);
                }
            }
            "" | "wide" => {
                let tables: Vec<Value> = if names.is_empty() {
                    vec![api.table(None, &lp).await?]
                } else {
                    let mut v = Vec::new();
                    for n in names {
                        match api.table(Some(n), &lp).await {
                            Ok(t) => v.push(t),
                            Err(e) => {
                                eprintln!("{}", render_error(&anyhow::Error::new(e)));
                                exit = 1;
                            }
                        }
                    }
                    v
                };
                let mut rows: Vec<Value> = Vec::new();
                let mut defs = Value::Null;
                let mut rv = String::new();
                for t in tables {
                    defs = t["columnDefinitions"].clone();
                    rv = t["metadata"]["resourceVersion"].as_str().unwrap_or("").to_string();
                    rows.extend(t["rows"].as_array().cloned().unwrap_or_default());
                }
                let prefix = if multi { Some(type_name(info)) } else { None };
                let popts = printer::TableOptions { wide: output == "wide", with_namespace: with_ns, show_labels: o.show_labels, prefix };
                if !rows.is_empty() {
                    if any && multi {
                        println!();
                    }
                    print!("{}", printer::table(&defs, &rows, &popts, !o.no_headers));
                    any = true;
                }
                if o.watch {
                    // With nothing listed yet, the header comes with the first event.
                    return watch_table(&api, &lp, &rv, &popts, rows.is_empty() && !o.no_headers).await;
                }
            }
            other => bail!("unable to match a printer suitable for the output format {other:?}, allowed formats are: json,name,wide,yaml"),
        }
    }
    match output.as_str() {
        "yaml" | "json" => {
            let doc = match single {
                Some(s) => s,
                None => {
                    json!({"apiVersion": "v1", "kind": "List", "items": structured, "metadata": {"resourceVersion": ""}})
                }
            };
            if output == "json" {
                println!("{}", serde_json::to_string_pretty(&doc)?);
            } else {
                print!("{}", serde_yaml::to_string(&doc)?);
            }
        }
        "" | "wide" if !any && exit == 0 => {
            if o.all_namespaces {
                eprintln!("No resources found");
            } else {
                eprintln!("No resources found in {} namespace.", ctx.namespace);
            }
        }
        _ => {}
    }
    Ok(exit)
}

/// `get -w`: prints a row per event until the server ends the stream.
async fn watch_table(
    api: &DynamicApi,
    lp: &ListParams,
    rv: &str,
    popts: &printer::TableOptions,
    need_header: bool,
) -> Result<i32> {
    let mut stream = api.watch(lp, rv, true).await?;
    let mut header = need_header;
    let mut defs = Value::Null;
    while let Some(ev) = stream.next().await {
        let table = match ev? {
            WatchEvent::Added(t) | WatchEvent::Modified(t) | WatchEvent::Deleted(t) => t,
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => {
                println!("Failure {} {}", e.reason, e.message);
                return Ok(0);
            }
        };
        if table["columnDefinitions"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
        {
            defs = table["columnDefinitions"].clone();
        }
        let rows = table["rows"].as_array().cloned().unwrap_or_default();
        print!("{}", printer::table(&defs, &rows, popts, header));
        header = false;
        use std::io::Write;
        std::io::stdout().flush()?;
    }
    Ok(0)
}

async fn describe(ctx: &mut Ctx, args: &[String], selector: Option<String>) -> Result<i32> {
    ctx.discovery().await?;
    let targets = targets(ctx.discovery.as_ref().expect("loaded"), args)?;
    let mut first = true;
    for (info, names) in targets {
        let api = ctx.client.dynamic(info, Some(&ctx.namespace));
        let objects: Vec<Value> = if names.is_empty() {
            api.list(&ListParams {
                label_selector: selector.clone(),
                ..Default::default()
            })
            .await?["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        } else {
            let mut v = Vec::new();
            for n in &names {
                v.push(api.get(n).await?);
            }
            v
        };
        for obj in objects {
            if !first {
                println!("\n");
            }
            first = false;
            let events = events_for(ctx, &obj).await;
            print!("{}", printer::describe(info, &obj, &events));
        }
    }
    Ok(0)
}

/// Events about an object (best effort: describe works without them).
async fn events_for(ctx: &Ctx, obj: &Value) -> Vec<Value> {
    let Some(info) = ctx
        .discovery
        .as_ref()
        .and_then(|d| d.resolve("events").ok())
    else {
        return Vec::new();
    };
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let lp = ListParams::default().fields(&format!(
        "involvedObject.name={name},involvedObject.uid={uid}"
    ));
    match ctx.client.dynamic(info, Some(ns)).list(&lp).await {
        Ok(list) => list["items"].as_array().cloned().unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

#[allow(clippy::too_many_arguments)]
async fn delete(
    ctx: &mut Ctx,
    args: &[String],
    files: &[String],
    selector: Option<String>,
    all: bool,
    dp: &DeleteParams,
    wait: bool,
    timeout: Duration,
) -> Result<i32> {
    ctx.discovery().await?;
    let mut work: Vec<(DynamicApi, String)> = Vec::new();
    if !files.is_empty() {
        for m in manifest::load(files)? {
            let info = ctx.discovery.as_ref().expect("loaded").for_manifest(&m)?;
            work.push((ctx.api_for(info, &m)?, manifest_name(&m)));
        }
    } else {
        let d = ctx.discovery.as_ref().expect("loaded");
        for (info, names) in targets(d, args)? {
            let api = ctx.client.dynamic(info, Some(&ctx.namespace));
            if names.is_empty() {
                if selector.is_none() && !all {
                    bail!("resource(s) were provided, but no name was specified");
                }
                let lp = ListParams {
                    label_selector: selector.clone(),
                    ..Default::default()
                };
                for item in api.list(&lp).await?["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    work.push((
                        api.clone(),
                        item["metadata"]["name"].as_str().unwrap_or("").to_string(),
                    ));
                }
            } else {
                for n in names {
                    work.push((api.clone(), n));
                }
            }
        }
        if work.is_empty() {
            eprintln!("No resources found");
            return Ok(0);
        }
    }
    let mut exit = 0;
    let mut pending: Vec<(DynamicApi, String, String)> = Vec::new();
    for (api, name) in work {
        match api.delete(&name, dp).await {
            Ok(obj) => {
                println!("{} \"{name}\" deleted", type_name(api.info));
                pending.push((
                    api,
                    name,
                    obj.pointer("/metadata/uid")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                ));
            }
            Err(e) => {
                eprintln!("{}", render_error(&anyhow::Error::new(e)));
                exit = 1;
            }
        }
    }
    if wait {
        let deadline = tokio::time::Instant::now() + timeout;
        for (api, name, uid) in pending {
            loop {
                match api.get(&name).await {
                    Err(e) if e.is_not_found() => break,
                    Ok(o)
                        if o.pointer("/metadata/uid").and_then(Value::as_str)
                            != Some(uid.as_str()) =>
                    {
                        break
                    }
                    Ok(_) | Err(_) if tokio::time::Instant::now() > deadline => {
                        eprintln!(
                            "error: timed out waiting for the condition on {}/{name}",
                            api.info.plural
                        );
                        exit = 1;
                        break;
                    }
                    _ => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        }
    }
    Ok(exit)
}

async fn scale(ctx: &mut Ctx, args: &[String], replicas: i64, current: Option<i64>) -> Result<i32> {
    ctx.discovery().await?;
    for (info, names) in targets(ctx.discovery.as_ref().expect("loaded"), args)? {
        if names.is_empty() {
            bail!("resource(s) were provided, but no name was specified");
        }
        let api = ctx.client.dynamic(info, Some(&ctx.namespace));
        for name in names {
            match current {
                Some(expected) => {
                    // The precondition holds for the version read; a write in
                    // between (a controller's status) means reading again, as
                    // the real kubectl's scaler does.
                    let mismatch = minik8s_client::retry_on_conflict(|| async {
                        let mut s = api.get_sub(&name, "scale").await?;
                        let have = s
                            .pointer("/spec/replicas")
                            .and_then(Value::as_i64)
                            .unwrap_or(0);
                        if have != expected {
                            return Ok(Some(have));
                        }
                        s["spec"]["replicas"] = json!(replicas);
                        api.replace_sub(&name, "scale", &s).await.map(|_| None)
                    })
                    .await?;
                    if let Some(have) = mismatch {
                        bail!("Expected replicas to be {expected}, was {have}");
                    }
                }
                None => {
                    api.patch(
                        &name,
                        Some("scale"),
                        content::MERGE_PATCH,
                        &json!({"spec": {"replicas": replicas}}),
                    )
                    .await?;
                }
            }
            println!("{}/{name} scaled", type_name(info));
        }
    }
    Ok(0)
}

async fn logs(
    ctx: &mut Ctx,
    pod: &str,
    container: Option<String>,
    follow: bool,
    tail: Option<i64>,
    previous: bool,
) -> Result<i32> {
    let info = ctx.discovery().await?.resolve("pods")?;
    let name = pod
        .strip_prefix("pod/")
        .or_else(|| pod.strip_prefix("pods/"))
        .unwrap_or(pod);
    let api = ctx.client.dynamic(info, Some(&ctx.namespace));
    let p = api.get(name).await?;
    let container = match container {
        Some(c) => c,
        None => p
            .pointer("/spec/containers/0/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    };
    let mut q = vec![("container", container)];
    if follow {
        q.push(("follow", "true".into()));
    }
    if let Some(t) = tail {
        q.push(("tailLines", t.to_string()));
    }
    if previous {
        q.push(("previous", "true".into()));
    }
    let path = format!(
        "{}/log?{}",
        info.object_path(Some(&ctx.namespace), name),
        serde_urlencoded::to_string(&q)?
    );
    let resp = ctx
        .client
        .send(reqwest::Method::GET, &path, None, "*/*")
        .await?;
    let mut body = resp.bytes_stream();
    use std::io::Write;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.context("reading logs")?;
        std::io::stdout().write_all(&chunk)?;
        std::io::stdout().flush()?;
    }
    Ok(0)
}
