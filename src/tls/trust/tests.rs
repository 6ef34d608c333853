//! Tests the trust judgments: a chain is accepted where its CA is in the bundle and the host
//! is in the certificate, and refused elsewhere; trust points come only from this operator's
//! webhook entries and an active conversion webhook.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, ServiceReference, ValidatingWebhook,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinitionSpec, ServiceReference as CrdService,
    WebhookClientConfig as CrdClientConfig, WebhookConversion,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use testkit::pki::{Ca, KeyForm};

use super::*;
use crate::tls::certs::crypto_provider;

const HOST: &str = "webhook-service.operators.svc";

fn chain(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .expect("PEM")
}

fn point_for(ca: &Ca, host: &str) -> TrustPoint {
    TrustPoint {
        what: "a webhook".to_string(),
        server_name: host.to_string(),
        roots: chain(&ca.pem),
    }
}

fn service_config(ca: &Ca) -> WebhookClientConfig {
    WebhookClientConfig {
        service: Some(ServiceReference {
            name: "webhook-service".to_string(),
            namespace: "operators".to_string(),
            path: Some("/validate".to_string()),
            port: Some(443),
        }),
        ca_bundle: Some(ByteString(ca.pem.clone().into_bytes())),
        url: None,
    }
}

#[test]
fn a_chain_is_accepted_by_its_ca_for_its_host_and_refused_otherwise() {
    let provider = crypto_provider();
    let now = UnixTime::now();
    let old = Ca::root();
    let new = Ca::root();
    let leaf = chain(&new.serving_for(&[HOST]).cert_pem);
    assert!(point_for(&new, HOST).accepts(&leaf, now, &provider));
    assert!(!point_for(&old, HOST).accepts(&leaf, now, &provider));
    assert!(!point_for(&new, "other.operators.svc").accepts(&leaf, now, &provider));
    assert!(!point_for(&new, HOST).accepts(&[], now, &provider));
    let empty = TrustPoint {
        roots: Vec::new(),
        ..point_for(&new, HOST)
    };
    assert!(!empty.accepts(&leaf, now, &provider));
}

#[test]
fn an_intermediate_served_in_the_chain_is_followed_to_the_root() {
    let provider = crypto_provider();
    let root = Ca::root();
    let intermediate = root.intermediate();
    let leaf = chain(
        &intermediate
            .serving_for(&[HOST])
            .with_chain(&intermediate)
            .cert_pem,
    );
    assert!(point_for(&root, HOST).accepts(&leaf, UnixTime::now(), &provider));
}

#[test]
fn an_expired_certificate_is_refused_by_its_own_ca() {
    let provider = crypto_provider();
    let ca = Ca::root();
    let expired = chain(&ca.expired_serving().cert_pem);
    let loopback = point_for(&ca, "127.0.0.1");
    let fresh = chain(&ca.serving(KeyForm::EcPkcs8).cert_pem);
    assert!(loopback.accepts(&fresh, UnixTime::now(), &provider));
    assert!(!loopback.accepts(&expired, UnixTime::now(), &provider));
}

#[test]
fn refusing_names_every_point_a_chain_fails() {
    let provider = crypto_provider();
    let old = Ca::root();
    let new = Ca::root();
    let leaf = chain(&new.serving_for(&[HOST]).cert_pem);
    let trusted = TrustedCas {
        points: vec![
            TrustPoint {
                what: "mutating".to_string(),
                ..point_for(&new, HOST)
            },
            TrustPoint {
                what: "conversion".to_string(),
                ..point_for(&old, HOST)
            },
        ],
    };
    assert_eq!(
        trusted.refusing(&leaf, UnixTime::now(), &provider),
        ["conversion"]
    );
    assert!(!trusted.is_unknown());
    assert!(TrustedCas::default().is_unknown());
}

#[test]
fn only_this_operators_entries_are_trust_points() {
    let ca = Ca::root();
    let config = ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some("generated-abcde".to_string()),
            ..ObjectMeta::default()
        },
        webhooks: Some(vec![
            ValidatingWebhook {
                name: "vmemcached-v1beta1.cache.f2367556.dev".to_string(),
                client_config: service_config(&ca),
                ..ValidatingWebhook::default()
            },
            ValidatingWebhook {
                name: "someone.else.example.com".to_string(),
                client_config: service_config(&ca),
                ..ValidatingWebhook::default()
            },
        ]),
    };
    let points = validating_points(&config, &["vmemcached-v1beta1.cache.f2367556.dev"]);
    assert_eq!(points.len(), 1);
    assert_eq!(
        points[0].what,
        "ValidatingWebhookConfiguration/generated-abcde vmemcached-v1beta1.cache.f2367556.dev"
    );
    assert_eq!(points[0].server_name, HOST);
    assert_eq!(points[0].roots.len(), 1);

    let mutating = MutatingWebhookConfiguration {
        metadata: ObjectMeta::default(),
        webhooks: Some(vec![MutatingWebhook {
            name: "mmemcached-v1beta1.cache.f2367556.dev".to_string(),
            client_config: WebhookClientConfig {
                url: Some("https://[::1]:9443/mutate".to_string()),
                ..WebhookClientConfig::default()
            },
            ..MutatingWebhook::default()
        }]),
    };
    let points = mutating_points(&mutating, &["mmemcached-v1beta1.cache.f2367556.dev"]);
    assert_eq!(points[0].server_name, "::1");
    assert!(points[0].roots.is_empty());
}

#[test]
fn a_url_names_its_host_without_port_or_path() {
    for (url, host) in [
        (
            "https://webhooks.example.com:9443/validate",
            Some("webhooks.example.com"),
        ),
        ("https://127.0.0.1/convert?x=1", Some("127.0.0.1")),
        ("http://insecure.example.com/", None),
    ] {
        let config = WebhookClientConfig {
            url: Some(url.to_string()),
            ..WebhookClientConfig::default()
        };
        assert_eq!(server_name(&config).as_deref(), host, "{url}");
    }
}

#[test]
fn a_crd_is_a_trust_point_only_while_it_converts_by_webhook() {
    let ca = Ca::root();
    let mut crd = CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some("memcacheds.cache.f2367556.dev".to_string()),
            ..ObjectMeta::default()
        },
        spec: CustomResourceDefinitionSpec {
            conversion: Some(CustomResourceConversion {
                strategy: "Webhook".to_string(),
                webhook: Some(WebhookConversion {
                    client_config: Some(CrdClientConfig {
                        service: Some(CrdService {
                            name: "webhook-service".to_string(),
                            namespace: "operators".to_string(),
                            path: Some("/convert".to_string()),
                            port: Some(443),
                        }),
                        ca_bundle: Some(ByteString(ca.pem.clone().into_bytes())),
                        url: None,
                    }),
                    conversion_review_versions: vec!["v1".to_string()],
                }),
            }),
            ..CustomResourceDefinitionSpec::default()
        },
        status: None,
    };
    let point = conversion_point(&crd).expect("a conversion webhook");
    assert_eq!(
        point.what,
        "CustomResourceDefinition/memcacheds.cache.f2367556.dev conversion"
    );
    assert_eq!(point.server_name, HOST);
    if let Some(conversion) = crd.spec.conversion.as_mut() {
        conversion.strategy = "None".to_string();
    }
    assert!(conversion_point(&crd).is_none());
}
