//! Keeps a Memcached's servers from trusting a client CA withdrawn from the ConfigMap of
//! `spec.tls.clientCA` (with `memcached.warmRestart`): reads the ConfigMap when its resource
//! version differs from the one the status last recorded, and asks the servers started before
//! a withdrawal to restart in place, one at a time, by annotating their pods
//! (`desired::client_cas` decides, `sidecar::ca_restart` restarts). An unchanged ConfigMap and
//! a roll with nothing to do cost no request.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::cache::compact::CachedConfigMap;
use super::cache::pods::{MEMCACHED_CONTAINER, pod_of};
use super::context::Run;
use super::desired::children::supervision::restarts_for_client_ca;
use super::desired::client_cas::{Read, Server, Step, after_read, budget, next_step};
use super::desired::status::serving;
use super::error::{Error, api_error};
use crate::api::v1beta1::{ClientCaTrust, DEFAULT_REPLICAS, Memcached};
use crate::sidecar::ca_restart::{REQUEST_ANNOTATION, RESTARTS_ANNOTATION, digest};
use crate::sidecar::trust::fingerprints;

/// The Memcacheds whose client CAs come from `config_map`: those a change of it wakes.
pub fn readers(
    memcacheds: &Store<Memcached>,
    config_map: &CachedConfigMap,
) -> Vec<ObjectRef<Memcached>> {
    let (Some(name), Some(namespace)) = (
        config_map.metadata.name.as_deref(),
        config_map.metadata.namespace.as_deref(),
    ) else {
        return Vec::new();
    };
    memcacheds
        .state()
        .iter()
        .filter(|memcached| memcached.metadata.namespace.as_deref() == Some(namespace))
        .filter(|memcached| {
            memcached
                .spec
                .tls
                .as_ref()
                .and_then(|tls| tls.client_ca.as_ref())
                .is_some_and(|source| source.config_map_name == name)
        })
        .map(|memcached| ObjectRef::from(memcached.as_ref()))
        .collect()
}

/// The trust `effective` (defaulted) should report, after reading its ConfigMap if it changed
/// and taking the roll's next step; `None` where the operator does not restart its servers
/// for a withdrawn CA.
pub async fn follow(
    run: &Run,
    object: &Memcached,
    effective: &Memcached,
) -> Result<Option<ClientCaTrust>, Error> {
    let previous = effective
        .status
        .as_ref()
        .and_then(|s| s.client_ca_trust.clone());
    let Some(source) = effective
        .spec
        .tls
        .as_ref()
        .and_then(|tls| tls.client_ca.as_ref())
        .filter(|_| restarts_for_client_ca(effective))
    else {
        return Ok(None);
    };
    let namespace = object.namespace().unwrap_or_default();
    let cached = run
        .children
        .config_maps
        .get(&ObjectRef::new(&source.config_map_name).within(&namespace));
    let Some(cached) = cached else {
        return Ok(previous); // the pods cannot start without it; nothing is read
    };
    let version = cached.metadata.resource_version.clone().unwrap_or_default();
    let mut trust = match previous {
        Some(previous) if previous.resource_version.as_deref() == Some(version.as_str()) => {
            previous
        }
        previous => {
            let api = Api::<ConfigMap>::namespaced(run.context.client.clone(), &namespace);
            let config_map = api
                .get(&source.config_map_name)
                .await
                .map_err(|error| api_error("get", "ConfigMap", object, error))?;
            match read(&config_map, source.key()) {
                Some(read) => after_read(previous.as_ref(), read, &Time(jiff::Timestamp::now())),
                // No CA in the key: memcached would refuse the file; the trust stays as read
                // before, and the pods say what is wrong.
                None => return Ok(previous),
            }
        }
    };
    let name = object.name_any();
    let replicas = effective.spec.replicas.unwrap_or(DEFAULT_REPLICAS);
    let servers: Vec<Server> = (0..replicas)
        .filter_map(|ordinal| {
            let pod = pod_of(
                &run.children.pods,
                &namespace,
                &format!("{name}-{ordinal}"),
                &name,
            )?;
            Some(server(ordinal, &pod))
        })
        .collect();
    match next_step(&trust, replicas, budget(effective), &servers) {
        Step::Idle | Step::Wait(_) => {}
        Step::Done => {
            let dropped = trust.withdrawn.take().unwrap_or_default();
            trust.withdrawn = Some(Vec::new());
            trust.restarting_since = None;
            let note = format!(
                "every server restarted since the client CAs of ConfigMap {} changed: the {} \
                 withdrawn ({}) are trusted no more",
                source.config_map_name,
                dropped.len(),
                dropped.join(", "),
            );
            run.context
                .events
                .changed(object, "ClientCAsDropped", note, object.object_ref(&()))
                .await;
        }
        Step::Ask {
            ordinal,
            sha256,
            restarts,
        } => {
            let pod = format!("{name}-{ordinal}");
            ask(run, object, &namespace, &pod, &sha256, restarts).await?;
            let withdrawn = trust.withdrawn.as_deref().unwrap_or_default().len();
            let note = format!(
                "asked {pod} to restart in place (warm: its items are kept) once its ca.crt is \
                 sha256:{sha256}, so that it stops trusting the {withdrawn} client CA(s) \
                 withdrawn from ConfigMap {}",
                source.config_map_name
            );
            let related = Pod {
                metadata: ObjectMeta {
                    name: Some(pod),
                    namespace: Some(namespace.clone()),
                    ..ObjectMeta::default()
                },
                ..Pod::default()
            }
            .object_ref(&());
            run.context
                .events
                .changed(object, "RestartingForClientCA", note, related)
                .await;
        }
    }
    Ok(Some(trust))
}

