//! Prepares a pod's volumes on the host, under the pod's directory, and keeps them current:
//! Secret, ConfigMap, downward API and projected volumes (service account tokens from the
//! TokenRequest API, renewed before they expire) through the atomic writer; emptyDir as a
//! plain directory; hostPath as the host path itself.
//!
//! Fetching (Secrets, ConfigMaps, tokens) is async; turning what was fetched into a payload
//! is pure ([`payload`]). Putting the directories at their mount paths is `sandbox`'s job.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, DownwardAPIVolumeFile, KeyToPath, Pod, Secret, ServiceAccount, Volume,
};
use kube::Client;
use kube::api::{Api, PostParams};

use super::atomic_writer::{AtomicWriter, FileProjection, WriteError};
use super::env::{self, EnvSources};

/// The mode of volume files when the spec gives none (0644).
const DEFAULT_MODE: i32 = 0o644;
/// A token's lifetime when the projection names none (the API's default, one hour).
const DEFAULT_TOKEN_SECONDS: i64 = 3600;

/// Why a volume cannot be prepared (the kubelet reports these as `FailedMount` events and
/// keeps the pod in `ContainerCreating`).
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// A referenced Secret or ConfigMap is missing and not optional.
    #[error("volume {volume:?}: {kind} {name:?} not found")]
    MissingObject {
        /// The volume.
        volume: String,
        /// `secret` or `configmap`.
        kind: &'static str,
        /// Its name.
        name: String,
    },
    /// An item names a key the object does not have.
    #[error("volume {volume:?}: {kind} {name:?} has no key {key:?}")]
    MissingKey {
        /// The volume.
        volume: String,
        /// `secret` or `configmap`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The key.
        key: String,
    },
    /// A downward API item names an unsupported field.
    #[error("volume {volume:?}: unsupported downward API field {field:?}")]
    Field {
        /// The volume.
        volume: String,
        /// The field path or resource.
        field: String,
    },
    /// The volume type is not supported by the agent.
    #[error(
        "volume {volume:?}: unsupported volume type (supported: secret, configMap, projected, downwardAPI, emptyDir, hostPath)"
    )]
    Unsupported {
        /// The volume.
        volume: String,
    },
    /// The API server refused a read or a token.
    #[error("volume {volume:?}: {what}: {error}")]
    Api {
        /// The volume.
        volume: String,
        /// What was asked.
        what: String,
        /// What the API said.
        error: kube::Error,
    },
    /// Writing the files failed.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// An emptyDir could not be made.
    #[error("volume {volume:?}: cannot create {}: {error}", .path.display())]
    Dir {
        /// The volume.
        volume: String,
        /// The directory.
        path: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
}

/// A service account token the agent holds for a pod.
#[derive(Clone, Debug)]
pub struct Token {
    /// The token.
    pub token: String,
    /// When it was issued.
    pub issued: jiff::Timestamp,
    /// When it expires.
    pub expires: jiff::Timestamp,
}

impl Token {
    /// Whether the kubelet would renew it now: past 80% of its lifetime, or older than 24 h.
    pub fn needs_renewal(&self, now: jiff::Timestamp) -> bool {
        let lifetime = self.expires.as_second() - self.issued.as_second();
        let age = now.as_second() - self.issued.as_second();
        age * 10 >= lifetime * 8 || age >= 24 * 3600
    }
}

/// What volume payloads are made from.
#[derive(Clone, Debug, Default)]
pub struct VolumeSources {
    /// Secrets of the pod's namespace that exist, by name.
    pub secrets: BTreeMap<String, Secret>,
    /// ConfigMaps of the pod's namespace that exist, by name.
    pub config_maps: BTreeMap<String, ConfigMap>,
    /// Tokens by (audience, expirationSeconds).
    pub tokens: BTreeMap<(String, i64), Token>,
    /// Pod and host IP, for downward API fields.
    pub env: EnvSources,
}

