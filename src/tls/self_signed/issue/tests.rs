//! The renewal rules of `issue`, on Secrets made by it and by hand.

use super::*;

const DAY: i64 = 86_400;
/// A fixed start, well inside every validity used.
const START: i64 = 1_800_000_000;

fn settings() -> Settings {
    Settings {
        names: vec![
            "svc.ns.svc".to_string(),
            "svc.ns.svc.cluster.local".to_string(),
        ],
        ca_validity: Duration::from_secs(365 * 86_400),
        cert_validity: Duration::from_secs(90 * 86_400),
    }
}

fn fits(leaf: &Held, ca: &Held, names: &[String]) -> bool {
    signed_by(leaf, &ca.der) && names_match(leaf, names)
}

fn issued(at: i64) -> BTreeMap<String, ByteString> {
    plan(None, &settings(), at)
        .expect("issued")
        .data
        .expect("a new Secret's data")
}

fn text(data: &BTreeMap<String, ByteString>, key: &str) -> String {
    String::from_utf8(data[key].0.clone()).expect("PEM text")
}

fn cas(data: &BTreeMap<String, ByteString>) -> Vec<CertificateDer<'static>> {
    certificates(&data[CA_CERT].0)
        .into_iter()
        .map(|(der, _, _)| der)
        .collect()
}

#[test]
fn an_empty_secret_gets_a_ca_and_a_serving_certificate_it_signed() {
    let data = issued(START);
    for key in [CA_CERT, CA_KEY, TLS_CERT, TLS_KEY] {
        assert!(data.contains_key(key), "{key} written");
    }
    let ca = held(&data[CA_CERT].0, &data[CA_KEY].0).expect("the CA and its key");
    let leaf = held(&data[TLS_CERT].0, &data[TLS_KEY].0).expect("the leaf and its key");
    assert!(fits(&leaf, &ca, &settings().names));
    assert_eq!(leaf.not_after - leaf.not_before, 90 * DAY + 300);
    let parsed = leaf.parsed().expect("parses");
    assert!(!parsed.is_ca());
    assert!(ca.parsed().expect("parses").is_ca());
    assert!(text(&data, TLS_KEY).contains("PRIVATE KEY"));
}

#[test]
fn a_current_secret_is_left_alone_until_its_next_renewal() {
    let data = issued(START);
    let plan = plan(Some(&data), &settings(), START + 10 * DAY).expect("planned");
    assert_eq!(plan.data, None, "{:?}", plan.reasons);
    // The leaf's renewal, at two thirds of 90 days (from 300 s before START).
    assert_eq!(plan.next, START - 300 + (90 * DAY + 300) * 2 / 3);
}

#[test]
fn the_serving_certificate_is_renewed_at_two_thirds_under_the_same_ca() {
    let data = issued(START);
    let at = START + 61 * DAY;
    let plan = plan(Some(&data), &settings(), at).expect("planned");
    let new = plan.data.expect("renewed");
    assert_eq!(new[CA_CERT], data[CA_CERT], "the CA stays");
    assert_eq!(new[CA_KEY], data[CA_KEY]);
    assert_ne!(new[TLS_CERT], data[TLS_CERT]);
    let leaf = held(&new[TLS_CERT].0, &new[TLS_KEY].0).expect("a pair");
    assert_eq!(leaf.not_before, at - 300);
    assert_eq!(issued_at(leaf.not_before, leaf.not_after), at);
}

#[test]
fn a_new_ca_is_trusted_beside_the_old_one_until_the_old_one_expires() {
    // Serving certificates of 200 days: the one issued with the new CA is not due before the
    // old CA expires.
    let settings = || Settings {
        cert_validity: Duration::from_secs(200 * 86_400),
        ..settings()
    };
    let data = plan(None, &settings(), START)
        .expect("issued")
        .data
        .expect("data");
    let old_ca = cas(&data);
    let at = START + 244 * DAY;
    let renewed = plan(Some(&data), &settings(), at)
        .expect("planned")
        .data
        .expect("a new CA");
    let bundle = cas(&renewed);
    assert_eq!(bundle.len(), 2, "the new CA, then the old one");
    assert_eq!(bundle[1], old_ca[0]);
    let ca = held(&renewed[CA_CERT].0, &renewed[CA_KEY].0).expect("the new CA first");
    assert_eq!(ca.der, bundle[0]);
    let leaf = held(&renewed[TLS_CERT].0, &renewed[TLS_KEY].0).expect("a pair");
    assert!(
        fits(&leaf, &ca, &settings().names),
        "the leaf is the new CA's"
    );

    // The old CA expires at START + 365 days: dropped from the bundle then, not before.
    let before = plan(Some(&renewed), &settings(), START + 364 * DAY).expect("planned");
    assert_eq!(before.data, None, "{:?}", before.reasons);
    assert_eq!(
        before.next,
        START + 365 * DAY,
        "looked at again when the old CA expires"
    );
    let after = plan(Some(&renewed), &settings(), START + 365 * DAY + 1).expect("planned");
    let pruned = after.data.expect("the expired CA dropped");
    assert_eq!(cas(&pruned), vec![bundle[0].clone()]);
    assert_eq!(pruned[TLS_CERT], renewed[TLS_CERT], "the leaf stays");
}

