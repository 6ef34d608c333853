//! Reconciles one Memcached: plan, apply, follow its client CAs, report.
//!
//! The plan is pure ([`desired::plan`]): the defaulted spec, and the children it asks for (or
//! why none, for a spec the webhooks would have refused). `apply` writes the children that
//! differ from it; `client_cas` reads a changed ConfigMap of client CAs and asks the servers
//! still trusting a withdrawn one to restart in place; `report` writes the status and the
//! Event. Everything is read from the caches, so a Memcached whose children and status are as
//! they should be costs no request.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::warn;

use super::apply::{Applied, apply};
use super::client_cas;
use super::context::Run;
use super::desired;
use super::error::Error;
use super::report::report;
use crate::api::v1beta1::Memcached;

/// How long a reconcile may run before the controller warns that it is still waiting.
pub const SLOW_RECONCILE: Duration = Duration::from_secs(30);

/// Reconciles `object`, and says so every [`SLOW_RECONCILE`] while it has not finished: its
/// requests carry no deadline of their own, and a request the API server never answers would
/// otherwise hold the object (and a slot of `--max-concurrent-reconciles`) in silence.
pub async fn reconcile(object: Arc<Memcached>, run: Arc<Run>) -> Result<Action, Error> {
    let work = reconcile_one(&object, &run);
    let mut work = std::pin::pin!(work);
    let mut running = Duration::ZERO;
    let done = loop {
        tokio::select! {
            done = &mut work => break done,
            () = tokio::time::sleep(SLOW_RECONCILE) => {
                running += SLOW_RECONCILE;
                let memcached = format!("{}/{}", object.namespace().unwrap_or_default(), object.name_any());
                warn!(%memcached, running_s = running.as_secs(), "a reconcile waits for the API server");
            }
        }
    };
    run.forget_if_gone(&object);
    done
}

async fn reconcile_one(object: &Memcached, run: &Run) -> Result<Action, Error> {
    let context = &run.context;
    let _timer = context.metrics.measure();
    if object.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change()); // the garbage collector removes the children
    }
    // Judging a child from a cache still being filled would re-create what exists.
    run.children.listed().await;
    // The cache's latest version: `object` was taken when the reconcile was queued.
    let latest = run.memcacheds.get(&ObjectRef::from(object));
    let object = latest.as_deref().unwrap_or(object);
    let desired::Plan {
        effective,
        children,
    } = desired::plan(object, &context.defaults, context.platform);
    let (mut applied, invalid) = match children {
        Ok(children) => (apply(run, object, children).await, None),
        Err(why) => {
            context.metrics.error("invalid_spec");
            (Applied::default(), Some(why))
        }
    };
    let client_ca_trust = if invalid.is_some() {
        effective
            .status
            .as_ref()
            .and_then(|s| s.client_ca_trust.clone())
    } else {
        match client_cas::follow(run, object, &effective).await {
            Ok(trust) => trust,
            Err(error) => {
                applied.failure.get_or_insert(error);
                effective
                    .status
                    .as_ref()
                    .and_then(|s| s.client_ca_trust.clone())
            }
        }
    };
    report(run, object, &effective, invalid, applied, client_ca_trust).await
}