/// The payload of `volume`, or `None` for a volume that is a plain directory (emptyDir,
/// hostPath).
pub fn payload(
    pod: &Pod,
    volume: &Volume,
    sources: &VolumeSources,
) -> Result<Option<BTreeMap<String, FileProjection>>, VolumeError> {
    let name = &volume.name;
    let mut out = BTreeMap::new();
    if let Some(secret) = &volume.secret {
        let secret_name = secret.secret_name.clone().unwrap_or_default();
        let data = match sources.secrets.get(&secret_name) {
            Some(s) => byte_map(s),
            None if secret.optional == Some(true) => BTreeMap::new(),
            None => return Err(missing(name, "secret", &secret_name)),
        };
        keys(
            name,
            "secret",
            &secret_name,
            &data,
            secret.items.as_deref(),
            secret.default_mode,
            &mut out,
        )?;
    } else if let Some(map) = &volume.config_map {
        let data = match sources.config_maps.get(&map.name) {
            Some(m) => config_map_bytes(m),
            None if map.optional == Some(true) => BTreeMap::new(),
            None => return Err(missing(name, "configmap", &map.name)),
        };
        keys(
            name,
            "configmap",
            &map.name,
            &data,
            map.items.as_deref(),
            map.default_mode,
            &mut out,
        )?;
    } else if let Some(downward) = &volume.downward_api {
        downward_items(
            pod,
            name,
            downward.items.as_deref(),
            downward.default_mode,
            sources,
            &mut out,
        )?;
    } else if let Some(projected) = &volume.projected {
        for source in projected.sources.iter().flatten() {
            if let Some(secret) = &source.secret {
                let data = match sources.secrets.get(&secret.name) {
                    Some(s) => byte_map(s),
                    None if secret.optional == Some(true) => continue,
                    None => return Err(missing(name, "secret", &secret.name)),
                };
                keys(
                    name,
                    "secret",
                    &secret.name,
                    &data,
                    secret.items.as_deref(),
                    projected.default_mode,
                    &mut out,
                )?;
            }
            if let Some(map) = &source.config_map {
                let data = match sources.config_maps.get(&map.name) {
                    Some(m) => config_map_bytes(m),
                    None if map.optional == Some(true) => continue,
                    None => return Err(missing(name, "configmap", &map.name)),
                };
                keys(
                    name,
                    "configmap",
                    &map.name,
                    &data,
                    map.items.as_deref(),
                    projected.default_mode,
                    &mut out,
                )?;
            }
            if let Some(downward) = &source.downward_api {
                downward_items(
                    pod,
                    name,
                    downward.items.as_deref(),
                    projected.default_mode,
                    sources,
                    &mut out,
                )?;
            }
            if let Some(token) = &source.service_account_token {
                let key = (
                    token.audience.clone().unwrap_or_default(),
                    token.expiration_seconds.unwrap_or(DEFAULT_TOKEN_SECONDS),
                );
                let Some(held) = sources.tokens.get(&key) else {
                    return Err(VolumeError::Field {
                        volume: name.clone(),
                        field: format!("serviceAccountToken (audience {:?}) not yet issued", key.0),
                    });
                };
                out.insert(
                    token.path.clone(),
                    FileProjection {
                        data: held.token.as_bytes().to_vec(),
                        mode: mode(projected.default_mode),
                    },
                );
            }
        }
    } else if volume.empty_dir.is_some() || volume.host_path.is_some() {
        return Ok(None);
    } else {
        return Err(VolumeError::Unsupported {
            volume: name.clone(),
        });
    }
    Ok(Some(out))
}

fn missing(volume: &str, kind: &'static str, name: &str) -> VolumeError {
    VolumeError::MissingObject {
        volume: volume.to_string(),
        kind,
        name: name.to_string(),
    }
}

fn mode(mode: Option<i32>) -> u32 {
    (mode.unwrap_or(DEFAULT_MODE) & 0o7777) as u32
}

