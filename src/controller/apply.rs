//! Brings a Memcached's children to what its plan says: the writes that differ, each by
//! server-side apply with the operator's field manager, and the removal of an optional child
//! (a budget, a NetworkPolicy, a Certificate, a ServiceMonitor, a PrometheusRule) no longer
//! asked for. A child the caches show as it should be costs no request. A Certificate,
//! ServiceMonitor or PrometheusRule asked for where the cluster does not serve its API, or
//! where it cannot be listed now, is not written, and said so (the PrometheusRule, on by
//! default, only when asked for in so many words); the other children are written all the
//! same.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use tracing::info;

use super::cache::child::Child;
use super::cache::compact::{CachedStatefulSet, Marked, Marks, hash64};
use super::cache::known::UNSEEN_PATIENCE;
use super::cache::optional::Optional;
use super::context::Run;
use super::desired::DesiredChildren;
use super::desired::children::certificate::CLIENT_SUFFIX;
use super::desired::drift::{self, Verdict};
use super::error::{Error, api_error};
use super::events::Change;
use super::field_owners;
use crate::api::v1beta1::Memcached;
use crate::operator;

/// What applying a plan's children did.
#[derive(Debug, Default)]
pub struct Applied {
    /// The StatefulSet as the cache or the apply has it now; `None` when it is not known yet.
    pub statefulset: Option<CachedStatefulSet>,
    /// The StatefulSet was written moments ago, at its desired state, and the cache has yet to
    /// see it: nothing can be said of it until its watch event, which wakes the Memcached again.
    pub statefulset_unseen: bool,
    /// The changes made, for the Event.
    pub changes: Vec<Change>,
    /// The first write that failed.
    pub failure: Option<Error>,
    /// The children asked for whose API the cluster does not serve: what to tell the user.
    pub unavailable: Vec<String>,
}

/// Brings the children of `owner` to `desired`, at once: they are independent, so a reconcile
/// that writes them waits for one round trip rather than one per child.
pub async fn apply(run: &Run, owner: &Memcached, desired: DesiredChildren) -> Applied {
    let DesiredChildren {
        statefulset,
        service,
        budget,
        network_policy,
        certificate,
        client_certificate,
        service_monitor,
        prometheus_rule,
        prometheus_rule_asked,
    } = desired;
    let (mut sts_changes, mut svc_changes) = (Vec::new(), Vec::new());
    let (mut pdb_changes, mut policy_changes) = (Vec::new(), Vec::new());
    let (mut cert_changes, mut monitor_changes) = (Vec::new(), Vec::new());
    let (mut client_cert_changes, mut rule_changes) = (Vec::new(), Vec::new());
    let children = &run.children;
    let mut unavailable = Vec::new();
    let name = owner.name_any();
    let client_name = format!("{name}{CLIENT_SUFFIX}");
    let certificate = served(certificate, &children.certificates, &mut unavailable);
    let client_certificate = served(client_certificate, &children.certificates, &mut unavailable);
    // Both Certificates say the same when their kind cannot be used.
    unavailable.dedup();
    let service_monitor = served(
        service_monitor,
        &children.service_monitors,
        &mut unavailable,
    );
    // On by default: a cluster with no PrometheusRules is said to lack them only when they
    // were asked for in so many words.
    let mut unsaid = Vec::new();
    let prometheus_rule = served(
        prometheus_rule,
        &children.prometheus_rules,
        if prometheus_rule_asked {
            &mut unavailable
        } else {
            &mut unsaid
        },
    );
    let (sts, svc, pdb, policy, cert, client_cert, monitor, rules) = futures::join!(
        ensure(
            run,
            owner,
            &name,
            statefulset,
            &children.statefulsets,
            &mut sts_changes
        ),
        ensure(
            run,
            owner,
            &name,
            service,
            &children.services,
            &mut svc_changes
        ),
        ensure_or_remove(
            run,
            owner,
            &name,
            budget,
            &children.budgets,
            &mut pdb_changes
        ),
        ensure_or_remove(
            run,
            owner,
            &name,
            network_policy,
            &children.network_policies,
            &mut policy_changes
        ),
        async {
            match certificate {
                Some((desired, cache)) => {
                    ensure_or_remove(run, owner, &name, desired, &cache, &mut cert_changes).await
                }
                None => Ok(()),
            }
        },
        async {
            match client_certificate {
                Some((desired, cache)) => {
                    let changes = &mut client_cert_changes;
                    ensure_or_remove(run, owner, &client_name, desired, &cache, changes).await
                }
                None => Ok(()),
            }
        },
        async {
            match service_monitor {
                Some((desired, cache)) => {
                    ensure_or_remove(run, owner, &name, desired, &cache, &mut monitor_changes).await
                }
                None => Ok(()),
            }
        },
        async {
            match prometheus_rule {
                Some((desired, cache)) => {
                    ensure_or_remove(run, owner, &name, desired, &cache, &mut rule_changes).await
                }
                None => Ok(()),
            }
        },
    );
    let changes = [
        sts_changes,
        svc_changes,
        pdb_changes,
        policy_changes,
        cert_changes,
        client_cert_changes,
        monitor_changes,
        rule_changes,
    ]
    .concat();
    let failure = [
        svc.map(drop),
        pdb,
        policy,
        cert,
        client_cert,
        monitor,
        rules,
    ]
    .into_iter()
    .find_map(Result::err);
    let statefulset_unseen = matches!(sts, Ok(None));
    let (statefulset, failure) = match sts {
        Ok(sts) => (sts, failure),
        Err(error) => (None, Some(error)),
    };
    Applied {
        statefulset,
        statefulset_unseen,
        changes,
        failure,
        unavailable,
    }
}

