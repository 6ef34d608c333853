//! Tests the certificate lookup, loading and reloading: every key form, rotation by the
//! `..data` swap, and files that are missing, mismatched or refused.

use super::*;
use crate::tls::cert_reloader::{CertReloader, CheckOutcome, ReloadRecorder};

/// A reloader's recorder that records nothing: these tests read what it serves.
struct Unrecorded;

impl ReloadRecorder for Unrecorded {
    fn loaded(&self, _not_after_unix: i64) {}
    fn failed(&self) {}
}

fn paths(dir: &str) -> CertPaths {
    CertPaths {
        cert: PathBuf::from(dir).join("tls.crt"),
        key: PathBuf::from(dir).join("tls.key"),
    }
}

#[test]
fn an_explicit_cert_dir_is_the_only_candidate() {
    assert_eq!(
        candidates(Some(Path::new("/certs")), Path::new("/")),
        vec![paths("/certs")]
    );
}

#[test]
fn olm_paths_are_tried_in_order_under_the_root() {
    let found: Vec<_> = candidates(None, Path::new("/root"))
        .into_iter()
        .map(|p| (p.cert, p.key))
        .collect();
    assert_eq!(
        found,
        vec![
            (
                PathBuf::from("/root/tmp/k8s-webhook-server/serving-certs/tls.crt"),
                PathBuf::from("/root/tmp/k8s-webhook-server/serving-certs/tls.key")
            ),
            (
                PathBuf::from("/root/tmp/k8s-webhook-server/serving-certs/tls.cert"),
                PathBuf::from("/root/tmp/k8s-webhook-server/serving-certs/tls.key")
            ),
            (
                PathBuf::from("/root/apiserver.local.config/certificates/apiserver.crt"),
                PathBuf::from("/root/apiserver.local.config/certificates/apiserver.key")
            ),
        ]
    );
}

#[test]
fn the_default_root_gives_olm_absolute_paths() {
    let first = &candidates(None, Path::new("/"))[0];
    assert_eq!(
        first.cert,
        PathBuf::from("/tmp/k8s-webhook-server/serving-certs/tls.crt")
    );
}

#[test]
fn a_lookup_failure_names_every_path_and_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let candidates = candidates(None, dir.path());
    let apiserver = dir.path().join(OLM_APISERVER_CERTS_DIR);
    std::fs::create_dir_all(&apiserver).expect("mkdir");
    std::fs::write(apiserver.join("apiserver.crt"), "not a certificate").expect("write");
    std::fs::write(apiserver.join("apiserver.key"), "not a key").expect("write");
    let snapshot = Snapshot::read(&candidates);
    let failure = match lookup(&candidates, &snapshot, &crypto_provider()) {
        Ok(serving) => panic!("loaded {}", serving.serial),
        Err(failure) => failure,
    };
    let text = failure.to_string();
    assert!(text.starts_with("no usable certificate: "), "{text}");
    assert!(
        text.contains(&format!("{}: does not exist", candidates[0].cert.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("{}: does not exist", candidates[1].cert.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{}: no valid PEM certificate",
            candidates[2].cert.display()
        )),
        "{text}"
    );
    assert_eq!(failure.0.len(), 3);
}

#[test]
fn a_bad_key_is_named_with_its_path() {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .expect("self-signed certificate");
    let paths = paths("/certs");
    let error = load_pair(
        &paths,
        cert.cert.pem().as_bytes(),
        b"-----BEGIN NOTHING-----\n-----END NOTHING-----\n",
        &crypto_provider(),
    )
    .map(|serving| serving.serial)
    .expect_err("no key");
    assert!(
        error
            .to_string()
            .starts_with("/certs/tls.key: no usable PEM private key"),
        "{error}"
    );
}

#[test]
fn a_key_of_another_certificate_is_refused_as_a_mismatch() {
    let one = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .expect("self-signed certificate");
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .expect("self-signed certificate");
    let paths = paths("/certs");
    let error = load_pair(
        &paths,
        one.cert.pem().as_bytes(),
        other.signing_key.serialize_pem().as_bytes(),
        &crypto_provider(),
    )
    .map(|serving| serving.serial)
    .expect_err("mismatch");
    assert_eq!(
        error,
        CertError::Mismatch {
            cert: paths.cert.clone(),
            key: paths.key.clone()
        }
    );
    assert_eq!(
        error.to_string(),
        "/certs/tls.key: the key does not match the public key of /certs/tls.crt"
    );
}

