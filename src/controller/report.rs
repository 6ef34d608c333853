//! Says what a reconcile found and did: the Memcached's status, written by server-side apply
//! when it differs from the one the cache holds, then one Event for the changes made (whether
//! or not the status write succeeded), or a warning for a failure, an invalid spec, a child
//! whose API the cluster does not serve or cannot list, or a sidecar of its servers that stopped
//! on an error (with what it said of why).
//!
//! The status is applied with the operator's field manager, so a field it no longer sets (the
//! TLS or authentication of servers that no longer run with it) is removed. A reconcile that
//! wrote the status ends once the cache holds that write, so that the next reconcile of the
//! object judges the status as written, not the one before it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use tracing::info;

use super::apply::Applied;
use super::cache::memcacheds::STATUS;
use super::cache::pods::pod_of;
use super::context::Run;
use super::desired;
use super::desired::status::{self, Observed, Problem, desired_status};
use super::error::{Error, api_error};
use super::events;
use super::field_owners;
use crate::api::v1beta1::{ClientCaTrust, Memcached, MemcachedStatus};
use crate::operator;

/// Writes `object`'s status from its `effective` (defaulted) form, why its spec is `invalid`
/// if it is, what `applied` left and the client CAs' trust, then its Event; returns the reconcile's outcome: the
/// failure of a write, or to wait for the next change.
pub async fn report(
    run: &Run,
    object: &Memcached,
    effective: &Memcached,
    invalid: Option<String>,
    applied: Applied,
    client_ca_trust: Option<ClientCaTrust>,
) -> Result<Action, Error> {
    let context = &run.context;
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    let Applied {
        statefulset,
        statefulset_unseen,
        changes,
        failure,
        unavailable,
    } = applied;
    let statefulset = statefulset.or_else(|| {
        let cached = run
            .children
            .statefulsets
            .get(&ObjectRef::new(&name).within(&namespace));
        cached.map(|sts| (*sts).clone())
    });
    let ready_ordinals = (0..desired::replicas(effective))
        .filter(|i| {
            pod_of(
                &run.children.pods,
                &namespace,
                &format!("{name}-{i}"),
                &name,
            )
            .is_some_and(|pod| status::serving(&pod))
        })
        .collect();
    let restarts = server_restarts(run, &namespace, &name, desired::replicas(effective));
    let stopped = stopped_sidecars(run, &namespace, &name, desired::replicas(effective));
    let problem = match (invalid, &failure) {
        (Some(invalid), _) => Some(Problem::InvalidSpec(invalid)),
        (None, Some(error)) => Some(Problem::ReconcileFailed(error.to_string())),
        (None, None) if !unavailable.is_empty() => {
            Some(Problem::ApiUnavailable(unavailable.join("; ")))
        }
        (None, None) if !stopped.is_empty() => Some(Problem::SidecarStopped(stopped.join("; "))),
        (None, None) => None,
    };
    let mut status = desired_status(
        effective,
        &Observed {
            statefulset,
            statefulset_unseen,
            ready_ordinals,
        },
        problem.as_ref(),
        &Time(jiff::Timestamp::now()),
    );
    status.client_ca_trust = client_ca_trust;
    let written = if effective.status.as_ref() != Some(&status) {
        write_status(run, object, &status).await
    } else {
        Ok(())
    };
    // One Event for what this reconcile changed, however many children that was: the changes
    // were made whether or not the status could be written.
    if let Some((reason, note, related)) = events::summarize(changes) {
        context.events.changed(object, reason, note, related).await;
    }
    context.events.restarted(object, &restarts).await;
    if let Some(error) = failure.or(written.err()) {
        context
            .events
            .warn(object, "ReconcileFailed", error.to_string())
            .await;
        return Err(error);
    }
    match problem {
        Some(Problem::InvalidSpec(message)) => {
            context.events.warn(object, "InvalidSpec", message).await;
        }
        Some(Problem::ApiUnavailable(message)) => {
            // Not a failure: the rest is reconciled. Said once, until something else is said;
            // the kind's watch wakes every Memcached when it becomes available.
            context.clear_failures(&object.metadata);
            context.events.warn(object, "APIUnavailable", message).await;
        }
        Some(Problem::SidecarStopped(message)) => {
            // Not the operator's failure: said once, until something else is said; the pods'
            // watch wakes the Memcached when the sidecar runs again.
            context.clear_failures(&object.metadata);
            context.events.warn(object, "SidecarStopped", message).await;
        }
        _ => {
            context.clear_failures(&object.metadata);
            context.events.clear(&object.metadata);
        }
    }
    // Looked at again by the sweep (`RESYNC`), or sooner on a change.
    Ok(Action::await_change())
}

