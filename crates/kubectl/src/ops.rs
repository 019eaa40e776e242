//! `delete` (waiting until the objects are gone), `scale` and `logs`.

use super::*;

#[allow(clippy::too_many_arguments)]
pub(crate) async fn delete(
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
            let api = ctx.client.dynamic(&info, Some(&ctx.namespace));
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
                println!("{} \"{name}\" deleted", type_name(&api.info));
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

pub(crate) async fn scale(
    ctx: &mut Ctx,
    args: &[String],
    replicas: i64,
    current: Option<i64>,
) -> Result<i32> {
    ctx.discovery().await?;
    for (info, names) in targets(ctx.discovery.as_ref().expect("loaded"), args)? {
        if names.is_empty() {
            bail!("resource(s) were provided, but no name was specified");
        }
        let api = ctx.client.dynamic(&info, Some(&ctx.namespace));
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
            println!("{}/{name} scaled", type_name(&info));
        }
    }
    Ok(0)
}

pub(crate) async fn logs(
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
    let api = ctx.client.dynamic(&info, Some(&ctx.namespace));
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