/// An optional child of a kind another project defines, with the cache of its kind: `None`
/// when the kind cannot be used now, and then, if it is asked for, what to tell the user.
fn served<K: Child>(
    desired: Option<K>,
    optional: &Optional<K::Cached>,
    unavailable: &mut Vec<String>,
) -> Option<(Option<K>, Store<K::Cached>)> {
    match optional.available() {
        Ok(cache) => Some((desired, cache)),
        Err(why) => {
            if desired.is_some() {
                unavailable.push(format!("no {} is written: {why}", K::KIND));
            }
            None
        }
    }
}

/// Brings one child, `name` (the Memcached's own name, or the sidecars' Certificate's), to its
/// desired state, judged from the cache; returns what the cache keeps of it now, or `None` for
/// a child written moments ago that the cache has yet to see.
///
/// The desired object is stamped with its hash ([`drift::stamp`]). A current child costs no
/// request; one the cache cannot judge is fetched and compared field by field; one that is
/// missing or differs is applied (after [`take_over_created_fields`]), and what the apply
/// returned is remembered ([`KnownChildren`](super::cache::known::KnownChildren)).
async fn ensure<K>(
    run: &Run,
    owner: &Memcached,
    name: &str,
    mut desired: K,
    cache: &Store<K::Cached>,
    changes: &mut Vec<Change>,
) -> Result<Option<K::Cached>, Error>
where
    K: Child + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    let client = &run.context.client;
    let kind = K::KIND;
    let hash = drift::stamp(&mut desired);
    let namespace = owner.namespace().unwrap_or_default();
    let memcached = format!("{namespace}/{}", owner.name_any());
    let cached = cache.get(&ObjectRef::new(name).within(&namespace));
    // For a child the cache lacks, only a record of a write moments ago says it exists.
    let known = match &cached {
        Some(_) => run.known.get(kind, desired.meta()),
        None => run
            .known
            .learned_within(kind, desired.meta(), UNSEEN_PATIENCE),
    };
    let judged = cached
        .as_deref()
        .map(|c| (c.meta(), c.marks(), K::spec_version(c.meta())));
    let api = Api::<K>::namespaced(client.clone(), &namespace);
    let mut exists = cached.is_some();
    // Whether a create (release 0.1.0's) still owns fields of the child: from the cache, or
    // from the child itself when it is read below.
    let mut created = cached
        .as_ref()
        .map_or(Created::Unknown, |c| Created::Cached(c.marks().created));
    match (drift::judge(desired.meta(), judged, known), cached) {
        (Verdict::Current, Some(cached)) => return Ok(Some((*cached).clone())),
        (Verdict::Unseen, _) => return Ok(None),
        (Verdict::Write(reason), _) if exists => {
            info!(memcached = %memcached, kind, field = %reason, "child differs from its desired state")
        }
        (Verdict::Write(_), _) => {}
        (Verdict::Current | Verdict::Verify, _) => {
            let live = api
                .get_opt(name)
                .await
                .map_err(|e| api_error("get", kind, owner, e))?;
            exists = live.is_some();
            if let Some(live) = live {
                let (want, have) = (serde_json::to_value(&desired), serde_json::to_value(&live));
                let difference = match (want, have) {
                    (Ok(want), Ok(have)) => drift::first_difference(&want, &have),
                    _ => Some(String::new()),
                };
                match difference {
                    None => {
                        let version = K::spec_version(live.meta());
                        let kept = K::cached(live);
                        run.known.learn(
                            kind,
                            desired.meta(),
                            drift::known(kept.meta(), kept.marks(), version, hash),
                        );
                        return Ok(Some(kept));
                    }
                    Some(path) => {
                        info!(memcached = %memcached, kind, field = %path, "child differs from its desired state");
                        created = Created::Read(Box::new(live.meta().clone()));
                    }
                }
            }
        }
    }
    run.context.metrics.child_written(kind);
    if exists {
        take_over_created_fields(owner, &memcached, &api, name, created).await?;
    }
    // Field validation off: the apply is serialised from typed structs, so it carries no
    // unknown or duplicate field, and the server's default (Warn) would parse every apply
    // body a second time, as YAML, for Warning headers that kube's client does not read.
    let apply = PatchParams::apply(operator::NAME)
        .force()
        .validation_ignore();
    let applied = api
        .patch(name, &apply, &Patch::Apply(&desired))
        .await
        .map_err(|e| api_error("apply", kind, owner, e))?;
    let version = K::spec_version(applied.meta());
    let related = applied.object_ref(&());
    let kept = K::cached(applied);
    run.known.learn(
        kind,
        kept.meta(),
        drift::known(kept.meta(), kept.marks(), version, hash),
    );
    let (reason, verb) = if exists {
        ("Updated", "updated")
    } else {
        ("Created", "created")
    };
    info!(memcached = %memcached, kind, verb, "child written");
    changes.push(Change {
        reason,
        note: format!("{kind} {name} {verb}"),
        related,
    });
    Ok(Some(kept))
}