#[test]
fn a_matching_pair_loads_with_its_serial_and_expiry() {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .expect("self-signed certificate");
    let serving = load_pair(
        &paths("/certs"),
        cert.cert.pem().as_bytes(),
        cert.signing_key.serialize_pem().as_bytes(),
        &crypto_provider(),
    )
    .expect("loads");
    assert!(!serving.serial.is_empty());
    assert!(serving.not_after > 0);
    assert_eq!(serving.key.cert.len(), 1);
}

#[test]
fn unchanged_files_are_not_loaded_again_and_a_late_pair_is_picked_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let resolver = Arc::new(CertResolver::default());
    let mut reloader = CertReloader::new(
        candidates(Some(dir.path()), Path::new("/")),
        resolver.clone(),
        crypto_provider(),
        Unrecorded,
    );
    assert!(matches!(reloader.check(), CheckOutcome::Refused(_)));
    assert_eq!(reloader.check(), CheckOutcome::Unchanged);
    assert!(!resolver.is_loaded());
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .expect("self-signed certificate");
    std::fs::write(dir.path().join("tls.key"), cert.signing_key.serialize_pem()).expect("write");
    std::fs::write(dir.path().join("tls.crt"), cert.cert.pem()).expect("write");
    assert!(matches!(reloader.check(), CheckOutcome::Loaded { .. }));
    assert!(resolver.is_loaded());
    assert_eq!(reloader.check(), CheckOutcome::Unchanged);
}

/// A trust of one point for `localhost` whose bundle is `ca`.
fn trusting(ca: &testkit::pki::Ca) -> Arc<crate::tls::trust::TrustedCas> {
    Arc::new(crate::tls::trust::TrustedCas {
        points: vec![crate::tls::trust::TrustPoint {
            what: "ValidatingWebhookConfiguration/v vmemcached".to_string(),
            server_name: "localhost".to_string(),
            roots: CertificateDer::pem_slice_iter(ca.pem.as_bytes())
                .collect::<Result<_, _>>()
                .expect("PEM"),
        }],
    })
}

/// A reloader of the pair in `dir` that judges renewals by `trust`.
fn judging_reloader(
    dir: &Path,
    resolver: Arc<CertResolver>,
    trust: crate::tls::trust_watch::TrustWatch,
) -> CertReloader {
    CertReloader::new(
        candidates(Some(dir), Path::new("/")),
        resolver,
        crypto_provider(),
        Unrecorded,
    )
    .with_trust(trust)
}

fn write_leaf(dir: &Path, leaf: &testkit::pki::Leaf) {
    std::fs::write(dir.join("tls.key"), &leaf.key_pem).expect("write");
    std::fs::write(dir.join("tls.crt"), &leaf.cert_pem).expect("write");
}

#[test]
fn a_renewal_under_a_ca_the_api_server_does_not_trust_yet_is_held_until_it_does() {
    use testkit::pki::{Ca, KeyForm};
    let dir = tempfile::tempdir().expect("tempdir");
    let old = Ca::root();
    let new = Ca::root();
    let (trust, watch) = tokio::sync::watch::channel(trusting(&old));
    let resolver = Arc::new(CertResolver::default());
    let mut reloader = judging_reloader(dir.path(), resolver.clone(), watch);
    let first = old.serving(KeyForm::EcPkcs8);
    write_leaf(dir.path(), &first);
    assert_eq!(
        reloader.check(),
        CheckOutcome::Loaded {
            serial: first.serial.clone()
        }
    );

    // The new CA's pair lands before the bundles name the new CA: the old pair stays.
    let renewed = new.serving(KeyForm::EcPkcs8);
    write_leaf(dir.path(), &renewed);
    assert_eq!(
        reloader.check(),
        CheckOutcome::Held {
            serial: renewed.serial.clone(),
            refused_by: vec!["ValidatingWebhookConfiguration/v vmemcached".to_string()],
        }
    );
    assert_eq!(
        reloader.reconsider(),
        CheckOutcome::Held {
            serial: renewed.serial.clone(),
            refused_by: vec!["ValidatingWebhookConfiguration/v vmemcached".to_string()],
        }
    );
    let served = resolver.current.load_full().expect("a certificate");
    assert_eq!(testkit::pki::serial_of(&served.cert[0]), first.serial);

    // The bundles now name the new CA: the held pair is served.
    trust.send_replace(trusting(&new));
    assert_eq!(
        reloader.reconsider(),
        CheckOutcome::Loaded {
            serial: renewed.serial.clone()
        }
    );
    assert_eq!(reloader.reconsider(), CheckOutcome::Unchanged);
    let served = resolver.current.load_full().expect("a certificate");
    assert_eq!(testkit::pki::serial_of(&served.cert[0]), renewed.serial);
}

