//! Reads what the cluster asks for: turns the `spec` of OpenShift's
//! `apiservers.config.openshift.io/cluster` into the cipher names and minimum TLS version its
//! TLS security profile stands for, with OpenShift's own tables for Old, Intermediate and Modern.
//!
//! The tables are copied from `TLSProfiles` in openshift/api's
//! `config/v1/types_tlssecurityprofile.go` (Mozilla's Server Side TLS 5.0, with the TLS 1.3
//! ciphers added), in OpenShift's order and with OpenSSL's spelling. This module is pure: it
//! knows nothing of rustls (`ciphers` maps the names) nor of the API server (`watch` reads the
//! object).

use serde::Deserialize;

/// The resource the profile lives in: group, version and plural.
pub const APISERVER_GROUP: &str = "config.openshift.io";
/// The version of [`APISERVER_GROUP`] that serves `apiservers`.
pub const APISERVER_VERSION: &str = "v1";
/// The plural of the resource.
pub const APISERVER_PLURAL: &str = "apiservers";
/// Its kind.
pub const APISERVER_KIND: &str = "APIServer";
/// The one object of the resource that holds the cluster's settings.
pub const APISERVER_NAME: &str = "cluster";

/// The part of `APIServer.spec` this operator reads. Unknown fields are ignored.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApiServerSpec {
    /// `spec.tlsSecurityProfile`; absent means OpenShift's default, Intermediate.
    #[serde(default)]
    pub tls_security_profile: Option<TlsSecurityProfile>,
    /// `spec.tlsAdherence`, on clusters whose API has it.
    #[serde(default)]
    pub tls_adherence: Option<String>,
}

/// `spec.tlsSecurityProfile`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct TlsSecurityProfile {
    /// `Old`, `Intermediate`, `Modern` or `Custom`; empty means the default.
    #[serde(default, rename = "type")]
    pub kind: String,
    /// The settings of a `Custom` profile.
    #[serde(default)]
    pub custom: Option<CustomProfile>,
}

/// `spec.tlsSecurityProfile.custom`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CustomProfile {
    /// Cipher names, OpenSSL's spelling.
    #[serde(default)]
    pub ciphers: Vec<String>,
    /// `VersionTLS10` … `VersionTLS13`.
    #[serde(default, rename = "minTLSVersion")]
    pub min_tls_version: Option<String>,
}

/// A TLS protocol version a profile may name as its minimum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// `VersionTLS10`.
    Tls10,
    /// `VersionTLS11`.
    Tls11,
    /// `VersionTLS12`.
    Tls12,
    /// `VersionTLS13`.
    Tls13,
}

impl TlsVersion {
    /// The version OpenShift spells `name` (`VersionTLS12`), if any.
    pub fn from_api(name: &str) -> Option<TlsVersion> {
        match name {
            "VersionTLS10" => Some(TlsVersion::Tls10),
            "VersionTLS11" => Some(TlsVersion::Tls11),
            "VersionTLS12" => Some(TlsVersion::Tls12),
            "VersionTLS13" => Some(TlsVersion::Tls13),
            _ => None,
        }
    }

    /// Its name in logs: `TLS 1.2`.
    pub fn label(self) -> &'static str {
        match self {
            TlsVersion::Tls10 => "TLS 1.0",
            TlsVersion::Tls11 => "TLS 1.1",
            TlsVersion::Tls12 => "TLS 1.2",
            TlsVersion::Tls13 => "TLS 1.3",
        }
    }
}

/// How strictly the cluster asks components to follow the profile (`spec.tlsAdherence`).
///
/// OpenShift: empty and `LegacyAdheringComponentsOnly` bind the components that already
/// followed the profile; `StrictAllComponents` binds every component; a value a component
/// does not know is to be treated as `StrictAllComponents`. This operator follows the profile
/// whatever the value (it is one of the components that already did), so the value changes
/// only what is logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Adherence {
    /// Absent or empty: no opinion (OpenShift treats it as `LegacyAdheringComponentsOnly`).
    NoOpinion,
    /// `LegacyAdheringComponentsOnly`.
    LegacyAdheringComponentsOnly,
    /// `StrictAllComponents`.
    StrictAllComponents,
    /// Any other value: treated as `StrictAllComponents`.
    Unknown(String),
}

impl Adherence {
    /// The adherence `spec.tlsAdherence` holds.
    pub fn from_api(value: Option<&str>) -> Adherence {
        match value.unwrap_or_default() {
            "" => Adherence::NoOpinion,
            "LegacyAdheringComponentsOnly" => Adherence::LegacyAdheringComponentsOnly,
            "StrictAllComponents" => Adherence::StrictAllComponents,
            other => Adherence::Unknown(other.to_string()),
        }
    }

