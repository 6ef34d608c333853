//! Checks the settings that secure memcached's clients and stop its servers: the TLS and
//! authentication Secrets are named (as Secret names), client CAs come from a ConfigMap key
//! only where client certificates are asked for, the NetworkPolicy lists its sources, the
//! plaintext port beside TLS is a port other than the client port, the certificate
//! refresher's image is an image, and the shutdown's grace period outlasts its preStop delay.
//! The CRD's CEL rules (`api::cel`) say the same; the Secrets' and ConfigMaps' contents are
//! the kubelet's to read.

use std::sync::LazyLock;

use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use regex::Regex;

use super::image::check_image;
use crate::admission::violation::{Violation, Warnings};
use crate::api::v1beta1::{
    ClientAuth, DEFAULT_PORT, DEFAULT_TERMINATION_GRACE_SECONDS, MAX_ALLOWED_SOURCES,
    MemcachedSpec, TlsSpec,
};

/// The longest Secret name.
const MAX_SECRET_NAME: usize = 253;
/// A Secret name's grammar, compiled once: the CRD's own pattern, so the webhook and the API
/// server judge by one grammar.
static SECRET_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(crate::api::cel::DNS_SUBDOMAIN_PATTERN)
        .expect("the CRD's Secret name pattern compiles")
});
/// A ConfigMap key's grammar, the CRD's own pattern.
static CONFIG_MAP_KEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(crate::api::cel::CONFIG_MAP_KEY_PATTERN).expect("the CRD's key pattern compiles")
});
/// The longest preStop delay, in seconds (the CRD's bound).
const MAX_PRE_STOP_DELAY: i32 = 600;
/// The longest grace period, in seconds (the CRD's bound).
const MAX_GRACE_PERIOD: i64 = 3600;

/// Adds a violation for every security or shutdown setting of `spec` that is wrong.
pub(super) fn check(
    spec: &MemcachedSpec,
    violations: &mut Vec<Violation>,
    warnings: &mut Warnings,
) {
    if let Some(tls) = &spec.tls {
        if let Some(image) = &tls.refresher_image {
            check_image("spec.tls.refresherImage", image, violations, warnings);
        }
        check_secret_name(
            "spec.tls.secretName",
            tls.secret_name.as_deref(),
            "tls.crt and tls.key",
            violations,
        );
        let service_ca = tls.openshift_service_ca == Some(true);
        if let Some(issuer) = &tls.issuer_ref {
            if service_ca {
                violations.push(Violation::new(
                    "spec.tls.openShiftServiceCA",
                    "spec.tls.issuerRef already issues the certificate; choose one of the two",
                ));
            }
            if issuer.name.is_empty() || issuer.name.len() > MAX_SECRET_NAME {
                violations.push(Violation::new(
                    "spec.tls.issuerRef.name",
                    format!(
                        "{:?} is not an issuer's name (1 to {MAX_SECRET_NAME} characters)",
                        issuer.name
                    ),
                ));
            }
        }
        if service_ca
            && tls.client_auth.unwrap_or_default() != ClientAuth::None
            && tls.client_ca.is_none()
        {
            violations.push(Violation::new(
                "spec.tls.clientAuth",
                "must be None with openShiftServiceCA unless spec.tls.clientCA names the CAs: \
                 the service CA writes no ca.crt to verify client certificates against",
            ));
        }
        check_client_identity(tls, violations);
        check_client_ca(tls, violations);
        let client_port = spec
            .service
            .as_ref()
            .and_then(|s| s.port)
            .unwrap_or(DEFAULT_PORT);
        match tls.plaintext_port {
            Some(port) if !(1..=65535).contains(&port) => violations.push(Violation::new(
                "spec.tls.plaintextPort",
                format!("{port} is not a port (1 to 65535)"),
            )),
            Some(port) if port == client_port => violations.push(Violation::new(
                "spec.tls.plaintextPort",
                format!(
                    "{port} is the client port (spec.service.port), which serves TLS; pick \
                     another port for plaintext clients"
                ),
            )),
            _ => {}
        }
    }
    if let Some(auth) = &spec.auth {
        if let Some(image) = &auth.reloader_image {
            check_image("spec.auth.reloaderImage", image, violations, warnings);
        }
        check_secret_name(
            "spec.auth.secretName",
            auth.secret_name.as_deref(),
            "the authfile key",
            violations,
        );
    }
    if let Some(policy) = &spec.network_policy {
        check_sources(
            "spec.networkPolicy.allowedSources",
            policy.allowed_sources.as_deref(),
            "must list at least one source (pods, namespaces or address blocks); without one no \
             client could connect",
            violations,
        );
    }
    if let Some(shutdown) = &spec.graceful_shutdown {
        let delay = shutdown.pre_stop_delay_seconds.unwrap_or(0);
        let grace = shutdown
            .termination_grace_period_seconds
            .unwrap_or(DEFAULT_TERMINATION_GRACE_SECONDS);
        if !(0..=MAX_PRE_STOP_DELAY).contains(&delay) {
            violations.push(Violation::new(
                "spec.gracefulShutdown.preStopDelaySeconds",
                format!("{delay} is outside 0 to {MAX_PRE_STOP_DELAY}"),
            ));
        }
        if !(1..=MAX_GRACE_PERIOD).contains(&grace) {
            violations.push(Violation::new(
                "spec.gracefulShutdown.terminationGracePeriodSeconds",
                format!("{grace} is outside 1 to {MAX_GRACE_PERIOD}"),
            ));
        } else if grace <= i64::from(delay) {
            violations.push(Violation::new(
                "spec.gracefulShutdown.terminationGracePeriodSeconds",
                format!(
                    "{grace} s must be longer than preStopDelaySeconds ({delay} s), or the \
                     server is killed before memcached is told to stop"
                ),
            ));
        }
    }
}

