//! Watches the metadata of every ConfigMap, keeping of each its name, namespace and resource
//! version: a Memcached whose client CAs come from a ConfigMap (`spec.tls.clientCA`) is woken
//! when it changes, and reads it again only then (`controller::client_cas`), so an unchanged
//! one costs no request. ConfigMaps carry no label of the operator's, so all are watched; a
//! metadata-only watch keeps that small.

use futures::stream::{BoxStream, StreamExt};
use kube::Client;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::Store;
use kube::runtime::{WatchStreamExt, watcher};

use super::compact::{CachedConfigMap, hash64};
use super::watch::{self, Listing};

/// The predicate of the watch: a ConfigMap that appears, changes or goes.
pub fn kept(config_map: &CachedConfigMap) -> Option<u64> {
    let metadata = &config_map.metadata;
    Some(hash64((
        &metadata.name,
        &metadata.namespace,
        &metadata.resource_version,
        config_map.gone,
    )))
}

/// Every ConfigMap's name, namespace and resource version, and those that changed.
pub fn config_maps(
    client: Client,
    on_listing: impl Fn(Listing) + Send + 'static,
) -> (Store<CachedConfigMap>, BoxStream<'static, CachedConfigMap>) {
    let api = Api::<PartialObjectMeta<CachedConfigMap>>::all(client);
    let events = watcher(api, watcher::Config::default())
        .default_backoff()
        .map(|event| event.map(|event| watch::map_events(event, CachedConfigMap::from)))
        .boxed();
    watch::follow("ConfigMaps", events, |_| {}, on_listing, kept)
}
