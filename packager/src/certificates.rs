//! Builds the objects through which cert-manager issues the webhooks' serving certificate
//! when the operator is installed without OLM (by `config/certmanager` and by the Helm chart):
//! a self-signed Issuer that signs only a CA, the CA Certificate, a CA Issuer, the serving
//! Certificate, and the annotation that has cainjector write the CA into every caBundle.

use serde_json::{Value, json};

use super::config::{
    CA_CERTIFICATE_NAME, CA_DURATION, CA_ISSUER_NAME, CERTIFICATE_NAME, CERTIFICATE_SECRET_NAME,
    ISSUER_NAME, NAMESPACE, WEBHOOK_SERVICE_NAME, meta_value,
};

/// The annotation cert-manager's CA injector reads.
pub const INJECT_CA_FROM: &str = "cert-manager.io/inject-ca-from";

/// The value of [`INJECT_CA_FROM`]: the serving Certificate, whose Secret's `ca.crt` is the CA.
pub fn inject_ca_from() -> String {
    format!("{NAMESPACE}/{CERTIFICATE_NAME}")
}

/// A patch that adds the [`INJECT_CA_FROM`] annotation to the object named.
pub fn ca_injection_patch(api_version: &str, kind: &str, name: &str) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "annotations": {INJECT_CA_FROM: inject_ca_from()},
        },
    })
}
/// The self-signed Issuer: it signs the CA only.
pub fn selfsigned_issuer() -> Value {
    json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": meta_value(ISSUER_NAME),
        "spec": {"selfSigned": {}},
    })
}

/// The CA: self-signed, long-lived, renewed with the same key (`rotationPolicy: Never`), so
/// that a leaf it signed still verifies against the renewed CA.
pub fn ca_certificate() -> Value {
    json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": meta_value(CA_CERTIFICATE_NAME),
        "spec": {
            "isCA": true,
            "commonName": CA_CERTIFICATE_NAME,
            "duration": CA_DURATION,
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Never"},
            "issuerRef": {"kind": "Issuer", "name": ISSUER_NAME},
            "secretName": CA_CERTIFICATE_NAME,
        },
    })
}

/// The CA Issuer: signs the serving certificate with the CA's key.
pub fn ca_issuer() -> Value {
    json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": meta_value(CA_ISSUER_NAME),
        "spec": {"ca": {"secretName": CA_CERTIFICATE_NAME}},
    })
}

/// The serving certificate, signed by the CA Issuer, with a new key at every renewal. Its
/// renewals never change the CA, so the caBundles cainjector wrote stay valid throughout.
pub fn certificate() -> Value {
    json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": meta_value(CERTIFICATE_NAME),
        "spec": {
            "dnsNames": [
                format!("{WEBHOOK_SERVICE_NAME}.{NAMESPACE}.svc"),
                format!("{WEBHOOK_SERVICE_NAME}.{NAMESPACE}.svc.cluster.local"),
            ],
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
            "issuerRef": {"kind": "Issuer", "name": CA_ISSUER_NAME},
            "secretName": CERTIFICATE_SECRET_NAME,
        },
    })
}
