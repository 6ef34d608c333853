//! Which client CAs a Memcached's servers trust, and the restart in place that drops a
//! withdrawn one: pure, from the ConfigMap of `spec.tls.clientCA` as last read, the status as
//! written, and the pods as the cache holds them.
//!
//! memcached's `refresh_certs` adds the CAs of `ca.crt` to the ones it trusts and removes
//! none, so a CA withdrawn from the ConfigMap stays trusted by every server started before,
//! until it starts again. The status keeps the CAs of the content last read and those
//! withdrawn since ([`ClientCaTrust`]); a new withdrawal starts a roll. Each server started
//! before it is asked in turn, by an annotation of its pod that the supervisor reads
//! (`sidecar::ca_restart`), to restart in place (warm: its items are kept) once its `ca.crt`
//! is the new content; one at a time, while every other server is ready, and only where the
//! PodDisruptionBudget allows a server to be down. The roll ends when each of them has
//! restarted since it was asked (or was created after the withdrawal was seen).

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::v1beta1::{ClientCaTrust, DEFAULT_REPLICAS, Memcached};

/// The ConfigMap's key, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    /// The ConfigMap's resource version.
    pub resource_version: String,
    /// The SHA-256 of the key's content (lowercase hex).
    pub sha256: String,
    /// Its CAs, by the SHA-256 of their DER (lowercase hex).
    pub cas: BTreeSet<String>,
}

/// The trust after `read`, from the `previous` one: the CAs read, and those withdrawn since
/// that servers may still trust. A CA withdrawn now starts a roll (`restarting_since` is
/// `now`), and so does any change of the content while one runs, since the servers asked must
/// then start on the new content; without a withdrawn CA left there is none.
pub fn after_read(previous: Option<&ClientCaTrust>, read: Read, now: &Time) -> ClientCaTrust {
    let listed = |list: &Option<Vec<String>>| -> BTreeSet<String> {
        list.iter().flatten().cloned().collect()
    };
    let (before, withdrawn_before, since, sha256) = match previous {
        Some(previous) => (
            listed(&previous.cas),
            listed(&previous.withdrawn),
            previous.restarting_since.clone(),
            previous.sha256.clone(),
        ),
        // The first read: the servers are taken to run with this content.
        None => (read.cas.clone(), BTreeSet::new(), None, None),
    };
    let withdrawn: Vec<String> = before
        .union(&withdrawn_before)
        .filter(|ca| !read.cas.contains(*ca))
        .cloned()
        .collect();
    let newly_withdrawn = before.iter().any(|ca| !read.cas.contains(ca));
    let changed_while_rolling = since.is_some() && sha256.as_deref() != Some(&read.sha256);
    let restarting_since = if withdrawn.is_empty() {
        None
    } else if newly_withdrawn || changed_while_rolling || since.is_none() {
        Some(now.clone())
    } else {
        since
    };
    ClientCaTrust {
        resource_version: Some(read.resource_version),
        sha256: Some(read.sha256),
        cas: Some(read.cas.into_iter().collect()),
        withdrawn: Some(withdrawn),
        restarting_since,
    }
}

/// What the roll needs to know of a server's pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Server {
    /// Its ordinal.
    pub ordinal: i32,
    /// Ready, and not being deleted.
    pub serving: bool,
    /// When the pod was created.
    pub created: Option<Time>,
    /// The digest its annotation asks memcached to restart onto, if any.
    pub asked: Option<String>,
    /// memcached's restart count when it was asked.
    pub restarts_when_asked: Option<i32>,
    /// memcached's restart count now.
    pub restarts: i32,
}

/// The roll's next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// No roll runs.
    Idle,
    /// Every server started before the withdrawal restarted since: the withdrawn CAs are
    /// trusted no more.
    Done,
    /// A server is missing, not ready, or restarting; or the budget allows none down.
    Wait(String),
    /// Ask this server to restart onto `sha256`, recording its restart count.
    Ask {
        /// Its ordinal.
        ordinal: i32,
        /// The digest to restart onto.
        sha256: String,
        /// memcached's restart count now.
        restarts: i32,
    },
}

/// Whether `server` needs no restart in the roll that began at `since` onto `sha256`: created
/// after it began, or restarted since it was asked.
fn restarted(server: &Server, since: &Time, sha256: &str) -> bool {
    server
        .created
        .as_ref()
        .is_some_and(|created| created.0 > since.0)
        || (server.asked.as_deref() == Some(sha256)
            && server
                .restarts_when_asked
                .is_some_and(|asked| server.restarts > asked))
}

/// How many servers the PodDisruptionBudget lets be down at once (the operator's budget, as
/// the disruption controller counts it: a percentage rounds up).
pub fn budget(memcached: &Memcached) -> i32 {
    let replicas = memcached.spec.replicas.unwrap_or(DEFAULT_REPLICAS);
    if replicas < 2 {
        return 1; // no budget is written for one server
    }
    match memcached
        .spec
        .pod_disruption_budget
        .as_ref()
        .and_then(|p| p.max_unavailable.as_ref())
    {
        None => 1,
        Some(IntOrString::Int(count)) => *count,
        Some(IntOrString::String(percent)) => {
            let percent: i64 = percent.trim_end_matches('%').parse().unwrap_or(0);
            i32::try_from((percent * i64::from(replicas) + 99) / 100).unwrap_or(0)
        }
    }
}

/// The roll's next step, for `replicas` servers with `budget` allowed down, from `servers`
/// (in any order, one per existing pod).
pub fn next_step(trust: &ClientCaTrust, replicas: i32, budget: i32, servers: &[Server]) -> Step {
    let (Some(since), Some(sha256)) = (&trust.restarting_since, &trust.sha256) else {
        return Step::Idle;
    };
    let mut servers: Vec<&Server> = servers.iter().filter(|s| s.ordinal < replicas).collect();
    servers.sort_by_key(|s| s.ordinal);
    let pending: Vec<&&Server> = servers
        .iter()
        .filter(|s| !restarted(s, since, sha256))
        .collect();
    if pending.is_empty() && servers.iter().all(|s| s.serving) {
        return Step::Done;
    }
    if budget < 1 {
        return Step::Wait("the PodDisruptionBudget allows no server down".into());
    }
    if let Some(down) =
        (0..replicas).find(|ordinal| !servers.iter().any(|s| s.ordinal == *ordinal && s.serving))
    {
        return Step::Wait(format!("server {down} is not ready"));
    }
    if let Some(asked) = pending.iter().find(|s| s.asked.as_deref() == Some(sha256)) {
        return Step::Wait(format!("server {} is restarting", asked.ordinal));
    }
    match pending.first() {
        Some(next) => Step::Ask {
            ordinal: next.ordinal,
            sha256: sha256.clone(),
            restarts: next.restarts,
        },
        None => Step::Wait("the servers are getting ready".into()),
    }
}

#[cfg(test)]
mod tests;