    /// Its name in logs (the API's spelling; `""` for no opinion).
    pub fn label(&self) -> &str {
        match self {
            Adherence::NoOpinion => "",
            Adherence::LegacyAdheringComponentsOnly => "LegacyAdheringComponentsOnly",
            Adherence::StrictAllComponents => "StrictAllComponents",
            Adherence::Unknown(value) => value,
        }
    }
}

/// What a profile asks for, before rustls has its say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requested {
    /// The profile's name: `Old`, `Intermediate`, `Modern` or `Custom`.
    pub profile: &'static str,
    /// The cipher names, OpenSSL's spelling, in the profile's order.
    pub ciphers: Vec<String>,
    /// The lowest TLS version the profile allows.
    pub min_version: TlsVersion,
    /// `spec.tlsAdherence`.
    pub adherence: Adherence,
}

/// Why a profile cannot be read; the previous TLS settings stay.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// The profile's type is none OpenShift defines.
    #[error(
        "spec.tlsSecurityProfile.type: {0:?} is not a profile (Old, Intermediate, Modern, Custom)"
    )]
    UnknownType(String),
    /// A `Custom` profile without its settings.
    #[error("spec.tlsSecurityProfile.custom: missing, and the type is Custom")]
    CustomWithoutSettings,
    /// A minimum version OpenShift does not define.
    #[error(
        "spec.tlsSecurityProfile.custom.minTLSVersion: {0:?} is not a TLS version \
         (VersionTLS10 … VersionTLS13)"
    )]
    UnknownVersion(String),
}

/// OpenShift's `Old` profile: `TLSProfiles[TLSProfileOldType]`.
pub const OLD_CIPHERS: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
    "DHE-RSA-AES128-GCM-SHA256",
    "DHE-RSA-AES256-GCM-SHA384",
    "DHE-RSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-SHA256",
    "ECDHE-RSA-AES128-SHA256",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA384",
    "ECDHE-RSA-AES256-SHA384",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "DHE-RSA-AES128-SHA256",
    "DHE-RSA-AES256-SHA256",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA256",
    "AES256-SHA256",
    "AES128-SHA",
    "AES256-SHA",
    "DES-CBC3-SHA",
];

/// OpenShift's `Intermediate` profile, the default: `TLSProfiles[TLSProfileIntermediateType]`.
pub const INTERMEDIATE_CIPHERS: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
    "DHE-RSA-AES128-GCM-SHA256",
    "DHE-RSA-AES256-GCM-SHA384",
];

/// OpenShift's `Modern` profile: `TLSProfiles[TLSProfileModernType]`.
pub const MODERN_CIPHERS: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

fn predefined(
    profile: &'static str,
    ciphers: &[&str],
    min_version: TlsVersion,
    adherence: Adherence,
) -> Requested {
    Requested {
        profile,
        ciphers: ciphers.iter().map(|c| c.to_string()).collect(),
        min_version,
        adherence,
    }
}

/// The profile used where the cluster has no opinion, or no `APIServer` API: Intermediate.
pub fn default_profile() -> Requested {
    predefined(
        "Intermediate",
        INTERMEDIATE_CIPHERS,
        TlsVersion::Tls12,
        Adherence::NoOpinion,
    )
}

