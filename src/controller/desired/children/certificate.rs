//! The cert-manager Certificate `<name>` a Memcached asks for with `spec.tls.issuerRef`: the
//! server certificate of every server, issued by the named issuer into `spec.tls.secretName`,
//! renewed by cert-manager and brought into the running servers by the certificate refresher.
//!
//! Only the fields the operator sets are declared here; cert-manager's own CRD is the schema.

use kube::CustomResource;
use serde::{Deserialize, Serialize};

use super::{metadata, secured_names};
use crate::api::v1beta1::Memcached;
use crate::controller::cache::child::Child;
use crate::controller::cache::compact::CachedCertificate;

impl Child for Certificate {
    type Cached = CachedCertificate;
    fn cached(full: Self) -> CachedCertificate {
        CachedCertificate::from(full.metadata)
    }
}

/// The group of cert-manager's API.
pub const GROUP: &str = "cert-manager.io";
/// The issuer kind when `issuerRef.kind` is unset (cert-manager's own default).
pub const DEFAULT_ISSUER_KIND: &str = "Issuer";

/// `spec` of a cert-manager `Certificate`, as far as the operator sets it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "cert-manager.io",
    version = "v1",
    kind = "Certificate",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct CertificateSpec {
    /// The Secret cert-manager writes `tls.crt`, `tls.key` and `ca.crt` into.
    pub secret_name: String,
    /// The names the certificate holds.
    pub dns_names: Vec<String>,
    /// Who issues it.
    pub issuer_ref: IssuerReference,
    /// What the key may be used for.
    pub usages: Vec<String>,
    /// How the private key is made.
    pub private_key: PrivateKey,
}

/// The issuer a Certificate names.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IssuerReference {
    /// The issuer's name.
    pub name: String,
    /// `Issuer` or `ClusterIssuer` (or an external issuer's kind).
    pub kind: String,
    /// The issuer's API group.
    pub group: String,
}

/// How the private key is made.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PrivateKey {
    /// `Always`: every renewal gets a new key.
    pub rotation_policy: String,
    /// The key's algorithm.
    pub algorithm: String,
    /// The key's size.
    pub size: i32,
}

/// The Certificate, when `spec.tls.issuerRef` asks for one. Its usages include client auth, so
/// the pod's sidecars can present it to a server that requires client certificates.
pub fn desired_certificate(memcached: &Memcached) -> Option<Certificate> {
    let tls = memcached.spec.tls.as_ref()?;
    let issuer = tls.issuer_ref.as_ref()?;
    let spec = CertificateSpec {
        secret_name: tls.secret_name.clone()?,
        dns_names: secured_names(memcached),
        issuer_ref: IssuerReference {
            name: issuer.name.clone(),
            kind: issuer
                .kind
                .clone()
                .unwrap_or_else(|| DEFAULT_ISSUER_KIND.into()),
            group: issuer.group.clone().unwrap_or_else(|| GROUP.into()),
        },
        usages: [
            "digital signature",
            "key encipherment",
            "server auth",
            "client auth",
        ]
        .map(String::from)
        .to_vec(),
        private_key: PrivateKey {
            rotation_policy: "Always".into(),
            algorithm: "ECDSA".into(),
            size: 256,
        },
    };
    Some(Certificate {
        metadata: metadata(memcached),
        spec,
    })
}
