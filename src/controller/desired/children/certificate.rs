//! The cert-manager Certificates a Memcached asks for with `spec.tls.issuerRef`: `<name>`,
//! the server certificate of every server (server authentication only), issued by the named
//! issuer into `spec.tls.secretName`, renewed by cert-manager and brought into the running
//! servers by the certificate refresher; and, when the servers ask for client certificates,
//! `<name>-client`, the sidecars' own client certificate (client authentication only), issued
//! by the same issuer into the client Secret, so no sidecar ever holds the server's key.
//!
//! Only the fields the operator sets are declared here; cert-manager's own CRD is the schema.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{CustomResource, ResourceExt};
use serde::{Deserialize, Serialize};

use super::{metadata, secured_names};
use crate::api::v1beta1::{IssuerRef, Memcached};
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
    /// The subject's common name, for a certificate that holds no DNS name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_name: Option<String>,
    /// The names the certificate holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
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

/// The suffix of the sidecars' client Certificate's name.
pub const CLIENT_SUFFIX: &str = "-client";

/// The server Certificate, when `spec.tls.issuerRef` asks for one: every server's names,
/// server authentication only.
pub fn desired_certificate(memcached: &Memcached) -> Option<Certificate> {
    let tls = memcached.spec.tls.as_ref()?;
    let issuer = tls.issuer_ref.as_ref()?;
    Some(certificate(
        metadata(memcached),
        CertificateSpec {
            secret_name: tls.secret_name.clone()?,
            common_name: None,
            dns_names: secured_names(memcached),
            issuer_ref: issuer_reference(issuer),
            usages: usages("server auth"),
            private_key: private_key(),
        },
    ))
}

/// The sidecars' client Certificate `<name>-client`, when `spec.tls.issuerRef` issues the
/// certificates and the servers ask for client certificates: client authentication only,
/// into the client Secret (`security::client_secret`).
pub fn desired_client_certificate(memcached: &Memcached) -> Option<Certificate> {
    let tls = memcached.spec.tls.as_ref()?;
    let issuer = tls.issuer_ref.as_ref()?;
    let secret_name = super::security::client_secret(memcached)?;
    let mut meta = metadata(memcached);
    let name = format!("{}{CLIENT_SUFFIX}", memcached.name_any());
    meta.name = Some(name.clone());
    Some(certificate(
        meta,
        CertificateSpec {
            secret_name,
            common_name: Some(name),
            dns_names: Vec::new(),
            issuer_ref: issuer_reference(issuer),
            usages: usages("client auth"),
            private_key: private_key(),
        },
    ))
}

fn certificate(metadata: ObjectMeta, spec: CertificateSpec) -> Certificate {
    Certificate { metadata, spec }
}

fn issuer_reference(issuer: &IssuerRef) -> IssuerReference {
    IssuerReference {
        name: issuer.name.clone(),
        kind: issuer
            .kind
            .clone()
            .unwrap_or_else(|| DEFAULT_ISSUER_KIND.into()),
        group: issuer.group.clone().unwrap_or_else(|| GROUP.into()),
    }
}

/// cert-manager's usages for an ECDSA key used for `purpose` alone.
fn usages(purpose: &str) -> Vec<String> {
    ["digital signature", "key encipherment", purpose]
        .map(String::from)
        .to_vec()
}

/// A new ECDSA P-256 key at every renewal.
fn private_key() -> PrivateKey {
    PrivateKey {
        rotation_policy: "Always".into(),
        algorithm: "ECDSA".into(),
        size: 256,
    }
}