#[test]
fn a_renewal_is_served_at_once_when_trust_is_unknown_or_the_served_pair_is_refused_too() {
    use testkit::pki::{Ca, KeyForm};
    let dir = tempfile::tempdir().expect("tempdir");
    let old = Ca::root();
    let new = Ca::root();
    let (trust, watch) =
        tokio::sync::watch::channel(Arc::new(crate::tls::trust::TrustedCas::default()));
    let mut reloader = judging_reloader(dir.path(), Arc::new(CertResolver::default()), watch);
    write_leaf(dir.path(), &old.serving(KeyForm::EcPkcs8));
    assert!(matches!(reloader.check(), CheckOutcome::Loaded { .. }));
    // Unknown trust: served at once.
    write_leaf(dir.path(), &new.serving(KeyForm::EcPkcs8));
    assert!(matches!(reloader.check(), CheckOutcome::Loaded { .. }));
    // The bundles name a third CA: neither pair is trusted, the newest is served.
    trust.send_replace(trusting(&Ca::root()));
    write_leaf(dir.path(), &old.serving(KeyForm::EcPkcs8));
    assert!(matches!(reloader.check(), CheckOutcome::Loaded { .. }));
    // The served pair has expired: a renewal the bundles refuse is no worse.
    trust.send_replace(Arc::new(crate::tls::trust::TrustedCas::default()));
    write_leaf(dir.path(), &old.expired_serving());
    assert!(matches!(reloader.check(), CheckOutcome::Loaded { .. }));
    trust.send_replace(trusting(&old));
    write_leaf(dir.path(), &new.serving(KeyForm::EcPkcs8));
    assert!(matches!(reloader.check(), CheckOutcome::Loaded { .. }));
    // And a trusted pair is not given up for an expired one.
    write_leaf(dir.path(), &old.serving(KeyForm::EcPkcs8));
    assert!(matches!(reloader.check(), CheckOutcome::Loaded { .. }));
    write_leaf(dir.path(), &old.expired_serving());
    assert!(matches!(reloader.check(), CheckOutcome::Held { .. }));
}

#[test]
fn one_bundle_that_accepts_the_renewal_is_enough_to_serve_it() {
    use crate::tls::trust::TrustedCas;
    use testkit::pki::{Ca, KeyForm};
    let dir = tempfile::tempdir().expect("tempdir");
    let old = Ca::root();
    let new = Ca::root();
    let two = |first: &Ca, second: &Ca| {
        let mut points = trusting(first).points.clone();
        let mut other = trusting(second).points[0].clone();
        other.what = "CustomResourceDefinition/m conversion".to_string();
        points.push(other);
        Arc::new(TrustedCas { points })
    };
    let (trust, watch) = tokio::sync::watch::channel(two(&old, &old));
    let mut reloader = judging_reloader(dir.path(), Arc::new(CertResolver::default()), watch);
    write_leaf(dir.path(), &old.serving(KeyForm::EcPkcs8));
    assert!(matches!(reloader.check(), CheckOutcome::Loaded { .. }));
    let renewed = new.serving(KeyForm::EcPkcs8);
    write_leaf(dir.path(), &renewed);
    assert!(matches!(reloader.check(), CheckOutcome::Held { .. }));
    // cainjector rewrote the conversion's bundle, not yet the webhook configuration's.
    trust.send_replace(two(&old, &new));
    assert_eq!(
        reloader.reconsider(),
        CheckOutcome::Loaded {
            serial: renewed.serial
        }
    );
}