/// The key's content, its digest and its CAs; `None` when it holds none.
fn read(config_map: &ConfigMap, key: &str) -> Option<Read> {
    let content = config_map.data.as_ref()?.get(key)?;
    let cas: std::collections::BTreeSet<String> = fingerprints(content.as_bytes())
        .into_iter()
        .map(|ca| digest_hex(&ca))
        .collect();
    (!cas.is_empty()).then(|| Read {
        resource_version: config_map.resource_version().unwrap_or_default(),
        sha256: digest(content.as_bytes()),
        cas,
    })
}

fn digest_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// What the roll needs of a cached pod.
fn server(ordinal: i32, pod: &super::cache::compact::CachedPod) -> Server {
    let annotation = |key: &str| {
        pod.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .cloned()
    };
    let restarts = pod
        .status
        .as_ref()
        .and_then(|status| status.container_statuses.as_ref())
        .and_then(|statuses| statuses.iter().find(|c| c.name == MEMCACHED_CONTAINER))
        .map_or(0, |memcached| memcached.restart_count);
    Server {
        ordinal,
        serving: serving(pod),
        created: pod.metadata.creation_timestamp.clone(),
        asked: annotation(REQUEST_ANNOTATION),
        restarts_when_asked: annotation(RESTARTS_ANNOTATION).and_then(|n| n.parse().ok()),
        restarts,
    }
}

/// Annotates `pod` to ask its supervisor for the restart onto `sha256`, with memcached's
/// restart count now.
async fn ask(
    run: &Run,
    object: &Memcached,
    namespace: &str,
    pod: &str,
    sha256: &str,
    restarts: i32,
) -> Result<(), Error> {
    let annotations: BTreeMap<&str, String> = [
        (REQUEST_ANNOTATION, sha256.to_string()),
        (RESTARTS_ANNOTATION, restarts.to_string()),
    ]
    .into();
    let patch = serde_json::json!({ "metadata": { "annotations": annotations } });
    Api::<Pod>::namespaced(run.context.client.clone(), namespace)
        .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|error| api_error("annotate", "Pod", object, error))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca_pem(name: &str) -> String {
        let key = rcgen::KeyPair::generate().expect("a key");
        rcgen::CertificateParams::new(vec![name.to_string()])
            .expect("params")
            .self_signed(&key)
            .expect("a certificate")
            .pem()
    }

    fn config_map(key: &str, content: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("trust".into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            data: Some([(key.to_string(), content.to_string())].into()),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn the_key_is_read_as_its_digest_and_the_fingerprints_of_its_cas() {
        let bundle = format!("{}{}", ca_pem("one"), ca_pem("two"));
        let both = read(&config_map("ca.crt", &bundle), "ca.crt").expect("two CAs");
        assert_eq!(both.resource_version, "7");
        assert_eq!(
            both.sha256,
            digest(bundle.as_bytes()),
            "the file as mounted"
        );
        assert_eq!(both.cas.len(), 2);
        assert!(both.cas.iter().all(|ca| ca.len() == 64));
        assert_eq!(
            read(&config_map("other", &bundle), "ca.crt"),
            None,
            "no such key"
        );
        assert_eq!(
            read(&config_map("ca.crt", "not a certificate"), "ca.crt"),
            None,
            "no CA: nothing to trust, nothing read"
        );
    }
}