/// The servers (pods `name-0` to `name-{replicas - 1}`) whose memcached container the kubelet
/// restarted, as the pods' cache holds them.
fn server_restarts(
    run: &Run,
    namespace: &str,
    name: &str,
    replicas: i32,
) -> Vec<events::ServerRestart> {
    (0..replicas)
        .filter_map(|i| {
            let pod = format!("{name}-{i}");
            let cached = pod_of(&run.children.pods, namespace, &pod, name)?;
            let container = cached
                .status
                .as_ref()?
                .container_statuses
                .as_ref()?
                .first()?;
            let ended = container.last_state.as_ref()?.terminated.as_ref()?;
            Some(events::ServerRestart {
                pod,
                restarts: container.restart_count,
                reason: ended
                    .reason
                    .clone()
                    .unwrap_or_else(|| "no reason given".into()),
                exit_code: ended.exit_code,
                finished_at: ended.finished_at.as_deref().and_then(|t| t.parse().ok()),
            })
        })
        .collect()
}

/// What the operator's sidecars of the servers `name-0` to `name-{replicas - 1}` that stopped
/// on an error said of their end, as the pods' cache holds them.
fn stopped_sidecars(run: &Run, namespace: &str, name: &str, replicas: i32) -> Vec<String> {
    (0..replicas)
        .filter_map(|i| {
            let pod = format!("{name}-{i}");
            let cached = pod_of(&run.children.pods, namespace, &pod, name)?;
            let stopped = cached.status.as_ref()?.init_container_statuses.clone()?;
            Some((pod, stopped))
        })
        .flat_map(|(pod, stopped)| {
            Vec::from(stopped).into_iter().filter_map(move |container| {
                let ended = container.last_state?.terminated?;
                let said = ended
                    .message
                    .as_deref()
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                    .unwrap_or("it said nothing of why");
                Some(format!(
                    "{pod}: the sidecar {} stopped (exit code {}, {} restarts): {said}",
                    container.name, ended.exit_code, container.restart_count
                ))
            })
        })
        .collect()
}

/// Applies `status` to `object` (the cache's latest version), then waits for the cache to hold
/// the write.
async fn write_status(
    run: &Run,
    object: &Memcached,
    status: &MemcachedStatus,
) -> Result<(), Error> {
    let context = &run.context;
    let name = object.name_any();
    let memcacheds = Api::<Memcached>::namespaced(
        context.client.clone(),
        &object.namespace().unwrap_or_default(),
    );
    if object.metadata.managed_fields.is_some() {
        take_over_merged_status(object, &memcacheds).await?;
    }
    let body = serde_json::json!({
        "apiVersion": Memcached::api_version(&()),
        "kind": Memcached::kind(&()),
        "status": status,
    });
    // Field validation off: the body is serialised from typed structs (see `apply`).
    let apply = PatchParams::apply(operator::NAME)
        .force()
        .validation_ignore();
    context.metrics.status_writes.inc();
    memcacheds
        .patch_status(&name, &apply, &Patch::Apply(&body))
        .await
        .map_err(|e| api_error("apply status of", "Memcached", object, e))?;
    run.cache_moved_past(
        &ObjectRef::from(object),
        object.metadata.resource_version.as_deref(),
    )
    .await;
    Ok(())
}

/// Makes the status fields an earlier release wrote with a merge patch (an `Update` entry of
/// the operator's field manager for the status) part of its `Apply` entry, once, so that the
/// apply can remove what it no longer sets ([`field_owners`]). The write is conditional on the
/// resourceVersion read; a Memcached changed in between fails the reconcile, which is retried.
async fn take_over_merged_status(object: &Memcached, api: &Api<Memcached>) -> Result<(), Error> {
    let name = object.name_any();
    let live = api
        .get_metadata_opt(&name)
        .await
        .map_err(|e| api_error("get", "Memcached", object, e))?;
    let Some(live) = live else { return Ok(()) };
    let entries = live.metadata.managed_fields.as_deref().unwrap_or_default();
    let Some(folded) = field_owners::fold_updates_into_apply(entries, operator::NAME, STATUS)
    else {
        return Ok(());
    };
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": live.metadata.resource_version, "managedFields": folded}
    });
    api.patch_metadata(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| api_error("hand over status fields of", "Memcached", object, e))?;
    info!(
        memcached = %format!("{}/{name}", object.namespace().unwrap_or_default()),
        "the status fields a merge patch wrote are now the controller's applied fields"
    );
    Ok(())
}