#[test]
fn a_serving_certificate_never_outlives_its_ca() {
    let short = Settings {
        ca_validity: Duration::from_secs(30 * 86_400),
        ..settings()
    };
    let data = plan(None, &short, START)
        .expect("issued")
        .data
        .expect("data");
    let ca = held(&data[CA_CERT].0, &data[CA_KEY].0).expect("CA");
    let leaf = held(&data[TLS_CERT].0, &data[TLS_KEY].0).expect("leaf");
    assert_eq!(leaf.not_after, ca.not_after);
}

#[test]
fn other_names_or_a_foreign_pair_are_issued_again() {
    let data = issued(START);
    let renamed = Settings {
        names: vec!["other.ns.svc".to_string()],
        ..settings()
    };
    let plan_renamed = plan(Some(&data), &renamed, START + DAY).expect("planned");
    let new = plan_renamed.data.expect("a leaf for the new names");
    assert_eq!(new[CA_CERT], data[CA_CERT]);
    let ca = held(&new[CA_CERT].0, &new[CA_KEY].0).expect("CA");
    let leaf = held(&new[TLS_CERT].0, &new[TLS_KEY].0).expect("leaf");
    assert!(fits(&leaf, &ca, &renamed.names));

    // A pair some other CA signed (another Secret's), with this Secret's CA.
    let other = issued(START);
    let mut mixed = data.clone();
    mixed.insert(TLS_CERT.to_string(), other[TLS_CERT].clone());
    mixed.insert(TLS_KEY.to_string(), other[TLS_KEY].clone());
    let fixed = plan(Some(&mixed), &settings(), START + DAY)
        .expect("planned")
        .data
        .expect("a leaf of this CA");
    assert_ne!(fixed[TLS_CERT], other[TLS_CERT]);

    // A key that is not the certificate's.
    let mut swapped = data.clone();
    swapped.insert(TLS_KEY.to_string(), other[TLS_KEY].clone());
    assert!(
        plan(Some(&swapped), &settings(), START + DAY)
            .expect("planned")
            .data
            .is_some()
    );
}

#[test]
fn garbage_in_the_secret_is_replaced_and_other_keys_kept() {
    let mut data = BTreeMap::new();
    data.insert(CA_CERT.to_string(), ByteString(b"not PEM".to_vec()));
    data.insert(TLS_KEY.to_string(), ByteString(b"-----BEGIN".to_vec()));
    data.insert("note".to_string(), ByteString(b"kept".to_vec()));
    let plan = plan(Some(&data), &settings(), START).expect("planned");
    let new = plan.data.expect("issued");
    assert_eq!(new["note"].0, b"kept");
    assert_eq!(cas(&new).len(), 1);
    assert!(held(&new[TLS_CERT].0, &new[TLS_KEY].0).is_some());
    assert!(
        plan.reasons.iter().any(|r| r.contains("issued a CA")),
        "{:?}",
        plan.reasons
    );
}

#[test]
fn a_valid_serving_certificate_outlives_a_ca_change_by_the_trust_delay() {
    let data = issued(START);
    // Renewed at 61 days under the first CA: valid until 151 days.
    let renewed = plan(Some(&data), &settings(), START + 61 * DAY)
        .expect("planned")
        .data
        .expect("renewed");
    let at = START + 244 * DAY;
    let changed = plan(Some(&renewed), &settings(), at).expect("planned");
    // The leaf from 61 days expired at 151: issued under the new CA at once.
    assert!(changed.data.expect("a new CA")[TLS_CERT] != renewed[TLS_CERT]);

    // A leaf renewed at 200 days (valid until 290) under the first CA.
    let late = plan(Some(&renewed), &settings(), START + 200 * DAY)
        .expect("planned")
        .data
        .expect("renewed at 200 days");
    let with_new_ca = plan(Some(&late), &settings(), at).expect("planned");
    assert_eq!(
        with_new_ca.next,
        at + TRUST_DELAY,
        "{:?}",
        with_new_ca.reasons
    );
    let new = with_new_ca.data.expect("a new CA");
    assert_eq!(
        new[TLS_CERT], late[TLS_CERT],
        "the old CA's leaf is kept for now"
    );
    assert_eq!(cas(&new).len(), 2);
    let waiting = plan(Some(&new), &settings(), at + TRUST_DELAY - 1).expect("planned");
    assert_eq!(waiting.data, None, "{:?}", waiting.reasons);
    let replaced = plan(Some(&new), &settings(), at + TRUST_DELAY)
        .expect("planned")
        .data
        .expect("the new CA's leaf");
    let ca = held(&replaced[CA_CERT].0, &replaced[CA_KEY].0).expect("CA");
    let leaf = held(&replaced[TLS_CERT].0, &replaced[TLS_KEY].0).expect("leaf");
    assert!(fits(&leaf, &ca, &settings().names));
    assert_eq!(
        cas(&replaced).len(),
        2,
        "the old CA stays trusted until it expires"
    );
}

#[test]
fn short_validities_are_renewed_after_now() {
    let short = Settings {
        ca_validity: Duration::from_secs(120),
        cert_validity: Duration::from_secs(60),
        ..settings()
    };
    let data = plan(None, &short, START)
        .expect("issued")
        .data
        .expect("data");
    let again = plan(Some(&data), &short, START).expect("planned");
    assert_eq!(again.data, None, "{:?}", again.reasons);
    assert!(
        again.next > START + 30,
        "next look at {}",
        again.next - START
    );
}
