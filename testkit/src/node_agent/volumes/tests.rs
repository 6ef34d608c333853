//! Tests the pod volumes: every source kind, the atomic layout, updates by the `..data`
//! swap, and mount points removed with the pod.

use super::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    ProjectedVolumeSource, SecretVolumeSource, ServiceAccountTokenProjection, VolumeProjection,
};

fn secret_volume() -> Volume {
    Volume {
        name: "certs".into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some("tls".into()),
            default_mode: Some(0o600),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

#[test]
fn a_secret_volume_holds_every_key_with_the_default_mode() {
    let mut sources = VolumeSources::default();
    sources.secrets.insert(
        "tls".into(),
        Secret {
            data: Some(BTreeMap::from([(
                "tls.crt".into(),
                ByteString(b"C".to_vec()),
            )])),
            ..Secret::default()
        },
    );
    let files = payload(&Pod::default(), &secret_volume(), &sources)
        .unwrap()
        .unwrap();
    assert_eq!(files["tls.crt"].data, b"C");
    assert_eq!(files["tls.crt"].mode, 0o600);
}

#[test]
fn a_missing_secret_is_an_error_naming_the_volume_and_secret() {
    let error = payload(&Pod::default(), &secret_volume(), &VolumeSources::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "volume \"certs\": secret \"tls\" not found"
    );
}

#[test]
fn a_projected_token_is_written_at_its_path() {
    let volume = Volume {
        name: "kube-api-access".into(),
        projected: Some(ProjectedVolumeSource {
            sources: Some(vec![VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    path: "token".into(),
                    expiration_seconds: Some(3607),
                    audience: None,
                }),
                ..VolumeProjection::default()
            }]),
            default_mode: None,
        }),
        ..Volume::default()
    };
    let mut sources = VolumeSources::default();
    let now = jiff::Timestamp::now();
    sources.tokens.insert(
        (String::new(), 3607),
        Token {
            token: "T".into(),
            issued: now,
            expires: now,
        },
    );
    let files = payload(&Pod::default(), &volume, &sources)
        .unwrap()
        .unwrap();
    assert_eq!(files["token"].data, b"T");
    assert_eq!(files["token"].mode, 0o644);
}

#[test]
fn a_token_is_renewed_past_eighty_percent_of_its_lifetime() {
    let issued = jiff::Timestamp::from_second(1_000_000).unwrap();
    let token = Token {
        token: String::new(),
        issued,
        expires: jiff::Timestamp::from_second(1_000_100).unwrap(),
    };
    assert!(!token.needs_renewal(jiff::Timestamp::from_second(1_000_079).unwrap()));
    assert!(token.needs_renewal(jiff::Timestamp::from_second(1_000_080).unwrap()));
}
