//! The parts of a memcached pod that secure its clients: memcached's TLS and auth-file flags,
//! the Secret volumes they read, the certificate refresher, and the plaintext port beside TLS.
//!
//! The Secrets are mounted, never copied, and each only into the containers that read it:
//! memcached mounts the server's TLS Secret and the auth Secret; the certificate refresher the
//! server's certificate and `ca.crt` (a second volume of the same Secret, without its key),
//! the sidecars' client certificate and the auth Secret; the stats relay the client
//! certificate and the auth Secret. Where `spec.tls.clientCA` names a ConfigMap key, that key
//! is `ca.crt` in memcached's and the refresher's TLS directory (a projected volume of the
//! Secret and the ConfigMap). The kubelet keeps their files current, and memcached reads them
//! at start, its certificate and `ca.crt` again on `refresh_certs` (which the certificate
//! refresher sends), its auth file again on SIGHUP (which the supervisor it runs under sends,
//! `children::supervision`). The operator itself never reads them.

use k8s_openapi::api::core::v1::{
    ConfigMapProjection, Container, KeyToPath, ProjectedVolumeSource, SecretProjection,
    SecretVolumeSource, SecurityContext, Volume, VolumeMount, VolumeProjection,
};
use kube::ResourceExt;

use super::lifecycle::warm_restart;
use super::probes;
use crate::admission::defaults::memory_bound;
use crate::api::v1beta1::{
    AUTH_FILE_KEY, ClientAuth, ClientCaSource, Memcached, TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY,
};
use crate::operator;
use crate::sidecar::refresher;

/// The name of the plaintext port beside TLS, on the container and the Service.
pub const PLAINTEXT_PORT_NAME: &str = "memcache-plain";
/// Where the TLS Secret is mounted.
pub const TLS_DIR: &str = "/etc/memcached/tls";
/// Where the authentication Secret is mounted.
pub const AUTH_DIR: &str = "/etc/memcached/auth";
/// The mode of the mounted Secrets' files: readable by their group (the pod's fsGroup) only.
pub const SECRET_FILE_MODE: i32 = 0o440;

/// The memory request and limit of the sidecars from the operator's image.
pub const REFRESHER_MEMORY: &str = "32Mi";
/// The CPU request of the sidecars from the operator's image.
pub const REFRESHER_CPU: &str = "5m";

/// Where the sidecars' client certificate is mounted, in the refresher and the relay.
pub const CLIENT_TLS_DIR: &str = "/etc/memcached/client-tls";

const TLS_VOLUME: &str = "tls";
/// The server's TLS Secret again, without its key: the refresher's view of it.
const TLS_PUBLIC_VOLUME: &str = "tls-public";
const CLIENT_TLS_VOLUME: &str = "client-tls";
const AUTH_VOLUME: &str = "auth";

/// The Secret holding the sidecars' client certificate, when the servers ask for client
/// certificates and the pod has one: `spec.tls.clientSecretName`, or with `issuerRef` the
/// operator's `<name>-client-tls`.
pub fn client_secret(memcached: &Memcached) -> Option<String> {
    let tls = memcached.spec.tls.as_ref()?;
    if tls.client_auth.unwrap_or_default() == ClientAuth::None {
        return None;
    }
    match (&tls.client_secret_name, &tls.issuer_ref) {
        (Some(name), _) => Some(name.clone()),
        (None, Some(_)) => Some(format!("{}-client-tls", memcached.name_any())),
        (None, None) => None,
    }
}

/// The auth file's path in the memcached container (and the sidecars' that mount it).
pub fn auth_file() -> String {
    format!("{AUTH_DIR}/{AUTH_FILE_KEY}")
}

/// The Service annotation that asks OpenShift's service CA for a serving certificate, written
/// into the Secret it names.
pub const SERVICE_CA_ANNOTATION: &str = "service.beta.openshift.io/serving-cert-secret-name";

/// The Secret OpenShift's service CA is to issue the certificate into, when asked to.
pub fn service_ca_secret(memcached: &Memcached) -> Option<String> {
    let tls = memcached.spec.tls.as_ref()?;
    if tls.openshift_service_ca != Some(true) {
        return None;
    }
    tls.secret_name.clone()
}