fn byte_map(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    let mut data: BTreeMap<String, Vec<u8>> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in secret.string_data.iter().flatten() {
        data.insert(k.clone(), v.as_bytes().to_vec());
    }
    data
}

fn config_map_bytes(map: &ConfigMap) -> BTreeMap<String, Vec<u8>> {
    let mut data: BTreeMap<String, Vec<u8>> = map
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
        .collect();
    for (k, v) in map.binary_data.iter().flatten() {
        data.insert(k.clone(), v.0.clone());
    }
    data
}

#[allow(clippy::too_many_arguments)]
fn keys(
    volume: &str,
    kind: &'static str,
    object: &str,
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    default_mode: Option<i32>,
    out: &mut BTreeMap<String, FileProjection>,
) -> Result<(), VolumeError> {
    match items {
        Some(items) if !items.is_empty() => {
            for item in items {
                let Some(bytes) = data.get(&item.key) else {
                    return Err(VolumeError::MissingKey {
                        volume: volume.to_string(),
                        kind,
                        name: object.to_string(),
                        key: item.key.clone(),
                    });
                };
                out.insert(
                    item.path.clone(),
                    FileProjection {
                        data: bytes.clone(),
                        mode: mode(item.mode.or(default_mode)),
                    },
                );
            }
        }
        _ => {
            for (key, bytes) in data {
                out.insert(
                    key.clone(),
                    FileProjection {
                        data: bytes.clone(),
                        mode: mode(default_mode),
                    },
                );
            }
        }
    }
    Ok(())
}

fn downward_items(
    pod: &Pod,
    volume: &str,
    items: Option<&[DownwardAPIVolumeFile]>,
    default_mode: Option<i32>,
    sources: &VolumeSources,
    out: &mut BTreeMap<String, FileProjection>,
) -> Result<(), VolumeError> {
    for item in items.unwrap_or_default() {
        let value = if let Some(field) = &item.field_ref {
            env::field_value(pod, &field.field_path, &sources.env).ok_or_else(|| {
                VolumeError::Field {
                    volume: volume.to_string(),
                    field: field.field_path.clone(),
                }
            })?
        } else if let Some(resource) = &item.resource_field_ref {
            let container = pod
                .spec
                .as_ref()
                .and_then(|s| {
                    s.containers
                        .iter()
                        .find(|c| Some(&c.name) == resource.container_name.as_ref())
                })
                .cloned()
                .unwrap_or_default();
            env::resource_value(pod, &container, resource, &sources.env.allocatable).ok_or_else(
                || VolumeError::Field {
                    volume: volume.to_string(),
                    field: resource.resource.clone(),
                },
            )?
        } else {
            String::new()
        };
        out.insert(
            item.path.clone(),
            FileProjection {
                data: value.into_bytes(),
                mode: mode(item.mode.or(default_mode)),
            },
        );
    }
    Ok(())
}

/// A pod's volumes on the host: one directory per volume under `DIR/volumes/`.
#[derive(Debug)]
pub struct PodVolumes {
    dir: PathBuf,
    tokens: BTreeMap<(String, i64), Token>,
}

impl PodVolumes {
    /// The volumes of the pod whose directory is `pod_dir`.
    pub fn new(pod_dir: &Path) -> PodVolumes {
        PodVolumes {
            dir: pod_dir.join("volumes"),
            tokens: BTreeMap::new(),
        }
    }

    /// The host directory (or, for hostPath, the host path) of volume `volume`.
    pub fn host_path(&self, volume: &Volume) -> PathBuf {
        match &volume.host_path {
            Some(host) => PathBuf::from(&host.path),
            None => self.dir.join(&volume.name),
        }
    }

