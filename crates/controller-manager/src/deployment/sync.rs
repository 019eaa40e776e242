//! `reconcile`: one Deployment's sync (Kubernetes' `syncDeployment`, with
//! `sync`, `rolloutRecreate`, `rolloutRolling` and the status updates).

use super::rollout::{self, Counts, RsView};
use super::*;
use minik8s_client::events::EventType;

/// Why the status is being written, for the Progressing condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Deleting, paused or scaling: counts and Available only.
    Steady,
    /// A rollout step: Progressing follows it (and its deadline).
    Rollout,
}

fn creation_order(a: &Arc<ReplicaSet>, b: &Arc<ReplicaSet>) -> std::cmp::Ordering {
    let t = |rs: &Arc<ReplicaSet>| {
        rs.metadata
            .creation_timestamp
            .as_ref()
            .map(minik8s_api::meta::utc_of)
    };
    t(a).cmp(&t(b))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

fn active(rs: &ReplicaSet) -> bool {
    view(rs).replicas > 0
}

impl Reconciler for DeploymentController {
    const NAME: &'static str = "deployment";

    async fn trace_context(&self, key: &str) -> Option<String> {
        let d = self.deployments.get(key)?;
        let settled = crate::journey::deployment_settled(&d);
        crate::journey::context_unless(&self.client, &d.metadata, settled).await
    }

    async fn reconcile(&self, key: &str) -> Result<Action, ClientError> {
        let Some(d) = self.deployments.get(key) else {
            return Ok(Action::Done);
        };
        let spec = d.spec.clone();
        let selector = match Selector::from_label_selector(&spec.selector) {
            Ok(s) if !s.is_empty() => s,
            _ => {
                let note =
                    "This deployment is selecting all pods. A non-empty selector is required.";
                self.recorder
                    .event(&*d, EventType::Warning, "SelectingAll", note)
                    .await;
                return Ok(Action::Done);
            }
        };
        let mut sets = self.claim_sets(&d, &selector).await?;
        sets.sort_by(creation_order);
        let template = template_without_hash(Some(&spec.template));
        let is_new = |rs: &ReplicaSet| template_without_hash(rs.spec.template.as_ref()) == template;
        let mut new = sets.iter().find(|rs| is_new(rs)).cloned();
        let old: Vec<Arc<ReplicaSet>> = sets.iter().filter(|rs| !is_new(rs)).cloned().collect();
        let (rolling, surge, _) = strategy_numbers(&d);
        let replicas = spec.replicas.unwrap_or(1);

        if d.metadata.deletion_timestamp.is_some() {
            return self
                .write_status(&d, new.as_deref(), &sets, Phase::Steady, None)
                .await;
        }
        if spec.paused.unwrap_or(false) || self.is_scaling_event(&d, &sets) {
            self.scale_all(&d, new.as_deref(), &old, rolling, surge)
                .await?;
            if spec.paused.unwrap_or(false) {
                self.clean_up(&d, &old).await?;
            }
            let sets = self.fresh(&sets);
            let new = new.as_ref().and_then(|n| {
                sets.iter()
                    .find(|s| s.metadata.uid == n.metadata.uid)
                    .cloned()
            });
            return self
                .write_status(&d, new.as_deref(), &sets, Phase::Steady, None)
                .await;
        }

        // The new ReplicaSet: the latest revision, created when missing
        // (Recreate waits until the old pods are gone).
        let max_old = old.iter().map(|rs| revision_of(rs)).max().unwrap_or(0);
        let mut note = None;
        if let Some(rs) = &new {
            if revision_of(rs) <= max_old {
                new = Some(Arc::new(self.set_revision(rs, max_old + 1).await?));
            }
        }
        if !rolling {
            return self.rollout_recreate(&d, new, &old, max_old).await;
        }
        if new.is_none() {
            let views: Vec<RsView> = old.iter().map(|rs| view(rs)).collect();
            let refs: Vec<&RsView> = views.iter().collect();
            let empty = RsView {
                name: String::new(),
                replicas: 0,
                status_replicas: 0,
                ready: 0,
                available: 0,
                max_replicas: None,
            };
            let size = rollout::new_rs_replicas(replicas, surge, &empty, &refs);
            match self.create_new_set(&d, max_old + 1, size, surge).await? {
                Some((rs, created)) => {
                    note = Some(created);
                    new = Some(rs);
                }
                None => return Ok(Action::RequeueAfter(Duration::from_millis(100))),
            }
        }
        let Some(new) = new else {
            return Ok(Action::Done);
        };
        self.set_deployment_revision(&d, revision_of(&new)).await?;
        let mut all = old.clone();
        all.push(new.clone());
        self.rollout_rolling(&d, &new, &old, &all, note).await
    }
}

impl DeploymentController {
    /// The ReplicaSets as the cache has them now (after our own writes landed there, or not yet).
    fn fresh(&self, sets: &[Arc<ReplicaSet>]) -> Vec<Arc<ReplicaSet>> {
        sets.iter()
            .map(|rs| {
                self.sets
                    .get(&object_key(&rs.metadata))
                    .unwrap_or_else(|| rs.clone())
            })
            .collect()
    }

    /// Replicas changed since the active ReplicaSets were sized (their
    /// desired-replicas annotation says otherwise).
    fn is_scaling_event(&self, d: &Deployment, sets: &[Arc<ReplicaSet>]) -> bool {
        let replicas = d.spec.replicas.unwrap_or(1).to_string();
        sets.iter().filter(|rs| active(rs)).any(|rs| {
            annotation(&rs.metadata, DESIRED_REPLICAS).is_some_and(|want| want != replicas)
        })
    }

    /// Kubernetes' `scale`: one active set takes all replicas; a saturated
    /// new set retires the old ones; otherwise every active set gets its
    /// proportional share.
    async fn scale_all(
        &self,
        d: &Deployment,
        new: Option<&ReplicaSet>,
        old: &[Arc<ReplicaSet>],
        rolling: bool,
        surge: i32,
    ) -> Result<(), ClientError> {
        let replicas = d.spec.replicas.unwrap_or(1);
        let mut actives: Vec<&ReplicaSet> =
            old.iter().map(|rs| &**rs).filter(|rs| active(rs)).collect();
        if let Some(n) = new.filter(|n| active(n)) {
            actives.push(n);
        }
        let only = match actives.len() {
            0 => new.or_else(|| old.last().map(|rs| &**rs)),
            1 => Some(actives[0]),
            _ => None,
        };
        if let Some(rs) = only {
            self.scale(d, rs, replicas, surge).await?;
            return Ok(());
        }
        if let Some(n) = new {
            let v = view(n);
            let saturated = v.replicas == replicas
                && annotation(&n.metadata, DESIRED_REPLICAS) == Some(replicas.to_string())
                && v.available == replicas;
            if saturated {
                for rs in old.iter().filter(|rs| active(rs)) {
                    self.scale(d, rs, 0, surge).await?;
                }
                return Ok(());
            }
        }
        if !rolling {
            return Ok(());
        }
        // Newest first (the new set, then old ones from the latest).
        actives.reverse();
        let views: Vec<RsView> = actives.iter().map(|rs| view(rs)).collect();
        let refs: Vec<&RsView> = views.iter().collect();
        let status_replicas = d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        for (name, size) in rollout::proportional_sizes(replicas, surge, status_replicas, &refs) {
            if let Some(rs) = actives
                .iter()
                .find(|rs| rs.metadata.name.as_deref() == Some(name.as_str()))
            {
                self.scale(d, rs, size, surge).await?;
            }
        }
        Ok(())
    }

    /// Marks `rs` as the latest revision (a rollback to its template).
    async fn set_revision(
        &self,
        rs: &ReplicaSet,
        revision: i64,
    ) -> Result<ReplicaSet, ClientError> {
        let api = self.client.dynamic(
            registry::of::<ReplicaSet>(),
            rs.metadata.namespace.as_deref(),
        );
        let patch = json!({"metadata": {"annotations": {REVISION: revision.to_string()}}});
        let v = api
            .patch(
                rs.metadata.name.as_deref().unwrap_or(""),
                None,
                content::MERGE_PATCH,
                &patch,
            )
            .await?;
        serde_json::from_value(v).map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// The Deployment carries its new ReplicaSet's revision (what `kubectl
    /// rollout history` and `undo` read).
    async fn set_deployment_revision(
        &self,
        d: &Deployment,
        revision: i64,
    ) -> Result<(), ClientError> {
        let want = revision.to_string();
        if annotation(&d.metadata, REVISION).as_deref() == Some(want.as_str()) {
            return Ok(());
        }
        let api = self.client.dynamic(
            registry::of::<Deployment>(),
            d.metadata.namespace.as_deref(),
        );
        let patch = json!({"metadata": {"annotations": {REVISION: want}}});
        match api
            .patch(
                d.metadata.name.as_deref().unwrap_or(""),
                None,
                content::MERGE_PATCH,
                &patch,
            )
            .await
        {
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }

    /// Recreate: every old pod gone before the first new one starts.
    async fn rollout_recreate(
        &self,
        d: &Deployment,
        new: Option<Arc<ReplicaSet>>,
        old: &[Arc<ReplicaSet>],
        max_old: i64,
    ) -> Result<Action, ClientError> {
        let mut all: Vec<Arc<ReplicaSet>> = old.to_vec();
        all.extend(new.clone());
        let mut scaled = false;
        for rs in old.iter().filter(|rs| active(rs)) {
            self.scale(d, rs, 0, 0).await?;
            scaled = true;
        }
        let ns = ns_of(&d.metadata);
        if scaled || self.old_pods_running(&ns, old) {
            return self
                .write_status(d, new.as_deref(), &self.fresh(&all), Phase::Rollout, None)
                .await;
        }
        let replicas = d.spec.replicas.unwrap_or(1);
        let mut note = None;
        let new = match new {
            Some(rs) => {
                self.scale(d, &rs, replicas, 0).await?;
                rs
            }
            None => match self.create_new_set(d, max_old + 1, replicas, 0).await? {
                Some((rs, created)) => {
                    note = Some(created);
                    rs
                }
                None => return Ok(Action::RequeueAfter(Duration::from_millis(100))),
            },
        };
        self.set_deployment_revision(d, revision_of(&new)).await?;
        all = old.to_vec();
        all.push(new.clone());
        let all = self.fresh(&all);
        if rollout::complete(&counts_of(Some(&new), &all), replicas) {
            self.clean_up(d, old).await?;
        }
        self.write_status(d, Some(&new), &all, Phase::Rollout, note)
            .await
    }

    /// RollingUpdate: grow the new set within the surge, else shrink the old
    /// ones within the unavailability, else (complete) clean up history.
    async fn rollout_rolling(
        &self,
        d: &Deployment,
        new: &Arc<ReplicaSet>,
        old: &[Arc<ReplicaSet>],
        all: &[Arc<ReplicaSet>],
        note: Option<Note>,
    ) -> Result<Action, ClientError> {
        let replicas = d.spec.replicas.unwrap_or(1);
        let (_, surge, max_unavailable) = strategy_numbers(d);
        let views: Vec<RsView> = all.iter().map(|rs| view(rs)).collect();
        let refs: Vec<&RsView> = views.iter().collect();
        let new_view = view(new);
        let target = rollout::new_rs_replicas(replicas, surge, &new_view, &refs);
        if target != new_view.replicas {
            self.scale(d, new, target, surge).await?;
            return self
                .write_status(d, Some(new), &self.fresh(all), Phase::Rollout, note)
                .await;
        }
        let old_views: Vec<RsView> = old.iter().map(|rs| view(rs)).collect();
        let old_refs: Vec<&RsView> = old_views.iter().collect();
        let changes = rollout::scale_down_old(replicas, max_unavailable, &new_view, &old_refs);
        for (name, size) in &changes {
            if let Some(rs) = old
                .iter()
                .find(|rs| rs.metadata.name.as_deref() == Some(name.as_str()))
            {
                self.scale(d, rs, *size, surge).await?;
            }
        }
        // Sizes and annotations follow the deployment even when nothing moved.
        self.scale(d, new, target, surge).await?;
        let all = self.fresh(all);
        if changes.is_empty() && rollout::complete(&counts_of(Some(new), &all), replicas) {
            self.clean_up(d, old).await?;
        }
        self.write_status(d, Some(new), &all, Phase::Rollout, note)
            .await
    }

    /// Writes the status (counts, Available, Progressing) when it changed;
    /// asks to be woken at the progress deadline while a rollout is under way.
    async fn write_status(
        &self,
        d: &Deployment,
        new: Option<&ReplicaSet>,
        all: &[Arc<ReplicaSet>],
        phase: Phase,
        note: Option<Note>,
    ) -> Result<Action, ClientError> {
        let spec = d.spec.clone();
        let replicas = spec.replicas.unwrap_or(1);
        let (_, _, max_unavailable) = strategy_numbers(d);
        let old_status = d.status.clone().unwrap_or_default();
        let c = counts_of(new, all);
        let now = now_rfc3339();
        let mut conditions: Vec<Value> = old_status
            .conditions
            .iter()
            .flatten()
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect();
        rollout::set_condition(
            &mut conditions,
            rollout::available_condition(&c, replicas, max_unavailable, &now),
        );
        let deadline = spec.progress_deadline_seconds.map(|s| s as i64);
        let new_name = new
            .and_then(|n| n.metadata.name.clone())
            .unwrap_or_default();
        let progressing =
            |conds: &Vec<Value>| conds.iter().find(|c| c["type"] == "Progressing").cloned();
        if deadline.is_some() {
            progress_condition(
                &mut conditions,
                &d.spec,
                &old_status,
                &c,
                phase,
                note,
                &new_name,
                &now,
            );
        }
        let generation = d.metadata.generation.unwrap_or(0);
        let or_null = |n: i32| if n == 0 { Value::Null } else { json!(n) };
        let status = json!({
            "observedGeneration": generation,
            "replicas": or_null(c.replicas),
            "updatedReplicas": or_null(c.updated),
            "readyReplicas": or_null(c.ready),
            "availableReplicas": or_null(c.available),
            "unavailableReplicas": or_null(c.unavailable),
            "conditions": conditions,
        });
        let before = serde_json::to_value(&old_status).unwrap_or(Value::Null);
        let unchanged = [
            "observedGeneration",
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
            "conditions",
        ]
        .iter()
        .all(|k| before.get(*k).unwrap_or(&Value::Null) == status.get(*k).unwrap_or(&Value::Null));
        if !unchanged {
            self.client
                .patch_status::<Deployment>(
                    &d.metadata,
                    content::MERGE_PATCH,
                    &json!({"status": status}),
                )
                .await?;
        }
        // Wake up at the deadline of a rollout still under way.
        let under_way = progressing(&conditions)
            .filter(|p| p["status"] == "True" && p["reason"] != "NewReplicaSetAvailable");
        Ok(match (under_way, deadline) {
            (Some(p), Some(secs)) => {
                let since = p["lastUpdateTime"]
                    .as_str()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
                let left = since
                    .map(|s| {
                        secs - (chrono::Utc::now() - s.with_timezone(&chrono::Utc)).num_seconds()
                    })
                    .unwrap_or(secs)
                    .max(1);
                Action::RequeueAfter(Duration::from_secs(left as u64))
            }
            _ => Action::Done,
        })
    }
}

fn counts_of(new: Option<&ReplicaSet>, all: &[Arc<ReplicaSet>]) -> Counts {
    let views: Vec<RsView> = all.iter().map(|rs| view(rs)).collect();
    let refs: Vec<&RsView> = views.iter().collect();
    let new_view = new.map(view);
    rollout::counts(new_view.as_ref(), &refs)
}

/// The Progressing condition (Kubernetes' checkPausedConditions and
/// syncRolloutStatus): paused/resumed, created or found the new set,
/// progressing, complete, or timed out.
#[allow(clippy::too_many_arguments)]
fn progress_condition(
    conditions: &mut Vec<Value>,
    spec: &k8s_openapi::api::apps::v1::DeploymentSpec,
    old: &k8s_openapi::api::apps::v1::DeploymentStatus,
    c: &Counts,
    phase: Phase,
    note: Option<Note>,
    new_name: &str,
    now: &str,
) {
    let replicas = spec.replicas.unwrap_or(1);
    let current = conditions
        .iter()
        .find(|x| x["type"] == "Progressing")
        .cloned();
    let reason = current
        .as_ref()
        .and_then(|x| x["reason"].as_str().map(str::to_string));
    let paused = spec.paused.unwrap_or(false);
    if reason.as_deref() != Some("ProgressDeadlineExceeded") {
        if paused && reason.as_deref() != Some("DeploymentPaused") {
            let cond = rollout::condition(
                "Progressing",
                "Unknown",
                "DeploymentPaused",
                "Deployment is paused",
                now,
            );
            rollout::set_condition(conditions, cond);
            return;
        }
        if !paused && reason.as_deref() == Some("DeploymentPaused") {
            let cond = rollout::condition(
                "Progressing",
                "Unknown",
                "DeploymentResumed",
                "Deployment is resumed",
                now,
            );
            rollout::set_condition(conditions, cond);
        }
    }
    if phase == Phase::Steady || paused {
        return;
    }
    if let Some((reason, message)) = note {
        rollout::set_condition(
            conditions,
            rollout::condition("Progressing", "True", reason, &message, now),
        );
        return;
    }
    let already_complete =
        c.replicas == c.updated && reason.as_deref() == Some("NewReplicaSetAvailable");
    if already_complete {
        return;
    }
    let before = Counts {
        replicas: old.replicas.unwrap_or(0),
        updated: old.updated_replicas.unwrap_or(0),
        ready: old.ready_replicas.unwrap_or(0),
        available: old.available_replicas.unwrap_or(0),
        unavailable: old.unavailable_replicas.unwrap_or(0),
    };
    if rollout::complete(c, replicas) {
        let message = format!("ReplicaSet \"{new_name}\" has successfully progressed.");
        let cond = rollout::condition(
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            &message,
            now,
        );
        rollout::set_condition(conditions, cond);
    } else if rollout::progressing(&before, c) || current.is_none() {
        // Progress refreshes lastUpdateTime (the deadline runs from there).
        let message = format!("ReplicaSet \"{new_name}\" is progressing.");
        let mut cond =
            rollout::condition("Progressing", "True", "ReplicaSetUpdated", &message, now);
        if let Some(cur) = current.filter(|x| x["status"] == "True") {
            cond["lastTransitionTime"] = cur["lastTransitionTime"].clone();
        }
        conditions.retain(|x| x["type"] != "Progressing");
        conditions.push(cond);
    } else if timed_out(current.as_ref(), spec.progress_deadline_seconds, now) {
        let message = format!("ReplicaSet \"{new_name}\" has timed out progressing.");
        let cond = rollout::condition(
            "Progressing",
            "False",
            "ProgressDeadlineExceeded",
            &message,
            now,
        );
        rollout::set_condition(conditions, cond);
    }
}

/// The rollout made no progress for `progressDeadlineSeconds` since its last update.
fn timed_out(current: Option<&Value>, deadline: Option<i32>, now: &str) -> bool {
    let (Some(cur), Some(secs)) = (current, deadline) else {
        return false;
    };
    match cur["reason"].as_str() {
        Some("NewReplicaSetAvailable") => return false,
        Some("ProgressDeadlineExceeded") => return true,
        _ => {}
    }
    let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).ok();
    match (cur["lastUpdateTime"].as_str().and_then(parse), parse(now)) {
        (Some(from), Some(now)) => (now - from).num_seconds() > secs as i64,
        _ => false,
    }
}