/// The plaintext port served beside TLS, if any.
pub fn plaintext_port(memcached: &Memcached) -> Option<i32> {
    memcached.spec.tls.as_ref()?.plaintext_port
}

/// memcached's flags for TLS and authentication; `port` is the client port.
pub fn args(memcached: &Memcached, port: i32) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(tls) = &memcached.spec.tls {
        args.push("--enable-ssl".into());
        let mut options = vec![
            format!("ssl_chain_cert={TLS_DIR}/{TLS_CERT_KEY}"),
            format!("ssl_key={TLS_DIR}/{TLS_KEY_KEY}"),
        ];
        let client_auth = tls.client_auth.unwrap_or_default();
        if client_auth.verify_mode() > 0 {
            options.push(format!("ssl_ca_cert={TLS_DIR}/{TLS_CA_KEY}"));
            options.push(format!("ssl_verify_mode={}", client_auth.verify_mode()));
        }
        args.push("-o".into());
        args.push(options.join(","));
        if let Some(plaintext) = tls.plaintext_port {
            // `*` is every address of both families, as when no -l is given; `notls:` takes the
            // one listener out of TLS.
            args.push("-l".into());
            args.push(format!("*:{port},notls:*:{plaintext}"));
        }
    }
    if memcached.spec.auth.is_some() {
        args.push(format!("--auth-file={}", auth_file()));
    }
    args
}

/// Whether the operator restarts the servers in place when a client CA is withdrawn from the
/// ConfigMap of `spec.tls.clientCA`: with a warm restart (which keeps the items), where client
/// certificates are verified against that ConfigMap.
pub fn restarts_for_client_ca(memcached: &Memcached) -> bool {
    warm_restart(memcached)
        && memcached.spec.tls.as_ref().is_some_and(|tls| {
            tls.client_ca.is_some() && tls.client_auth.unwrap_or_default().verify_mode() > 0
        })
}

/// The certificate refresher, a native sidecar (an init container that keeps running) beside a
/// TLS server: it reads the server's certificate and `ca.crt` (not its key) and sends the
/// server `refresh_certs` on its loopback when either changes (`memcached-operator
/// refresh-certs`), presenting the sidecars' client certificate when there is one, and
/// answering the kubelet's probes on port `health`. `mounts` are
/// [`SecretVolumes::refresher`].
pub fn refresher(
    memcached: &Memcached,
    port: i32,
    mounts: &[VolumeMount],
    security: SecurityContext,
    health: i32,
) -> Option<Container> {
    let tls = memcached.spec.tls.as_ref()?;
    let mut args = vec![
        "refresh-certs".to_string(),
        format!("--cert-dir={TLS_DIR}"),
        format!("--port={port}"),
    ];
    if client_secret(memcached).is_some() {
        args.push(format!("--client-cert-dir={CLIENT_TLS_DIR}"));
    }
    if memcached.spec.auth.is_some() {
        args.push(format!("--auth-file={}", auth_file()));
    }
    args.push(format!("--health-port={health}"));
    if restarts_for_client_ca(memcached) {
        args.push("--supervisor-counts-withdrawn-cas".into());
    }
    let (liveness, readiness) = probes::sidecar(probes::REFRESHER_PORT_NAME);
    Some(Container {
        name: refresher::CONTAINER_NAME.into(),
        image: tls.refresher_image.clone(),
        command: Some(vec![operator::BINARY_PATH.into()]),
        args: Some(args),
        ports: Some(vec![probes::port(probes::REFRESHER_PORT_NAME, health)]),
        liveness_probe: Some(liveness),
        readiness_probe: Some(readiness),
        restart_policy: Some("Always".into()),
        resources: Some(memory_bound(REFRESHER_CPU, REFRESHER_MEMORY)),
        volume_mounts: Some(mounts.to_vec()),
        security_context: Some(security),
        // Why it stopped, as it says (`sidecar::termination`), or its log's tail.
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Container::default()
    })
}

/// The Secret volumes of a pod, and which container mounts which.
#[derive(Clone, Debug, Default)]
pub struct SecretVolumes {
    /// The volumes.
    pub volumes: Vec<Volume>,
    /// memcached's: the server's TLS Secret, the auth Secret.
    pub memcached: Vec<VolumeMount>,
    /// The certificate refresher's: the server's certificate and `ca.crt` (not its key), the
    /// sidecars' client certificate, the auth Secret.
    pub refresher: Vec<VolumeMount>,
    /// The stats relay's: the sidecars' client certificate, the auth Secret.
    pub relay: Vec<VolumeMount>,
}

