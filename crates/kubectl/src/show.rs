//! `get` (tables from the server, `-o yaml|json|name|wide`, `-w`) and
//! `describe` (the object and its events).

use super::*;

pub(crate) struct GetOptions {
    pub(crate) output: Option<String>,
    pub(crate) selector: Option<String>,
    pub(crate) field_selector: Option<String>,
    pub(crate) all_namespaces: bool,
    pub(crate) watch: bool,
    pub(crate) show_labels: bool,
    pub(crate) no_headers: bool,
    pub(crate) show_managed_fields: bool,
}

/// Splits `TYPE[,TYPE] NAME...` or `TYPE/NAME...` into (type, names) pairs.
pub(crate) fn targets(d: &Discovery, args: &[String]) -> Result<Vec<(Info, Vec<String>)>> {
    if args.is_empty() {
        bail!("You must specify the type of resource to get.");
    }
    if args.iter().any(|a| a.contains('/')) {
        let mut out: Vec<(Info, Vec<String>)> = Vec::new();
        for a in args {
            let (t, n) = a.split_once('/').ok_or_else(|| anyhow!("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form"))?;
            let info = d.resolve(t)?;
            match out
                .iter_mut()
                .find(|(i, _)| std::sync::Arc::ptr_eq(i, &info))
            {
                Some((_, names)) => names.push(n.to_string()),
                None => out.push((info, vec![n.to_string()])),
            }
        }
        return Ok(out);
    }
    let types = d.resolve_list(&args[0])?;
    Ok(types.into_iter().map(|t| (t, args[1..].to_vec())).collect())
}

pub(crate) async fn get(ctx: &mut Ctx, args: &[String], o: &GetOptions) -> Result<i32> {
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
                    each_named(names, &mut exit, |n| api.get(n)).await
                };
                let mut items = items;
                if !o.show_managed_fields {
                    for i in &mut items {
                        if let Some(m) = i.get_mut("metadata").and_then(Value::as_object_mut) {
                            m.remove("managedFields");
                        }
                    }
                }
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
                    each_named(names, &mut exit, |n| api.table(Some(n), &lp)).await
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
        "yaml" | "json" => print_document(&output, single, structured)?,
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

/// Each named object as `fetch` reads it; one that cannot be read is
/// reported as kubectl does and makes the exit status 1, the rest are shown.
async fn each_named<'a, F, Fut>(names: &'a [String], exit: &mut i32, fetch: F) -> Vec<Value>
where
    F: Fn(&'a str) -> Fut,
    Fut: std::future::Future<Output = Result<Value, minik8s_client::ClientError>>,
{
    let mut found = Vec::new();
    for n in names {
        match fetch(n).await {
            Ok(obj) => found.push(obj),
            Err(e) => {
                eprintln!("{}", render_error(&anyhow::Error::new(e)));
                *exit = 1;
            }
        }
    }
    found
}

/// `-o json|yaml`: the one object asked for by name, else a List of all.
fn print_document(output: &str, single: Option<Value>, items: Vec<Value>) -> Result<()> {
    let doc = match single {
        Some(s) => s,
        None => {
            json!({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}})
        }
    };
    if output == "json" {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", serde_yaml::to_string(&doc)?);
    }
    Ok(())
}

/// `get -w`: prints a row per event until the server ends the stream.
pub(crate) async fn watch_table(
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

pub(crate) async fn describe(
    ctx: &mut Ctx,
    args: &[String],
    selector: Option<String>,
) -> Result<i32> {
    ctx.discovery().await?;
    let targets = targets(ctx.discovery.as_ref().expect("loaded"), args)?;
    let mut first = true;
    for (info, names) in targets {
        let api = ctx.client.dynamic(&info, Some(&ctx.namespace));
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
            print!("{}", printer::describe(&info, &obj, &events));
        }
    }
    Ok(0)
}

/// Events about an object (best effort: describe works without them).
pub(crate) async fn events_for(ctx: &Ctx, obj: &Value) -> Vec<Value> {
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
    match ctx.client.dynamic(&info, Some(ns)).list(&lp).await {
        Ok(list) => list["items"].as_array().cloned().unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}
