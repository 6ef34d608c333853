//! Declares how memcached's clients are secured: TLS on the client port (with client
//! certificates when asked) and authentication by memcached's ASCII auth file, both from
//! Secrets the user names, and how the servers say which of them is in force.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::cel;

/// The key of the TLS Secret that holds the certificate chain, as in `kubernetes.io/tls`.
pub const TLS_CERT_KEY: &str = "tls.crt";
/// The key of the TLS Secret that holds the private key.
pub const TLS_KEY_KEY: &str = "tls.key";
/// The key of the TLS Secret that holds the CA client certificates must be signed by.
pub const TLS_CA_KEY: &str = "ca.crt";
/// The key of the authentication Secret that holds memcached's auth file.
pub const AUTH_FILE_KEY: &str = "authfile";
/// The most credentials memcached reads from its auth file.
pub const MAX_AUTH_ENTRIES: usize = crate::api::auth_file::MAX_ENTRIES;

/// TLS on memcached's client port (`--enable-ssl`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = cel::tls_secret_is_named())]
#[x_kube(validation = cel::one_certificate_source())]
#[x_kube(validation = cel::service_ca_has_no_client_ca())]
#[x_kube(validation = cel::required_client_identity())]
#[x_kube(validation = cel::client_secret_only_with_client_auth())]
#[x_kube(validation = cel::client_secret_is_not_the_servers())]
#[x_kube(validation = cel::client_ca_only_with_client_auth())]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// The Secret in the Memcached's namespace that holds the server's certificate chain
    /// (`tls.crt`) and private key (`tls.key`), such as a `kubernetes.io/tls` Secret or the one a
    /// cert-manager Certificate writes; with `clientAuth`, also the CA (`ca.crt`) that client
    /// certificates must be signed by. With `issuerRef` or `openShiftServiceCA`, the Secret
    /// the certificate is issued into. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = cel::DNS_SUBDOMAIN_PATTERN))]
    pub secret_name: Option<String>,

    /// A second port that serves plaintext clients beside TLS, for moving clients over to TLS
    /// one by one. Off when unset; never the client port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub plaintext_port: Option<i32>,

    /// Whether TLS clients must present a certificate signed by the Secret's `ca.crt` (or by
    /// a CA of `clientCA`) (memcached's `ssl_verify_mode`): `None` (not asked for), `Request`
    /// (asked for, and verified when given) or `Require` (refused without one). Defaults to
    /// `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_auth: Option<ClientAuth>,

    /// With `clientAuth` `Request` or `Require`: the CAs client certificates must be signed
    /// by, from a ConfigMap key (such as a trust-manager Bundle's target) in place of the
    /// TLS Secret's `ca.crt`. Trust then changes apart from issuance, which is what makes a
    /// CA rotation safe: add the new CA here, then have the certificates issued by it, then
    /// withdraw the old one. The ConfigMap must exist for the servers to start.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "clientCA")]
    pub client_ca: Option<ClientCaSource>,

    /// With `clientAuth` `Request` or `Require`: the Secret holding the client certificate
    /// (`tls.crt`) and key (`tls.key`) the pod's sidecars (the certificate refresher and the
    /// stats relay) present to the servers. Never the server's Secret: the sidecars do not
    /// read the server's key. The certificate must be signed by a CA of `ca.crt` and allow
    /// client authentication (extended key usage `clientAuth`, or none). With `issuerRef`
    /// the operator issues it (a Certificate `<name>-client`, client authentication only)
    /// into this Secret, `<name>-client-tls` when unset. Without `issuerRef` it is required
    /// with `Require`; with `Request` and none, the sidecars present no certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = cel::DNS_SUBDOMAIN_PATTERN))]
    pub client_secret_name: Option<String>,

    /// The image of the certificate refresher, the sidecar that brings a renewed certificate
    /// into the running servers (`memcached-operator refresh-certs`). Defaults to the
    /// operator's own image at the time the Memcached is created, so that upgrading the
    /// operator does not restart the servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512), regex(pattern = cel::IMAGE_REFERENCE_PATTERN))]
    pub refresher_image: Option<String>,

    /// A cert-manager issuer that issues the certificate: the operator then keeps a
    /// cert-manager Certificate `<name>` for every server's names, written into `secretName`
    /// and renewed by cert-manager. Needs cert-manager's API (`cert-manager.io/v1`). An
    /// Issuer of the Memcached's namespace, unless the cluster admin allows others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer_ref: Option<IssuerRef>,

    /// On OpenShift, the service CA issues the certificate into `secretName`: the operator
    /// annotates the Service with `service.beta.openshift.io/serving-cert-secret-name`. The
    /// service CA writes no `ca.crt`, so `clientAuth` must stay `None`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "openShiftServiceCA"
    )]
    pub openshift_service_ca: Option<bool>,
}