/// The Secret volumes of a pod, and their mounts.
pub fn volumes(memcached: &Memcached) -> SecretVolumes {
    let spec = &memcached.spec;
    let mut out = SecretVolumes::default();
    let mount = |name: &str, dir: &str| VolumeMount {
        name: name.into(),
        mount_path: dir.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    };
    if let Some(tls) = &spec.tls
        && let Some(secret) = &tls.secret_name
    {
        let verifies = tls.client_auth.unwrap_or_default().verify_mode() > 0;
        match tls.client_ca.as_ref().filter(|_| verifies) {
            // `ca.crt` from the ConfigMap, beside the Secret's certificate (and key): the
            // same files at the same paths, so memcached and the refresher read them alike.
            Some(source) => {
                out.volumes.push(with_client_ca(
                    TLS_VOLUME,
                    secret,
                    &[TLS_CERT_KEY, TLS_KEY_KEY],
                    source,
                ));
                out.volumes.push(with_client_ca(
                    TLS_PUBLIC_VOLUME,
                    secret,
                    &[TLS_CERT_KEY],
                    source,
                ));
            }
            None => {
                out.volumes.push(secret_volume(TLS_VOLUME, secret, None));
                let mut public = vec![TLS_CERT_KEY];
                if verifies {
                    public.push(TLS_CA_KEY);
                }
                out.volumes
                    .push(secret_volume(TLS_PUBLIC_VOLUME, secret, Some(&public)));
            }
        }
        out.memcached.push(mount(TLS_VOLUME, TLS_DIR));
        out.refresher.push(mount(TLS_PUBLIC_VOLUME, TLS_DIR));
    }
    if let Some(secret) = client_secret(memcached) {
        out.volumes.push(secret_volume(
            CLIENT_TLS_VOLUME,
            &secret,
            Some(&[TLS_CERT_KEY, TLS_KEY_KEY]),
        ));
        out.refresher.push(mount(CLIENT_TLS_VOLUME, CLIENT_TLS_DIR));
        out.relay.push(mount(CLIENT_TLS_VOLUME, CLIENT_TLS_DIR));
    }
    if let Some(secret) = spec.auth.as_ref().and_then(|a| a.secret_name.as_ref()) {
        out.volumes.push(secret_volume(AUTH_VOLUME, secret, None));
        for mounts in [&mut out.memcached, &mut out.refresher, &mut out.relay] {
            mounts.push(mount(AUTH_VOLUME, AUTH_DIR));
        }
    }
    out
}

/// A volume of the Secret `secret`'s `keys` and, as `ca.crt`, the client CAs of `source`'s
/// ConfigMap key: one directory the kubelet updates as a whole, its files readable by their
/// group only.
fn with_client_ca(name: &str, secret: &str, keys: &[&str], source: &ClientCaSource) -> Volume {
    Volume {
        name: name.into(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(SECRET_FILE_MODE),
            sources: Some(vec![
                VolumeProjection {
                    secret: Some(SecretProjection {
                        name: secret.into(),
                        items: Some(key_paths(keys)),
                        optional: None,
                    }),
                    ..VolumeProjection::default()
                },
                VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: source.config_map_name.clone(),
                        items: Some(vec![KeyToPath {
                            key: source.key().into(),
                            path: TLS_CA_KEY.into(),
                            mode: None,
                        }]),
                        optional: None,
                    }),
                    ..VolumeProjection::default()
                },
            ]),
        }),
        ..Volume::default()
    }
}

/// Each key as a file of its own name.
fn key_paths(keys: &[&str]) -> Vec<KeyToPath> {
    keys.iter()
        .map(|key| KeyToPath {
            key: (*key).into(),
            path: (*key).into(),
            mode: None,
        })
        .collect()
}

/// A volume of the Secret `secret`, its files readable by their group only; with `keys`, only
/// those keys.
fn secret_volume(name: &str, secret: &str, keys: Option<&[&str]>) -> Volume {
    Volume {
        name: name.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.into()),
            default_mode: Some(SECRET_FILE_MODE),
            items: keys.map(key_paths),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}