/// Checks a NetworkPolicy's list of peers: present and within [`MAX_ALLOWED_SOURCES`];
/// `empty` says why an empty list is wrong.
pub(super) fn check_sources(
    field: &str,
    sources: Option<&[NetworkPolicyPeer]>,
    empty: &str,
    violations: &mut Vec<Violation>,
) {
    let sources = sources.unwrap_or_default();
    if sources.is_empty() {
        violations.push(Violation::new(field, empty));
    } else if sources.len() > MAX_ALLOWED_SOURCES {
        violations.push(Violation::new(
            field,
            format!(
                "{} sources exceed the limit of {MAX_ALLOWED_SOURCES}",
                sources.len()
            ),
        ));
    }
}

/// The sidecars' client certificate under `clientAuth`: issued by the operator with
/// `issuerRef`, otherwise a Secret the user names (required with `Require`), never the
/// server's own Secret, and named only when a client certificate is asked for.
fn check_client_identity(tls: &TlsSpec, violations: &mut Vec<Violation>) {
    const FIELD: &str = "spec.tls.clientSecretName";
    let client_auth = tls.client_auth.unwrap_or_default();
    match tls.client_secret_name.as_deref() {
        None if client_auth == ClientAuth::Require && tls.issuer_ref.is_none() => {
            violations.push(Violation::new(
                FIELD,
                "is required with clientAuth Require and no issuerRef: the Secret with the \
                 client certificate the pod's sidecars present (they never use the server's key)",
            ));
        }
        None => {}
        Some(_) if client_auth == ClientAuth::None => violations.push(Violation::new(
            FIELD,
            "is used only with clientAuth Request or Require: with None no client certificate \
             is asked for",
        )),
        Some(name) if tls.secret_name.as_deref() == Some(name) => violations.push(Violation::new(
            FIELD,
            "must not be spec.tls.secretName: the sidecars never hold the server's key",
        )),
        Some(name) => check_secret_name(FIELD, Some(name), "tls.crt and tls.key", violations),
    }
}

