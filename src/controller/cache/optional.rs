//! Follows a kind another project defines (cert-manager's Certificate, the Prometheus
//! Operator's ServiceMonitor and PrometheusRule): watched once its CustomResourceDefinition exists, whenever that
//! is, and never waited for.
//!
//! The CustomResourceDefinition is watched by name, metadata only. When it appears, the kind's
//! own watch starts (metadata only, the children the operator made); when it goes, that watch
//! stops and the cache is dropped. Until the kind has been listed, and while its watch fails
//! (forbidden, not served at the version the operator writes, a broken conversion webhook),
//! the kind is not available: the Memcacheds that ask for one are told why, and every other
//! Memcached is reconciled as usual. Each change of availability wakes every Memcached.

use std::sync::{Arc, RwLock};

use futures::channel::mpsc;
use futures::stream::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::child::{Kept, kept, ours, owner_of};
use super::known::KnownChildren;
use super::watch::{self, Listing};
use crate::api::v1beta1::Memcached;

/// Whether an optional kind can be used now.
#[derive(Clone, Debug)]
enum State<C: Resource<DynamicType = ()> + Clone + 'static> {
    /// Its CustomResourceDefinition does not exist (or has not been looked at yet).
    Unserved,
    /// Watched, not listed: `Some` is why the last attempt failed.
    Unlisted(Store<C>, Option<String>),
    /// Listed: its cache is complete.
    Listed(Store<C>),
}

/// An optional kind of child, cached as `C`.
pub struct Optional<C: Resource<DynamicType = ()> + Clone + 'static> {
    /// The kind (`Certificate`).
    pub kind: &'static str,
    /// Its API (`cert-manager.io/v1`).
    pub api: &'static str,
    /// The name of its CustomResourceDefinition (`certificates.cert-manager.io`).
    pub crd: &'static str,
    state: RwLock<State<C>>,
}

impl<C: Resource<DynamicType = ()> + Clone + 'static> Optional<C> {
    /// The kind `kind` of the API `api`, defined by the CustomResourceDefinition `crd`; not
    /// available until its watch has listed it.
    pub fn new(kind: &'static str, api: &'static str, crd: &'static str) -> Self {
        Self {
            kind,
            api,
            crd,
            state: RwLock::new(State::Unserved),
        }
    }

    /// The kind's cache, complete; or why the kind cannot be used now.
    pub fn available(&self) -> Result<Store<C>, String> {
        let kind = self.kind;
        match &*self.state.read().unwrap_or_else(|e| e.into_inner()) {
            State::Listed(store) => Ok(store.clone()),
            State::Unserved => Err(format!(
                "the cluster does not serve {} (no CustomResourceDefinition {}); it is used once \
                 installed",
                self.api, self.crd
            )),
            State::Unlisted(_, None) => Err(format!("{kind}s are not listed yet")),
            State::Unlisted(_, Some(error)) => Err(format!("{kind}s cannot be listed: {error}")),
        }
    }

    /// Changes the state; whether that changed the kind's availability.
    fn set(&self, state: State<C>) -> bool {
        let mut current = self.state.write().unwrap_or_else(|e| e.into_inner());
        let before = availability(&current);
        *current = state;
        availability(&current) != before
    }

    /// Records what the kind's watch says of its listing; whether availability changed.
    fn listing(&self, listing: Listing) -> bool {
        let mut current = self.state.write().unwrap_or_else(|e| e.into_inner());
        let before = availability(&current);
        let store = match &*current {
            State::Unserved => return false,
            State::Unlisted(store, _) | State::Listed(store) => store.clone(),
        };
        *current = match listing {
            Listing::Listed => State::Listed(store),
            Listing::Failed(error) => State::Unlisted(store, Some(error)),
        };
        availability(&current) != before
    }
}

/// What a state says of availability, for comparing two.
fn availability<C: Resource<DynamicType = ()> + Clone>(state: &State<C>) -> (u8, Option<String>) {
    match state {
        State::Unserved => (0, None),
        State::Unlisted(_, error) => (1, error.clone()),
        State::Listed(_) => (2, None),
    }
}

/// Where an optional kind's watch sends its wake-ups.
#[derive(Clone)]
pub struct Wakes {
    /// The Memcached a changed child belongs to.
    pub owner: mpsc::UnboundedSender<ObjectRef<Memcached>>,
    /// Every Memcached: the kind's availability changed.
    pub all: mpsc::UnboundedSender<()>,
}

