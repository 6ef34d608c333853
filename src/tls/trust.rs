//! Which certificate authorities the API server trusts when it calls this operator's webhooks,
//! and whether it would accept a serving certificate: the question the certificate reloader
//! asks before it switches to a renewed pair (see `certs`).
//!
//! The API server verifies the served chain against the `caBundle` of the configuration it is
//! calling, for the host it dials (`<service>.<namespace>.svc`, or the URL's host). Each
//! webhook entry of this operator's (matched by name) in a Mutating- or
//! ValidatingWebhookConfiguration, and its CRD's conversion, is one [`TrustPoint`]; a chain is
//! verified against each exactly as a TLS client would (rustls' WebPKI verifier: chain to a
//! root of the bundle, validity dates, the host name). Pure: objects in, judgments out; the
//! watch that feeds it is in `trust_watch`.

use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::CryptoProvider;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

/// One place the API server reads a CA bundle from to call a webhook of this operator.
#[derive(Clone, Debug)]
pub struct TrustPoint {
    /// What it is, for logs: `ValidatingWebhookConfiguration/<name> vmemcached-…`.
    pub what: String,
    /// The host the API server verifies the certificate for.
    pub server_name: String,
    /// The bundle's certificates; none when it is empty or unreadable.
    pub roots: Vec<CertificateDer<'static>>,
}

/// Every trust point in force; empty while they are unknown (not read yet, or not readable).
#[derive(Clone, Debug, Default)]
pub struct TrustedCas {
    /// The points, in a stable order.
    pub points: Vec<TrustPoint>,
}

impl TrustedCas {
    /// Whether nothing is known of the API server's trust.
    pub fn is_unknown(&self) -> bool {
        self.points.is_empty()
    }

    /// The points that would refuse `chain` (leaf first) at `now`.
    pub fn refusing<'a>(
        &'a self,
        chain: &[CertificateDer<'static>],
        now: UnixTime,
        provider: &Arc<CryptoProvider>,
    ) -> Vec<&'a str> {
        self.points
            .iter()
            .filter(|point| !point.accepts(chain, now, provider))
            .map(|point| point.what.as_str())
            .collect()
    }
}

impl TrustPoint {
    /// Whether a TLS client holding this point's bundle accepts `chain` for its host at `now`.
    pub fn accepts(
        &self,
        chain: &[CertificateDer<'static>],
        now: UnixTime,
        provider: &Arc<CryptoProvider>,
    ) -> bool {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return false;
        };
        let mut roots = RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(self.roots.iter().cloned());
        if added == 0 {
            return false;
        }
        let Ok(verifier) =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone()).build()
        else {
            return false;
        };
        let Ok(name) = ServerName::try_from(self.server_name.clone()) else {
            return false;
        };
        verifier
            .verify_server_cert(leaf, intermediates, &name, &[], now)
            .is_ok()
    }
}

/// The certificates of a PEM bundle (`caBundle` bytes); unreadable blocks are skipped.
fn bundle_roots(bundle: Option<&[u8]>) -> Vec<CertificateDer<'static>> {
    bundle
        .map(|pem| {
            CertificateDer::pem_slice_iter(pem)
                .filter_map(Result::ok)
                .collect()
        })
        .unwrap_or_default()
}

/// The host the API server dials for a Service: `<name>.<namespace>.svc`.
fn service_host(name: &str, namespace: &str) -> String {
    format!("{name}.{namespace}.svc")
}

/// The host of an `https://` URL, without port, path or brackets.
fn url_host(url: &str) -> Option<String> {
    let rest = url.strip_prefix("https://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next()?,
        None => authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host),
    };
    Some(host.to_string())
}

/// The host the API server dials for a client configuration.
fn server_name(config: &WebhookClientConfig) -> Option<String> {
    match &config.service {
        Some(service) => Some(service_host(&service.name, &service.namespace)),
        None => url_host(config.url.as_deref()?),
    }
}

fn point(
    kind: &str,
    object: &str,
    webhook: &str,
    config: &WebhookClientConfig,
) -> Option<TrustPoint> {
    Some(TrustPoint {
        what: format!("{kind}/{object} {webhook}"),
        server_name: server_name(config)?,
        roots: bundle_roots(config.ca_bundle.as_ref().map(|b| b.0.as_slice())),
    })
}

/// The trust points of a configuration's entries, given as (name, client config), that are
/// named in `names`.
fn entry_points<'a>(
    kind: &str,
    object: Option<&str>,
    entries: impl Iterator<Item = (&'a str, &'a WebhookClientConfig)>,
    names: &[&str],
) -> Vec<TrustPoint> {
    let object = object.unwrap_or_default();
    entries
        .filter(|(name, _)| names.contains(name))
        .filter_map(|(name, config)| point(kind, object, name, config))
        .collect()
}

/// The trust points of a MutatingWebhookConfiguration: its entries named in `names`.
pub fn mutating_points(config: &MutatingWebhookConfiguration, names: &[&str]) -> Vec<TrustPoint> {
    let entries = config.webhooks.iter().flatten();
    entry_points(
        "MutatingWebhookConfiguration",
        config.metadata.name.as_deref(),
        entries.map(|w| (w.name.as_str(), &w.client_config)),
        names,
    )
}

/// The trust points of a ValidatingWebhookConfiguration: its entries named in `names`.
pub fn validating_points(
    config: &ValidatingWebhookConfiguration,
    names: &[&str],
) -> Vec<TrustPoint> {
    let entries = config.webhooks.iter().flatten();
    entry_points(
        "ValidatingWebhookConfiguration",
        config.metadata.name.as_deref(),
        entries.map(|w| (w.name.as_str(), &w.client_config)),
        names,
    )
}

/// The trust point of a CRD's conversion webhook, when it has one.
pub fn conversion_point(crd: &CustomResourceDefinition) -> Option<TrustPoint> {
    let conversion = crd.spec.conversion.as_ref()?;
    if conversion.strategy != "Webhook" {
        return None;
    }
    let config = conversion.webhook.as_ref()?.client_config.as_ref()?;
    let object = crd.metadata.name.as_deref().unwrap_or_default();
    let server_name = match &config.service {
        Some(service) => service_host(&service.name, &service.namespace),
        None => url_host(config.url.as_deref()?)?,
    };
    Some(TrustPoint {
        what: format!("CustomResourceDefinition/{object} conversion"),
        server_name,
        roots: bundle_roots(config.ca_bundle.as_ref().map(|b| b.0.as_slice())),
    })
}

#[cfg(test)]
mod tests;