/// What is known of whether a create still owns fields of a child.
enum Created {
    /// Nothing: the child is read (metadata only) if it comes to an apply.
    Unknown,
    /// What the cache keeps ([`Marks::created`](super::cache::compact::Marks::created)).
    Cached(bool),
    /// The child's metadata, just read.
    Read(Box<ObjectMeta>),
}

/// Makes the fields a create of the operator's field manager recorded (an `Update` entry, as
/// release 0.1.0 created children) part of its `Apply` entry before an apply, so that the
/// apply can remove what it no longer sets ([`field_owners`]). Happens once per such child;
/// costs nothing for a child the cache says carries no such entry. The write is conditional
/// on the resourceVersion read, and a child changed in between fails the reconcile, which is
/// retried.
async fn take_over_created_fields<K>(
    owner: &Memcached,
    memcached: &str,
    api: &Api<K>,
    name: &str,
    created: Created,
) -> Result<(), Error>
where
    K: Child + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    let metadata = match created {
        Created::Cached(false) => return Ok(()),
        Created::Read(metadata) => *metadata,
        Created::Cached(true) | Created::Unknown => {
            let live = api
                .get_metadata_opt(name)
                .await
                .map_err(|e| api_error("get", K::KIND, owner, e))?;
            match live {
                Some(live) => live.metadata,
                None => return Ok(()),
            }
        }
    };
    let entries = metadata.managed_fields.as_deref().unwrap_or_default();
    let Some(folded) = field_owners::fold_updates_into_apply(entries, operator::NAME, "") else {
        return Ok(());
    };
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": metadata.resource_version, "managedFields": folded}
    });
    api.patch_metadata(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| api_error("hand over fields of", K::KIND, owner, e))?;
    info!(
        memcached,
        kind = K::KIND,
        "the fields recorded by its create are now the controller's applied fields"
    );
    Ok(())
}

/// Brings an optional child `name` (a PodDisruptionBudget, a NetworkPolicy, a Certificate, a
/// ServiceMonitor) to its desired state, or, when none is desired, deletes the one the
/// Memcached owns by that name if it exists.
///
/// Whether one exists comes from `cache`, so the common case, none, costs no request; only a
/// child the controller applied that the cache has not seen yet is looked up (metadata only).
/// The delete is conditional on the uid seen, and a child already gone counts as removed: the
/// cache may lag behind a deletion.
async fn ensure_or_remove<K>(
    run: &Run,
    owner: &Memcached,
    name: &str,
    desired: Option<K>,
    cache: &Store<K::Cached>,
    changes: &mut Vec<Change>,
) -> Result<(), Error>
where
    K: Child + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
{
    if let Some(desired) = desired {
        return ensure(run, owner, name, desired, cache, changes)
            .await
            .map(drop);
    }
    let kind = K::KIND;
    let name = name.to_string();
    let namespace = owner.namespace().unwrap_or_default();
    let api = Api::<K>::namespaced(run.context.client.clone(), &namespace);
    let owned_uid = |marks: &Marks, metadata: &ObjectMeta| {
        let owned = marks
            .owner
            .as_ref()
            .is_some_and(|o| o.uid == hash64(owner.uid()));
        owned.then(|| metadata.uid.clone()).flatten()
    };
    let cached = cache.get(&ObjectRef::new(&name).within(&namespace));
    let unseen = ObjectMeta {
        name: Some(name.clone()),
        namespace: Some(namespace.clone()),
        ..ObjectMeta::default()
    };
    let uid = match cached {
        Some(child) => owned_uid(child.marks(), child.meta()),
        None if run
            .known
            .learned_within(kind, &unseen, UNSEEN_PATIENCE)
            .is_some() =>
        {
            api.get_metadata_opt(&name)
                .await
                .map_err(|e| api_error("get", kind, owner, e))?
                .and_then(|child| owned_uid(&Marks::of(&child.metadata), &child.metadata))
        }
        None => None,
    };
    let Some(uid) = uid else { return Ok(()) };
    run.context.metrics.child_written(kind);
    let only_that_one = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &only_that_one).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(error) => return Err(api_error("delete", kind, owner, error)),
    }
    run.known.forget(kind, &unseen);
    info!(memcached = %format!("{namespace}/{name}"), kind, verb = "deleted", "child written");
    let related = ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(kind.into()),
        name: Some(name.clone()),
        namespace: Some(namespace),
        uid: Some(uid),
        ..ObjectReference::default()
    };
    changes.push(Change {
        reason: "Deleted",
        note: format!("{kind} {name} deleted"),
        related,
    });
    Ok(())
}
