//! `create`, `apply` (client-side, with the last-applied annotation and a
//! three-way merge patch) and `replace` for every object in the files.

use super::*;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    Create,
    Apply,
    Replace,
}

/// create / apply / replace for every object in the files; errors are reported per object.
pub(crate) async fn apply_each(ctx: &mut Ctx, files: &[String], verb: Verb) -> Result<i32> {
    let manifests = manifest::load(files)?;
    ctx.discovery().await?;
    let mut failed = false;
    for m in &manifests {
        let result = async {
            let info = ctx.discovery.as_ref().expect("loaded").for_manifest(m)?;
            let api = ctx.api_for(info.clone(), m)?;
            let name = manifest_name(m);
            let what = format!("{}/{}", type_name(&info), name);
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

pub(crate) fn with_source(e: ClientError, verb: &str, m: &Manifest) -> anyhow::Error {
    match e {
        ClientError::Api(mut api) if api.code != 422 => {
            api.message = format!("error when {verb} {:?}: {}", m.source, api.message);
            anyhow::Error::new(ClientError::Api(api))
        }
        other => anyhow::Error::new(other),
    }
}

/// Client-side apply: create with the last-applied annotation, or a three-way merge patch.
pub(crate) async fn apply_one(api: &DynamicApi, m: &Manifest, name: &str) -> Result<&'static str> {
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