/// The ConfigMap key client certificates are verified against: only where they are asked
/// for, a ConfigMap's name and a key's.
fn check_client_ca(tls: &TlsSpec, violations: &mut Vec<Violation>) {
    let Some(source) = &tls.client_ca else {
        return;
    };
    if tls.client_auth.unwrap_or_default() == ClientAuth::None {
        violations.push(Violation::new(
            "spec.tls.clientCA",
            "is used only with clientAuth Request or Require: with None no client certificate \
             is verified",
        ));
    }
    let name = &source.config_map_name;
    if name.len() > MAX_SECRET_NAME || !SECRET_NAME.is_match(name) {
        violations.push(Violation::new(
            "spec.tls.clientCA.configMapName",
            format!(
                "{name:?} is not a ConfigMap's name (a DNS subdomain of 1 to {MAX_SECRET_NAME} \
                 characters)"
            ),
        ));
    }
    let key = source.key();
    if key.len() > MAX_SECRET_NAME || !CONFIG_MAP_KEY.is_match(key) {
        violations.push(Violation::new(
            "spec.tls.clientCA.key",
            format!(
                "{key:?} is not a ConfigMap key (1 to {MAX_SECRET_NAME} letters, digits, '-', \
                 '_' or '.')"
            ),
        ));
    }
}

