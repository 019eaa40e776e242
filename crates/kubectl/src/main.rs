//! `kubectl` for minik8s: create (and create token)/apply/replace/get/describe/delete/scale/logs,
//! cordon/uncordon/drain, top, api-resources and invoke (serverless functions) against any apiserver that speaks the Kubernetes API.
//! Resource names come from the server's discovery; tables from its Table
//! responses, so columns are the server's.

mod apply;
mod discovery;
mod drain;
mod invoke;
mod manifest;
mod ops;
mod printer;
mod show;
mod token;
mod top;

use apply::{apply_each, Verb};
use discovery::Discovery;
use ops::{delete, logs, scale};
use show::{describe, get, targets, GetOptions};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use futures::StreamExt;
use manifest::Manifest;
use minik8s_api::patch::three_way_merge_patch;
use minik8s_api::registry::{Info, ResourceInfo};
use minik8s_client::rest::content;
use minik8s_client::{Client, ClientError, DeleteParams, DynamicApi, ListParams, WatchEvent};
use serde_json::{json, Value};
use std::time::Duration;

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

#[derive(Parser)]
#[command(
    name = "kubectl",
    about = "kubectl controls the minik8s cluster manager",
    version = minik8s_api::release::GIT_VERSION
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

/// What `kubectl create` makes without a file.
#[derive(Subcommand)]
enum CreateObject {
    /// Request a token of a ServiceAccount (the TokenRequest API).
    Token {
        service_account: String,
        /// How long the token is valid (e.g. 1h, 8760h); default: the server's.
        #[arg(long)]
        duration: Option<String>,
        /// Audiences of the token (repeatable); default: the apiserver's.
        #[arg(long)]
        audience: Vec<String>,
    },
}