    /// Fetches what the volumes need and writes them; returns the names of the volumes whose
    /// files changed.
    pub async fn sync(
        &mut self,
        client: &Client,
        pod: &Pod,
        env: &EnvSources,
    ) -> Result<Vec<String>, VolumeError> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let volumes = pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.clone())
            .unwrap_or_default();
        let mut sources = VolumeSources {
            env: env.clone(),
            ..VolumeSources::default()
        };
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
        let now = jiff::Timestamp::now();
        for volume in &volumes {
            let mut secret_names = Vec::new();
            let mut map_names = Vec::new();
            let mut tokens = Vec::new();
            if let Some(s) = &volume.secret {
                secret_names.extend(s.secret_name.clone());
            }
            if let Some(m) = &volume.config_map {
                map_names.push(m.name.clone());
            }
            if let Some(p) = &volume.projected {
                for source in p.sources.iter().flatten() {
                    secret_names.extend(source.secret.as_ref().map(|s| s.name.clone()));
                    map_names.extend(source.config_map.as_ref().map(|m| m.name.clone()));
                    tokens.extend(source.service_account_token.as_ref().map(|t| {
                        (
                            t.audience.clone().unwrap_or_default(),
                            t.expiration_seconds.unwrap_or(DEFAULT_TOKEN_SECONDS),
                        )
                    }));
                }
            }
            let api_error = |what: String| {
                let volume = volume.name.clone();
                move |error| VolumeError::Api {
                    volume,
                    what,
                    error,
                }
            };
            for name in secret_names {
                if let Some(secret) = secrets
                    .get_opt(&name)
                    .await
                    .map_err(api_error(format!("get secret {name}")))?
                {
                    sources.secrets.insert(name, secret);
                }
            }
            for name in map_names {
                if let Some(map) = maps
                    .get_opt(&name)
                    .await
                    .map_err(api_error(format!("get configmap {name}")))?
                {
                    sources.config_maps.insert(name, map);
                }
            }
            for key in tokens {
                let fresh = self.tokens.get(&key).is_some_and(|t| !t.needs_renewal(now));
                if !fresh {
                    let token =
                        request_token(client, pod, &key.0, key.1)
                            .await
                            .map_err(api_error(format!(
                                "request a token for audience {:?}",
                                key.0
                            )))?;
                    self.tokens.insert(key, token);
                }
            }
        }
        sources.tokens = self.tokens.clone();
        let mut changed = Vec::new();
        for volume in &volumes {
            match payload(pod, volume, &sources)? {
                Some(files) => {
                    let writer = AtomicWriter::new(self.dir.join(&volume.name));
                    let written = writer.write(&files)?;
                    if written {
                        changed.push(volume.name.clone());
                    }
                }
                None if volume.empty_dir.is_some() => {
                    let dir = self.dir.join(&volume.name);
                    std::fs::create_dir_all(&dir).map_err(|error| VolumeError::Dir {
                        volume: volume.name.clone(),
                        path: dir.clone(),
                        error,
                    })?;
                }
                None => {}
            }
        }
        Ok(changed)
    }
}

/// Asks the TokenRequest API for a token of the pod's service account, bound to the pod.
async fn request_token(
    client: &Client,
    pod: &Pod,
    audience: &str,
    seconds: i64,
) -> Result<Token, kube::Error> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let account = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".to_string());
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: if audience.is_empty() {
                Vec::new()
            } else {
                vec![audience.to_string()]
            },
            expiration_seconds: Some(seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".to_string()),
                kind: Some("Pod".to_string()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
        },
        ..TokenRequest::default()
    };
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    let issued = jiff::Timestamp::now();
    let answer: TokenRequest = api
        .create_subresource("token", &account, &PostParams::default(), &request)
        .await?;
    let Some(status) = answer.status else {
        return Err(kube::Error::Service(
            format!("the token request for service account {namespace}/{account} came back without a status").into(),
        ));
    };
    Ok(Token {
        token: status.token,
        issued,
        expires: status.expiration_timestamp.0,
    })
}

#[cfg(test)]
mod tests;
