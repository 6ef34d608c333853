//! Says what a reconcile found and did: the Memcached's status, written when it differs from
//! the one the cache (or the controller's last write) holds, then one Event for the changes
//! made, or a warning for a failure, an invalid spec, or a child whose API the cluster does
//! not serve.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use super::apply::Applied;
use super::cache;
use super::desired;
use super::desired::status::{self, Observed, Problem, desired_status};
use super::events;
use super::{Error, Run, api_error};
use crate::api::v1beta1::Memcached;

/// Writes `object`'s status from its `effective` (defaulted) form, why its spec is `invalid`
/// if it is, and what `applied` left, then its Event; returns the reconcile's outcome: the
/// failure of a write, or to wait for the next change.
pub async fn report(
    run: &Run,
    object: &Memcached,
    effective: &Memcached,
    invalid: Option<String>,
    applied: Applied,
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
            cache::pod_of(
                &run.children.pods,
                &namespace,
                &format!("{name}-{i}"),
                &name,
            )
            .is_some_and(|pod| status::serving(&pod))
        })
        .collect();
    let problem = match (invalid, &failure) {
        (Some(invalid), _) => Some(Problem::InvalidSpec(invalid)),
        (None, Some(error)) => Some(Problem::ReconcileFailed(error.to_string())),
        (None, None) => None,
    };
    let status = desired_status(
        effective,
        &Observed {
            statefulset,
            statefulset_unseen,
            ready_ordinals,
        },
        problem.as_ref(),
        &Time(jiff::Timestamp::now()),
    );
    if effective.status.as_ref() != Some(&status) {
        let memcacheds = Api::<Memcached>::namespaced(context.client.clone(), &namespace);
        let patch = Patch::Merge(serde_json::json!({ "status": status }));
        let patched = memcacheds
            .patch_status(&name, &PatchParams::default(), &patch)
            .await
            .map_err(|e| api_error("patch status of", "Memcached", object, e))?;
        run.stand_in.wrote(&patched.metadata, status);
    }
    // One Event for what this reconcile changed, however many children that was.
    if let Some((reason, note, related)) = events::summarize(changes) {
        context.events.changed(object, reason, note, related).await;
    }
    if let Some(error) = failure {
        context
            .events
            .warn(object, "ReconcileFailed", error.to_string())
            .await;
        return Err(error);
    }
    if let Some(Problem::InvalidSpec(message)) = problem {
        context.events.warn(object, "InvalidSpec", message).await;
        return Ok(Action::await_change());
    }
    context.clear_failures(object);
    if !unavailable.is_empty() {
        // Not a failure: the rest is reconciled. Said once, until something else is said.
        context
            .events
            .warn(object, "APIUnavailable", unavailable.join("; "))
            .await;
        return Ok(Action::await_change());
    }
    context.events.clear(&object.metadata);
    // Looked at again by the sweep (`RESYNC`), or sooner on a change.
    Ok(Action::await_change())
}