#[derive(Subcommand)]
enum Command {
    /// Create resources from files or stdin, or a ServiceAccount token.
    #[command(args_conflicts_with_subcommands = true)]
    Create {
        #[command(subcommand)]
        object: Option<CreateObject>,
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
        /// Keep metadata.managedFields in -o yaml/json (hidden by default).
        #[arg(long)]
        show_managed_fields: bool,
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
    /// Call a serverless Function through the gateway and print its answer.
    Invoke {
        function: String,
        /// The event: JSON or text, @FILE, or @- for stdin (default {}).
        #[arg(short = 'd', long)]
        data: Option<String>,
        /// Return at once with the call's id (fetch the result with --call ID).
        #[arg(long = "async")]
        asynchronous: bool,
        /// Print an asynchronous call's status and result.
        #[arg(long, conflicts_with_all = ["data", "asynchronous"])]
        call: Option<String>,
        /// The serverless gateway (default: the apiserver's host, port 8090).
        #[arg(long)]
        gateway: Option<String>,
    },
    /// Print the client and server version.
    Version,
    /// Mark nodes as unschedulable.
    Cordon { nodes: Vec<String> },
    /// Mark nodes as schedulable.
    Uncordon { nodes: Vec<String> },
    /// Drain a node in preparation for maintenance: cordon it, then evict
    /// its pods (PodDisruptionBudgets are honoured).
    Drain {
        node: String,
        /// Ignore DaemonSet-managed pods.
        #[arg(long)]
        ignore_daemonsets: bool,
        /// Continue even if there are pods using emptyDir (their data is lost).
        #[arg(long)]
        delete_emptydir_data: bool,
        /// Continue even if there are pods that declare no controller.
        #[arg(long)]
        force: bool,
        /// Seconds each pod is given to terminate; negative: the pod's own.
        #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
        grace_period: i64,
        /// How long to wait before giving up; zero means infinite.
        #[arg(long, default_value = "0s")]
        timeout: String,
        /// Delete pods instead of evicting them (bypasses disruption budgets).
        #[arg(long)]
        disable_eviction: bool,
        /// Only pods matching this label selector are evicted.
        #[arg(long)]
        pod_selector: Option<String>,
    },
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
    /// The apiserver's URL (the serverless gateway is on its host).
    server: String,
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
    fn api_for(&self, info: Info, m: &Manifest) -> Result<DynamicApi> {
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
        Ok(self.client.dynamic(&info, Some(ns)))
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

/// Runs one command. One arm per subcommand: the match is kubectl's table
/// of verbs, each arm turning its flags into one call (so it is long).
async fn run(cli: Cli) -> Result<i32> {
    let target = cli.client.resolve()?;
    let client = Client::for_target(&target)?;
    let explicit_namespace = cli.namespace.is_some();
    let mut ctx = Ctx {
        client,
        server: target.server.clone(),
        namespace: cli.namespace.unwrap_or(target.namespace),
        explicit_namespace,
        discovery: None,
    };
    match cli.command {
        Command::Create {
            object:
                Some(CreateObject::Token {
                    service_account,
                    duration,
                    audience,
                }),
            ..
        } => token::create_token(&ctx, &service_account, duration.as_deref(), &audience).await,
        Command::Create { files, .. } => apply_each(&mut ctx, &files, Verb::Create).await,
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
            show_managed_fields,
        } => {
            let opts = GetOptions {
                output,
                selector,
                field_selector,
                all_namespaces,
                watch,
                show_labels,
                no_headers,
                show_managed_fields,
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
            let dp = delete_params(&cascade, grace_period, now, force)?;
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
        Command::ApiResources => api_resources(&mut ctx).await,
        Command::Invoke {
            function,
            data,
            asynchronous,
            call,
            gateway,
        } => {
            let o = invoke::InvokeOptions {
                data,
                asynchronous,
                call,
                gateway,
            };
            invoke::invoke(&mut ctx, &function, &o).await
        }
        Command::Cordon { nodes } => drain::set_unschedulable(&ctx.client, &nodes, true).await,
        Command::Uncordon { nodes } => drain::set_unschedulable(&ctx.client, &nodes, false).await,
        Command::Drain {
            node,
            ignore_daemonsets,
            delete_emptydir_data,
            force,
            grace_period,
            timeout,
            disable_eviction,
            pod_selector,
        } => {
            let timeout = parse_duration(&timeout)?;
            let opts = drain::DrainOptions {
                ignore_daemonsets,
                delete_emptydir_data,
                force,
                grace_period: (grace_period >= 0).then_some(grace_period),
                timeout: (!timeout.is_zero()).then_some(timeout),
                disable_eviction,
                pod_selector,
            };
            drain::drain(&ctx.client, &node, &opts).await
        }
        Command::Version => version(&ctx).await,
    }
}

/// `kubectl delete`'s flags as the delete options sent: `--cascade` as the
/// propagation policy, `--force` and `--now` as grace periods of 0 and 1.
fn delete_params(
    cascade: &str,
    grace_period: Option<i64>,
    now: bool,
    force: bool,
) -> Result<DeleteParams> {
    let policy = match cascade {
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
    Ok(DeleteParams {
        propagation_policy: Some(policy.into()),
        grace_period_seconds: grace,
        ..Default::default()
    })
}

/// `kubectl api-resources`: every served resource, by plural.
async fn api_resources(ctx: &mut Ctx) -> Result<i32> {
    let d = ctx.discovery().await?;
    let mut rows = vec![vec![
        "NAME".into(),
        "SHORTNAMES".into(),
        "APIVERSION".into(),
        "NAMESPACED".into(),
        "KIND".into(),
    ]];
    let mut rs: Vec<&Info> = d.resources.iter().collect();
    rs.sort_by_key(|r| (r.plural.clone(), r.group.clone()));
    for r in rs {
        rows.push(vec![
            r.plural.to_string(),
            r.short_names.join(","),
            r.api_version(),
            r.namespaced.to_string(),
            r.kind.to_string(),
        ]);
    }
    print!("{}", printer::columns(&rows));
    Ok(0)
}

/// `kubectl version`: this client's release and the server's.
async fn version(ctx: &Ctx) -> Result<i32> {
    println!("Client Version: {}", minik8s_api::release::GIT_VERSION);
    let v = ctx.client.get_json("/version").await?;
    println!(
        "Server Version: {}",
        v["gitVersion"].as_str().unwrap_or("unknown")
    );
    Ok(0)
}

fn parse_duration(s: &str) -> Result<Duration> {
    minik8s_api::meta::parse_duration(s).map_err(|e| anyhow::anyhow!("invalid duration {e}"))
}