/// Follows the optional kind `K` on a task of its own: its CustomResourceDefinition, then its
/// children. `report` is told of every listing and failure of the kind's watch (for the
/// metrics).
pub fn follow<C: Kept + From<PartialObjectMeta<C>>>(
    client: Client,
    optional: Arc<Optional<C>>,
    known: Arc<KnownChildren>,
    wakes: Wakes,
    report: impl Fn(Listing) + Send + Sync + Clone + 'static,
) -> JoinHandle<()>
where
    PartialObjectMeta<C>: Resource<DynamicType = ()>,
{
    tokio::spawn(async move {
        let crds = Api::<PartialObjectMeta<CustomResourceDefinition>>::all(client.clone());
        let by_name = watcher::Config::default().fields(&format!("metadata.name={}", optional.crd));
        let mut events = std::pin::pin!(watcher(crds, by_name).default_backoff());
        let mut watching: Option<JoinHandle<()>> = None;
        let mut listed_present = false;
        while let Some(event) = events.next().await {
            let present = match event {
                Ok(watcher::Event::Init) => {
                    listed_present = false;
                    continue;
                }
                Ok(watcher::Event::InitApply(_)) => {
                    listed_present = true;
                    continue;
                }
                Ok(watcher::Event::InitDone) => listed_present,
                Ok(watcher::Event::Apply(_)) => true,
                Ok(watcher::Event::Delete(_)) => false,
                Err(error) => {
                    warn!(%error, crd = optional.crd, "watching the CustomResourceDefinition failed; retrying with backoff");
                    continue;
                }
            };
            match (present, &watching) {
                (true, None) => {
                    info!(
                        kind = optional.kind,
                        api = optional.api,
                        "the API is served: watching it"
                    );
                    watching = Some(watch_kind(
                        client.clone(),
                        optional.clone(),
                        known.clone(),
                        wakes.clone(),
                        report.clone(),
                    ));
                    let _ = wakes.all.unbounded_send(());
                }
                (false, Some(_)) => {
                    info!(
                        kind = optional.kind,
                        api = optional.api,
                        "the API is no longer served"
                    );
                    if let Some(task) = watching.take() {
                        task.abort();
                    }
                    known.relisting(C::KIND);
                    report(Listing::Listed);
                    if optional.set(State::Unserved) {
                        let _ = wakes.all.unbounded_send(());
                    }
                }
                _ => {}
            }
        }
    })
}

/// Watches the operator's children of the optional kind `K` on a task of its own, filling the
/// kind's cache and sending the Memcacheds whose children changed.
fn watch_kind<C: Kept + From<PartialObjectMeta<C>>>(
    client: Client,
    optional: Arc<Optional<C>>,
    known: Arc<KnownChildren>,
    wakes: Wakes,
    report: impl Fn(Listing) + Send + Sync + 'static,
) -> JoinHandle<()>
where
    PartialObjectMeta<C>: Resource<DynamicType = ()>,
{
    let api = Api::<PartialObjectMeta<C>>::all(client);
    let events = watcher(api, ours())
        .default_backoff()
        .map(|event| event.map(|event| watch::map_events(event, C::from)))
        .boxed();
    let records = {
        let known = known.clone();
        move |event: &watcher::Event<C>| match event {
            watcher::Event::Delete(child) => known.forget(C::KIND, child.meta()),
            watcher::Event::Init => known.relisting(C::KIND),
            _ => {}
        }
    };
    let on_listing = {
        let optional = optional.clone();
        let all = wakes.all.clone();
        move |listing: Listing| {
            report(listing.clone());
            if optional.listing(listing) {
                let _ = all.unbounded_send(());
            }
        }
    };
    let (store, changed) = watch::follow(optional.kind, events, records, on_listing, kept::<C>);
    optional.set(State::Unlisted(store, None));
    let owner = wakes.owner;
    tokio::spawn(changed.for_each(move |child| {
        if let Some(memcached) = owner_of(&child) {
            let _ = owner.unbounded_send(memcached);
        }
        futures::future::ready(())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::cache::compact::CachedCertificate;

    fn certificates() -> Optional<CachedCertificate> {
        Optional::new(
            "Certificate",
            "cert-manager.io/v1",
            "certificates.cert-manager.io",
        )
    }

    #[test]
    fn an_optional_kind_is_available_only_once_listed_and_says_why_not() {
        let optional = certificates();
        let unserved = optional.available().expect_err("unserved");
        assert!(
            unserved.contains("cert-manager.io/v1")
                && unserved.contains("certificates.cert-manager.io"),
            "{unserved}"
        );
        let (store, _writer) = kube::runtime::reflector::store();
        assert!(optional.set(State::Unlisted(store, None)));
        assert_eq!(
            optional.available().expect_err("not listed"),
            "Certificates are not listed yet"
        );
        assert!(optional.listing(Listing::Failed("forbidden".into())));
        assert_eq!(
            optional.available().expect_err("failing"),
            "Certificates cannot be listed: forbidden"
        );
        assert!(
            !optional.listing(Listing::Failed("forbidden".into())),
            "no change"
        );
        assert!(optional.listing(Listing::Listed));
        assert!(optional.available().is_ok());
        assert!(optional.set(State::Unserved));
        assert!(
            !optional.listing(Listing::Listed),
            "a stopped watch's last word"
        );
        assert!(optional.available().is_err());
    }
}