fn check_secret_name(
    field: &str,
    name: Option<&str>,
    holds: &str,
    violations: &mut Vec<Violation>,
) {
    let Some(name) = name else {
        violations.push(Violation::new(
            field,
            format!("is required: the Secret that holds {holds}"),
        ));
        return;
    };
    if name.len() > MAX_SECRET_NAME || !SECRET_NAME.is_match(name) {
        violations.push(Violation::new(
            field,
            format!(
                "{name:?} is not a Secret name (a DNS subdomain: at most {MAX_SECRET_NAME} \
                 lowercase letters, digits, '-' and '.')"
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1beta1::{AuthSpec, GracefulShutdownSpec, ServiceSpec, TlsSpec};

    fn violations(spec: &MemcachedSpec) -> Vec<String> {
        let mut violations = Vec::new();
        check(spec, &mut violations, &mut Vec::new());
        violations.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn tls_and_auth_name_their_secrets() {
        let spec = MemcachedSpec {
            tls: Some(TlsSpec::default()),
            auth: Some(AuthSpec {
                secret_name: Some("Not_A_Name".into()),
                reloader_image: None,
            }),
            ..MemcachedSpec::default()
        };
        let found = violations(&spec);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("spec.tls.secretName") && found[0].contains("required"));
        assert!(found[1].contains("spec.auth.secretName") && found[1].contains("Not_A_Name"));
        let named = MemcachedSpec {
            tls: Some(TlsSpec {
                secret_name: Some("cache-tls".into()),
                ..TlsSpec::default()
            }),
            auth: Some(AuthSpec {
                secret_name: Some("cache.auth".into()),
                reloader_image: None,
            }),
            ..MemcachedSpec::default()
        };
        assert_eq!(violations(&named), Vec::<String>::new());
    }

    #[test]
    fn client_cas_come_from_a_named_key_where_client_certificates_are_verified() {
        let spec = |client_auth, service_ca: bool, name: &str, key: Option<&str>| MemcachedSpec {
            tls: Some(TlsSpec {
                secret_name: Some("cache-tls".into()),
                client_auth: Some(client_auth),
                client_secret_name: Some("cache-client".into())
                    .filter(|_| client_auth != ClientAuth::None),
                openshift_service_ca: service_ca.then_some(true),
                client_ca: Some(crate::api::v1beta1::ClientCaSource {
                    config_map_name: name.into(),
                    key: key.map(String::from),
                }),
                ..TlsSpec::default()
            }),
            ..MemcachedSpec::default()
        };
        let found = violations(&spec(ClientAuth::None, false, "trust", None));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("spec.tls.clientCA") && found[0].contains("only with clientAuth"),
            "{found:?}"
        );
        let found = violations(&spec(ClientAuth::Require, false, "Trust!", Some("a/b")));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].contains("clientCA.configMapName") && found[0].contains("\"Trust!\""),
            "{found:?}"
        );
        assert!(
            found[1].contains("clientCA.key") && found[1].contains("\"a/b\""),
            "{found:?}"
        );
        for fine in [
            spec(ClientAuth::Require, false, "trust", None),
            spec(ClientAuth::Request, false, "trust", Some("bundle.pem")),
            // The service CA writes no ca.crt; a clientCA gives the servers one.
            spec(ClientAuth::Require, true, "trust", None),
        ] {
            assert_eq!(violations(&fine), Vec::<String>::new(), "{fine:?}");
        }
        let mut without = spec(ClientAuth::Require, true, "trust", None);
        without.tls.as_mut().expect("tls").client_ca = None;
        let found = violations(&without);
        assert!(
            found[0].contains("spec.tls.clientAuth") && found[0].contains("clientCA"),
            "{found:?}"
        );
    }

    #[test]
    fn the_sidecars_client_certificate_is_their_own_and_named_where_needed() {
        let spec = |client_auth, issuer: bool, client: Option<&str>| MemcachedSpec {
            tls: Some(TlsSpec {
                secret_name: Some("cache-tls".into()),
                client_auth: Some(client_auth),
                issuer_ref: issuer.then(|| crate::api::v1beta1::IssuerRef {
                    name: "ca".into(),
                    ..Default::default()
                }),
                client_secret_name: client.map(String::from),
                ..TlsSpec::default()
            }),
            ..MemcachedSpec::default()
        };
        let found = violations(&spec(ClientAuth::Require, false, None));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("spec.tls.clientSecretName") && found[0].contains("is required"),
            "{found:?}"
        );
        let found = violations(&spec(ClientAuth::Require, false, Some("cache-tls")));
        assert!(
            found[0].contains("never hold the server's key"),
            "{found:?}"
        );
        let found = violations(&spec(ClientAuth::None, false, Some("cache-client")));
        assert!(found[0].contains("only with clientAuth"), "{found:?}");
        let found = violations(&spec(ClientAuth::Request, false, Some("Bad_Name")));
        assert!(
            found[0].contains("\"Bad_Name\" is not a Secret name"),
            "{found:?}"
        );
        for fine in [
            spec(ClientAuth::Require, false, Some("cache-client")),
            spec(ClientAuth::Require, true, None),
            spec(ClientAuth::Require, true, Some("cache-client")),
            spec(ClientAuth::Request, false, None),
            spec(ClientAuth::None, false, None),
        ] {
            assert_eq!(violations(&fine), Vec::<String>::new(), "{fine:?}");
        }
    }

    #[test]
    fn the_plaintext_port_is_never_the_client_port() {
        let spec = |plaintext, service: Option<i32>| MemcachedSpec {
            tls: Some(TlsSpec {
                secret_name: Some("cache-tls".into()),
                plaintext_port: Some(plaintext),
                ..TlsSpec::default()
            }),
            service: service.map(|port| ServiceSpec { port: Some(port) }),
            ..MemcachedSpec::default()
        };
        assert!(violations(&spec(11211, None))[0].contains("is the client port"));
        assert!(violations(&spec(12000, Some(12000)))[0].contains("is the client port"));
        assert!(violations(&spec(0, None))[0].contains("not a port"));
        assert_eq!(violations(&spec(11212, None)), Vec::<String>::new());
    }

    #[test]
    fn the_grace_period_outlasts_the_pre_stop_delay() {
        let spec = |delay, grace| MemcachedSpec {
            graceful_shutdown: Some(GracefulShutdownSpec {
                pre_stop_delay_seconds: delay,
                termination_grace_period_seconds: grace,
            }),
            ..MemcachedSpec::default()
        };
        assert!(violations(&spec(Some(30), None))[0].contains("longer than preStopDelaySeconds"));
        assert!(violations(&spec(Some(10), Some(10)))[0].contains("longer than"));
        assert!(violations(&spec(Some(601), Some(700)))[0].contains("outside 0 to 600"));
        assert!(violations(&spec(None, Some(0)))[0].contains("outside 1 to 3600"));
        assert_eq!(violations(&spec(Some(10), Some(40))), Vec::<String>::new());
        assert_eq!(violations(&spec(None, None)), Vec::<String>::new());
    }
}