/// What `spec` asks for; `None` (no `cluster` object) asks for the default.
pub fn requested(spec: Option<&ApiServerSpec>) -> Result<Requested, ProfileError> {
    let adherence = Adherence::from_api(spec.and_then(|s| s.tls_adherence.as_deref()));
    let Some(profile) = spec.and_then(|s| s.tls_security_profile.as_ref()) else {
        return Ok(Requested {
            adherence,
            ..default_profile()
        });
    };
    match profile.kind.as_str() {
        "" | "Intermediate" => Ok(predefined(
            "Intermediate",
            INTERMEDIATE_CIPHERS,
            TlsVersion::Tls12,
            adherence,
        )),
        "Old" => Ok(predefined("Old", OLD_CIPHERS, TlsVersion::Tls10, adherence)),
        "Modern" => Ok(predefined(
            "Modern",
            MODERN_CIPHERS,
            TlsVersion::Tls13,
            adherence,
        )),
        "Custom" => {
            let custom = profile
                .custom
                .as_ref()
                .ok_or(ProfileError::CustomWithoutSettings)?;
            // Without a minimum, the lowest version rustls speaks: nothing weaker is possible.
            let min_version = match custom.min_tls_version.as_deref() {
                None | Some("") => TlsVersion::Tls12,
                Some(name) => TlsVersion::from_api(name)
                    .ok_or_else(|| ProfileError::UnknownVersion(name.to_string()))?,
            };
            Ok(Requested {
                profile: "Custom",
                ciphers: custom.ciphers.clone(),
                min_version,
                adherence,
            })
        }
        other => Err(ProfileError::UnknownType(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(value: serde_json::Value) -> ApiServerSpec {
        serde_json::from_value(value).expect("an APIServer spec")
    }

    #[test]
    fn no_cluster_object_and_no_profile_both_ask_for_intermediate() {
        assert_eq!(requested(None), Ok(default_profile()));
        let empty = spec(json!({}));
        assert_eq!(requested(Some(&empty)), Ok(default_profile()));
        let untyped = spec(json!({"tlsSecurityProfile": {}}));
        assert_eq!(requested(Some(&untyped)), Ok(default_profile()));
    }

    #[test]
    fn each_predefined_profile_has_openshifts_ciphers_and_minimum() {
        let cases = [
            ("Old", OLD_CIPHERS, TlsVersion::Tls10, 29),
            ("Intermediate", INTERMEDIATE_CIPHERS, TlsVersion::Tls12, 11),
            ("Modern", MODERN_CIPHERS, TlsVersion::Tls13, 3),
        ];
        for (kind, ciphers, min_version, count) in cases {
            let spec = spec(json!({"tlsSecurityProfile": {"type": kind}}));
            let got = requested(Some(&spec)).expect("a profile");
            assert_eq!(got.profile, kind);
            assert_eq!(got.ciphers, ciphers, "{kind}");
            assert_eq!(got.ciphers.len(), count, "{kind}");
            assert_eq!(got.min_version, min_version, "{kind}");
        }
    }

    #[test]
    fn a_custom_profile_is_taken_as_written() {
        let spec = spec(json!({"tlsSecurityProfile": {"type": "Custom", "custom": {
            "ciphers": ["ECDHE-RSA-AES128-GCM-SHA256", "NOT-A-CIPHER"],
            "minTLSVersion": "VersionTLS11",
        }}}));
        let got = requested(Some(&spec)).expect("a profile");
        assert_eq!(got.profile, "Custom");
        assert_eq!(got.ciphers, ["ECDHE-RSA-AES128-GCM-SHA256", "NOT-A-CIPHER"]);
        assert_eq!(got.min_version, TlsVersion::Tls11);
    }

    #[test]
    fn a_custom_profile_without_a_minimum_starts_at_tls_1_2() {
        let spec = spec(json!({"tlsSecurityProfile": {"type": "Custom", "custom": {
            "ciphers": ["ECDHE-RSA-AES128-GCM-SHA256"],
        }}}));
        assert_eq!(
            requested(Some(&spec)).map(|r| r.min_version),
            Ok(TlsVersion::Tls12)
        );
    }

    #[test]
    fn profiles_that_cannot_be_read_are_errors_naming_the_field() {
        let unknown = spec(json!({"tlsSecurityProfile": {"type": "Paranoid"}}));
        let error = requested(Some(&unknown)).expect_err("unknown type");
        assert_eq!(error, ProfileError::UnknownType("Paranoid".into()));
        assert!(
            error
                .to_string()
                .starts_with("spec.tlsSecurityProfile.type")
        );
        let bare = spec(json!({"tlsSecurityProfile": {"type": "Custom"}}));
        assert_eq!(
            requested(Some(&bare)),
            Err(ProfileError::CustomWithoutSettings)
        );
        let version = spec(json!({"tlsSecurityProfile": {"type": "Custom", "custom": {
            "ciphers": [], "minTLSVersion": "VersionTLS14",
        }}}));
        assert_eq!(
            requested(Some(&version)),
            Err(ProfileError::UnknownVersion("VersionTLS14".into()))
        );
    }

    #[test]
    fn adherence_follows_openshifts_values_and_keeps_unknown_ones() {
        assert_eq!(Adherence::from_api(None), Adherence::NoOpinion);
        assert_eq!(Adherence::from_api(Some("")), Adherence::NoOpinion);
        assert_eq!(
            Adherence::from_api(Some("LegacyAdheringComponentsOnly")),
            Adherence::LegacyAdheringComponentsOnly
        );
        assert_eq!(
            Adherence::from_api(Some("StrictAllComponents")),
            Adherence::StrictAllComponents
        );
        assert_eq!(
            Adherence::from_api(Some("Stricter")),
            Adherence::Unknown("Stricter".into())
        );
        let spec = spec(json!({"tlsAdherence": "StrictAllComponents",
            "tlsSecurityProfile": {"type": "Modern"}}));
        assert_eq!(
            requested(Some(&spec)).map(|r| r.adherence),
            Ok(Adherence::StrictAllComponents)
        );
    }
}