/// A ConfigMap key that holds PEM CA certificates.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClientCaSource {
    /// The ConfigMap in the Memcached's namespace. Required.
    #[schemars(length(min = 1, max = 253), regex(pattern = cel::DNS_SUBDOMAIN_PATTERN))]
    pub config_map_name: String,

    /// The key whose value is the PEM CA certificates. Defaults to `ca.crt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = cel::CONFIG_MAP_KEY_PATTERN))]
    pub key: Option<String>,
}

impl ClientCaSource {
    /// The key holding the CAs.
    pub fn key(&self) -> &str {
        self.key.as_deref().unwrap_or(TLS_CA_KEY)
    }
}

/// The cert-manager issuer of the servers' certificate.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IssuerRef {
    /// The issuer's name. Required.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,

    /// `Issuer` (in the Memcached's namespace), or `ClusterIssuer` or an external issuer's
    /// kind where the cluster admin allows it (the operator's `ALLOWED_ISSUERS`). Defaults to
    /// `Issuer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub kind: Option<String>,

    /// The issuer's API group. Defaults to `cert-manager.io`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub group: Option<String>,
}

/// Whether TLS clients present certificates.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    #[default]
    None,
    /// A client certificate is asked for, and verified when one is given.
    Request,
    /// A client without a certificate signed by the CA is refused.
    Require,
}

impl ClientAuth {
    /// memcached's `ssl_verify_mode` for this setting.
    pub fn verify_mode(self) -> u8 {
        match self {
            ClientAuth::None => 0,
            ClientAuth::Request => 1,
            ClientAuth::Require => 2,
        }
    }
}

/// Authentication by memcached's ASCII auth file (`--auth-file`): a client must send a user and
/// a password before any other command.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = cel::auth_secret_is_named())]
#[serde(rename_all = "camelCase")]
pub struct AuthSpec {
    /// The Secret in the Memcached's namespace whose `authfile` key holds the credentials, one
    /// `user:password` a line, at most 8 lines. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = cel::DNS_SUBDOMAIN_PATTERN))]
    pub secret_name: Option<String>,

    /// The image the supervisor is copied from: its init container copies the operator's
    /// binary into the pod, and memcached's container runs it as its first process
    /// (`memcached-operator supervise`), supervising memcached and having it reread a changed
    /// auth file. Defaults to the operator's own image at the time authentication is turned
    /// on, so that upgrading the operator does not restart the servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512), regex(pattern = cel::IMAGE_REFERENCE_PATTERN))]
    pub reloader_image: Option<String>,
}

/// TLS as the servers' pod template configures it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TlsStatus {
    /// The Secret the certificate comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// The client-certificate setting in force.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_auth: Option<ClientAuth>,
    /// The ConfigMap key client certificates are verified against, when not the Secret's
    /// `ca.crt`.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "clientCA")]
    pub client_ca: Option<ClientCaSource>,
    /// The plaintext port served beside TLS, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plaintext_port: Option<i32>,
}

/// Which client CAs the servers trust, from the ConfigMap of `spec.tls.clientCA`, where the
/// operator restarts them for a withdrawn CA (with `memcached.warmRestart`). memcached's
/// `refresh_certs` adds CAs and removes none, so a CA withdrawn from the ConfigMap stays
/// trusted by every server that started before, until it restarts.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClientCaTrust {
    /// The version of the ConfigMap last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// The SHA-256 of the key's content last read (lowercase hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The CAs of that content, by the SHA-256 of their DER (lowercase hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cas: Option<Vec<String>>,
    /// CAs withdrawn from the ConfigMap that servers which started before may still trust,
    /// by the SHA-256 of their DER; empty once every such server restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdrawn: Option<Vec<String>>,
    /// When the withdrawal was seen: every server started before restarts in place, one at a
    /// time, while the others are ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarting_since: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

/// Authentication as the servers' pod template configures it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuthStatus {
    /// The Secret the credentials come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
}
