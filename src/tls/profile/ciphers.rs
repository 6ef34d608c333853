//! Settles a requested profile against what rustls can do: maps OpenSSL cipher names (as
//! OpenShift spells them) to rustls cipher suites, raises a minimum below TLS 1.2 to TLS 1.2,
//! and lists every way the result differs from the request, each with its reason.
//!
//! Nothing is ever weakened: a cipher rustls lacks is left out, never replaced, and a version
//! rustls does not speak (TLS 1.0, 1.1) gives way to the nearest stronger one it does. One
//! addition is made, as OpenShift's Go components make it: a profile that names no TLS 1.3
//! cipher (`TLS_…`) gets TLS 1.3 with all its suites, which Go offers whatever the list says
//! and newer OpenShift releases forbid listing. A request that leaves no suite at all is an
//! error. Pure: the caller logs the adjustments and applies the settings.

use rustls::{CipherSuite, SupportedCipherSuite};

use super::profiles::{Requested, TlsVersion};
use super::settings::TlsSettings;

/// The rustls suite for each OpenSSL cipher name rustls (with ring) implements.
const OPENSSL_NAMES: &[(&str, CipherSuite)] = &[
    (
        "TLS_AES_128_GCM_SHA256",
        CipherSuite::TLS13_AES_128_GCM_SHA256,
    ),
    (
        "TLS_AES_256_GCM_SHA384",
        CipherSuite::TLS13_AES_256_GCM_SHA384,
    ),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// The rustls suite OpenSSL calls `name`, if rustls implements it.
pub fn suite_for(name: &str) -> Option<CipherSuite> {
    OPENSSL_NAMES
        .iter()
        .find(|(openssl, _)| *openssl == name)
        .map(|(_, suite)| *suite)
}

/// The OpenSSL name of `suite`, if it has one here.
fn suite_name_of(suite: &SupportedCipherSuite) -> Option<&'static str> {
    OPENSSL_NAMES
        .iter()
        .find(|(_, known)| *known == suite.suite())
        .map(|(name, _)| *name)
}

/// Why rustls offers no suite for the OpenSSL cipher `name`.
pub fn why_not(name: &str) -> &'static str {
    let aead = name.contains("GCM") || name.contains("CHACHA20");
    if name.starts_with("TLS_") {
        "a TLS 1.3 cipher rustls does not implement"
    } else if name.starts_with("DHE-") || name.starts_with("EDH-") {
        "finite-field Diffie-Hellman (DHE) key exchange: rustls implements ECDHE only"
    } else if !aead
        && ["-SHA", "-SHA256", "-SHA384"]
            .iter()
            .any(|s| name.ends_with(s))
    {
        "CBC mode: rustls implements AEAD ciphers (AES-GCM, ChaCha20-Poly1305) only"
    } else if aead && !name.starts_with("ECDHE-") {
        "key exchange without ECDHE (no forward secrecy): rustls implements ECDHE only"
    } else {
        "no OpenSSL cipher of this name has a rustls suite"
    }
}

/// One way the settings differ from what the profile asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Adjustment {
    /// A cipher the profile names is not offered.
    CipherNotOffered {
        /// Its OpenSSL name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// The profile's minimum version is one rustls never speaks; a stronger one is served.
    MinimumRaised {
        /// The profile's minimum.
        asked: TlsVersion,
        /// The minimum served.
        served: TlsVersion,
    },
    /// The profile allows TLS 1.2 but names no TLS 1.2 cipher rustls has: TLS 1.3 only.
    NoTls12Cipher,
    /// The profile names no TLS 1.3 cipher: TLS 1.3 is offered with all its suites.
    Tls13WithAllSuites,
}

impl Adjustment {
    /// Whether the profile asked for something it does not get (as opposed to a note).
    pub fn is_shortfall(&self) -> bool {
        !matches!(self, Adjustment::Tls13WithAllSuites)
    }

    /// What happened, in a sentence for the log.
    pub fn message(&self) -> String {
        match self {
            Adjustment::CipherNotOffered { name, reason } => {
                format!("TLS profile: cipher {name} is not offered: {reason}")
            }
            Adjustment::MinimumRaised { asked, served } => format!(
                "TLS profile: minimum {} cannot be met, rustls never speaks it; serving {} \
                 and above, the nearest stronger setting",
                asked.label(),
                served.label()
            ),
            Adjustment::NoTls12Cipher => "TLS profile: no TLS 1.2 cipher it names is one rustls \
                 offers; TLS 1.2 is not served, TLS 1.3 only"
                .to_string(),
            Adjustment::Tls13WithAllSuites => "TLS profile: names no TLS 1.3 cipher; TLS 1.3 is \
                 served with all its suites, as OpenShift's own components do"
                .to_string(),
        }
    }
}

/// Why a profile cannot be served at all; the previous settings stay.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "TLS profile {profile}: no cipher it names is one rustls offers at {min} or above \
     ({ciphers:?}); keeping the previous TLS settings"
)]
pub struct NoUsableSuite {
    /// The profile's name.
    pub profile: &'static str,
    /// Its ciphers.
    pub ciphers: Vec<String>,
    /// Its minimum, as served.
    pub min: &'static str,
}

/// The settings `requested` comes to with the suites in `available` (the provider's), and
/// how they differ from the request.
pub fn settle(
    requested: &Requested,
    available: &[SupportedCipherSuite],
) -> Result<(TlsSettings, Vec<Adjustment>), NoUsableSuite> {
    let mut adjustments = Vec::new();
    let min = requested.min_version.max(TlsVersion::Tls12);
    if min != requested.min_version {
        adjustments.push(Adjustment::MinimumRaised {
            asked: requested.min_version,
            served: min,
        });
    }
    let mut tls13 = Vec::new();
    let mut tls12 = Vec::new();
    for (index, name) in requested.ciphers.iter().enumerate() {
        if requested.ciphers[..index].contains(name) {
            continue;
        }
        let offered = suite_for(name).and_then(|wanted| {
            available
                .iter()
                .find(|suite| suite.suite() == wanted)
                .copied()
        });
        match offered {
            Some(suite @ SupportedCipherSuite::Tls13(_)) => tls13.push(suite),
            Some(suite @ SupportedCipherSuite::Tls12(_)) if min <= TlsVersion::Tls12 => {
                tls12.push(suite)
            }
            Some(SupportedCipherSuite::Tls12(_)) => {
                adjustments.push(Adjustment::CipherNotOffered {
                    name: name.clone(),
                    reason: "a TLS 1.2 cipher, and the profile's minimum is TLS 1.3",
                })
            }
            None if suite_for(name).is_some() => adjustments.push(Adjustment::CipherNotOffered {
                name: name.clone(),
                reason: "not in this rustls crypto provider",
            }),
            None => adjustments.push(Adjustment::CipherNotOffered {
                name: name.clone(),
                reason: why_not(name),
            }),
        }
    }
    if !requested
        .ciphers
        .iter()
        .any(|name| name.starts_with("TLS_"))
    {
        // In OpenShift's order (its profiles' TLS 1.3 names), then any others the provider has.
        let known = OPENSSL_NAMES
            .iter()
            .filter_map(|(_, wanted)| available.iter().find(|s| s.suite() == *wanted));
        let others = available.iter().filter(|s| suite_name_of(s).is_none());
        tls13 = known
            .chain(others)
            .filter(|suite| matches!(suite, SupportedCipherSuite::Tls13(_)))
            .copied()
            .collect();
        adjustments.push(Adjustment::Tls13WithAllSuites);
    }
    if min <= TlsVersion::Tls12 && tls12.is_empty() && !tls13.is_empty() {
        adjustments.push(Adjustment::NoTls12Cipher);
    }
    let mut versions = Vec::new();
    if !tls13.is_empty() {
        versions.push(&rustls::version::TLS13);
    }
    if !tls12.is_empty() {
        versions.push(&rustls::version::TLS12);
    }
    if versions.is_empty() {
        return Err(NoUsableSuite {
            profile: requested.profile,
            ciphers: requested.ciphers.clone(),
            min: min.label(),
        });
    }
    let settings = TlsSettings {
        profile: requested.profile,
        versions,
        suites: tls13.into_iter().chain(tls12).collect(),
    };
    Ok((settings, adjustments))
}

impl TlsSettings {
    /// Intermediate, as rustls with ring serves it: the settings where the cluster has no
    /// opinion or no `APIServer` API.
    pub fn intermediate() -> TlsSettings {
        settle(
            &super::profiles::default_profile(),
            rustls::crypto::ring::ALL_CIPHER_SUITES,
        )
        .map(|(settings, _)| settings)
        // Unreachable: ring implements all of Intermediate's TLS 1.3 suites. Should it not,
        // TLS 1.2 and 1.3 with all of ring's suites is what rustls serves by default.
        .unwrap_or_else(|_| TlsSettings {
            profile: "Intermediate",
            versions: vec![&rustls::version::TLS13, &rustls::version::TLS12],
            suites: rustls::crypto::ring::ALL_CIPHER_SUITES.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use rustls::crypto::ring;

    use super::*;
    use crate::tls::profile::profiles::{
        Adherence, INTERMEDIATE_CIPHERS, MODERN_CIPHERS, OLD_CIPHERS, default_profile,
    };

    fn request(profile: &'static str, ciphers: &[&str], min_version: TlsVersion) -> Requested {
        Requested {
            profile,
            ciphers: ciphers.iter().map(|c| c.to_string()).collect(),
            min_version,
            adherence: Adherence::NoOpinion,
        }
    }

    fn settle_ring(requested: &Requested) -> Result<(TlsSettings, Vec<Adjustment>), NoUsableSuite> {
        settle(requested, ring::ALL_CIPHER_SUITES)
    }

    fn not_offered(adjustments: &[Adjustment]) -> Vec<&str> {
        adjustments
            .iter()
            .filter_map(|a| match a {
                Adjustment::CipherNotOffered { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect()
    }

    const TLS13_SUITES: [&str; 3] = [
        "TLS13_AES_128_GCM_SHA256",
        "TLS13_AES_256_GCM_SHA384",
        "TLS13_CHACHA20_POLY1305_SHA256",
    ];

    const ECDHE_GCM_AND_CHACHA: [&str; 6] = [
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    ];

    #[test]
    fn every_name_in_the_table_is_a_suite_ring_offers() {
        for (name, suite) in OPENSSL_NAMES {
            assert!(
                ring::ALL_CIPHER_SUITES.iter().any(|s| s.suite() == *suite),
                "{name}"
            );
        }
        assert_eq!(OPENSSL_NAMES.len(), ring::ALL_CIPHER_SUITES.len());
    }

    #[test]
    fn intermediate_is_tls_1_2_and_1_3_without_the_two_dhe_ciphers() {
        let (settings, adjustments) = settle_ring(&default_profile()).expect("settles");
        assert_eq!(settings.profile, "Intermediate");
        assert_eq!(settings.version_labels(), ["TLS 1.3", "TLS 1.2"]);
        let expected: Vec<&str> = TLS13_SUITES
            .iter()
            .chain(ECDHE_GCM_AND_CHACHA.iter())
            .copied()
            .collect();
        assert_eq!(settings.suite_names(), expected);
        assert_eq!(
            not_offered(&adjustments),
            ["DHE-RSA-AES128-GCM-SHA256", "DHE-RSA-AES256-GCM-SHA384"]
        );
        assert_eq!(adjustments.len(), 2, "{adjustments:?}");
        assert!(adjustments[0].message().contains("Diffie-Hellman"));
        assert_eq!(INTERMEDIATE_CIPHERS.len(), 11);
    }

    #[test]
    fn modern_is_tls_1_3_only_with_its_three_suites() {
        let requested = request("Modern", MODERN_CIPHERS, TlsVersion::Tls13);
        let (settings, adjustments) = settle_ring(&requested).expect("settles");
        assert_eq!(settings.version_labels(), ["TLS 1.3"]);
        assert_eq!(settings.suite_names(), TLS13_SUITES);
        assert_eq!(adjustments, []);
    }

    #[test]
    fn old_asks_for_tls_1_0_and_gets_tls_1_2_said_once_with_each_missing_cipher() {
        let requested = request("Old", OLD_CIPHERS, TlsVersion::Tls10);
        let (settings, adjustments) = settle_ring(&requested).expect("settles");
        assert_eq!(settings.version_labels(), ["TLS 1.3", "TLS 1.2"]);
        assert_eq!(settings.suites.len(), 9);
        assert_eq!(
            adjustments[0],
            Adjustment::MinimumRaised {
                asked: TlsVersion::Tls10,
                served: TlsVersion::Tls12
            }
        );
        assert_eq!(
            adjustments[0].message(),
            "TLS profile: minimum TLS 1.0 cannot be met, rustls never speaks it; serving \
             TLS 1.2 and above, the nearest stronger setting"
        );
        let missing = not_offered(&adjustments);
        assert_eq!(missing.len(), 29 - 9, "{missing:?}");
        assert_eq!(adjustments.len(), 1 + 20);
        let reason = |name: &str| {
            adjustments
                .iter()
                .find_map(|a| match a {
                    Adjustment::CipherNotOffered { name: n, reason } if n == name => Some(*reason),
                    _ => None,
                })
                .unwrap_or_default()
        };
        assert!(reason("DHE-RSA-CHACHA20-POLY1305").contains("DHE"));
        assert!(reason("ECDHE-RSA-AES128-SHA").contains("CBC"));
        assert!(reason("ECDHE-ECDSA-AES256-SHA384").contains("CBC"));
        assert!(reason("AES128-GCM-SHA256").contains("without ECDHE"));
        assert!(reason("AES256-SHA").contains("CBC"));
        assert!(reason("DES-CBC3-SHA").contains("CBC"));
    }

    #[test]
    fn custom_serves_only_the_listed_suites_in_its_order() {
        let requested = request(
            "Custom",
            &[
                "ECDHE-ECDSA-AES256-GCM-SHA384",
                "TLS_CHACHA20_POLY1305_SHA256",
            ],
            TlsVersion::Tls12,
        );
        let (settings, adjustments) = settle_ring(&requested).expect("settles");
        assert_eq!(
            settings.suite_names(),
            [
                "TLS13_CHACHA20_POLY1305_SHA256",
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
            ]
        );
        assert_eq!(settings.version_labels(), ["TLS 1.3", "TLS 1.2"]);
        assert_eq!(adjustments, []);
    }

    #[test]
    fn a_custom_list_without_tls_1_3_names_gets_tls_1_3_with_all_its_suites() {
        let requested = request(
            "Custom",
            &["ECDHE-RSA-AES128-GCM-SHA256"],
            TlsVersion::Tls11,
        );
        let (settings, adjustments) = settle_ring(&requested).expect("settles");
        let mut expected = TLS13_SUITES.to_vec();
        expected.push("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256");
        assert_eq!(settings.suite_names(), expected);
        assert_eq!(
            adjustments,
            [
                Adjustment::MinimumRaised {
                    asked: TlsVersion::Tls11,
                    served: TlsVersion::Tls12
                },
                Adjustment::Tls13WithAllSuites
            ]
        );
        assert!(!Adjustment::Tls13WithAllSuites.is_shortfall());
        // OpenShift's newer form of "TLS 1.3 only": a TLS 1.3 minimum and no ciphers.
        let tls13_only = request("Custom", &[], TlsVersion::Tls13);
        let (settings, _) = settle_ring(&tls13_only).expect("settles");
        assert_eq!(settings.suite_names(), TLS13_SUITES);
        assert_eq!(settings.version_labels(), ["TLS 1.3"]);
    }

    #[test]
    fn unknown_ciphers_are_named_and_left_out() {
        let requested = request(
            "Custom",
            &[
                "TLS_AES_128_GCM_SHA256",
                "NOT-A-CIPHER",
                "TLS_AES_128_CCM_SHA256",
                "ECDHE-RSA-AES128-GCM-SHA256",
                "ECDHE-RSA-AES128-GCM-SHA256",
            ],
            TlsVersion::Tls12,
        );
        let (settings, adjustments) = settle_ring(&requested).expect("settles");
        assert_eq!(
            settings.suite_names(),
            [
                "TLS13_AES_128_GCM_SHA256",
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
            ]
        );
        assert_eq!(
            adjustments,
            [
                Adjustment::CipherNotOffered {
                    name: "NOT-A-CIPHER".into(),
                    reason: "no OpenSSL cipher of this name has a rustls suite"
                },
                Adjustment::CipherNotOffered {
                    name: "TLS_AES_128_CCM_SHA256".into(),
                    reason: "a TLS 1.3 cipher rustls does not implement"
                },
            ]
        );
    }

    #[test]
    fn tls_1_2_ciphers_under_a_tls_1_3_minimum_are_not_offered() {
        let requested = request(
            "Custom",
            &["TLS_AES_256_GCM_SHA384", "ECDHE-RSA-AES128-GCM-SHA256"],
            TlsVersion::Tls13,
        );
        let (settings, adjustments) = settle_ring(&requested).expect("settles");
        assert_eq!(settings.suite_names(), ["TLS13_AES_256_GCM_SHA384"]);
        assert_eq!(settings.version_labels(), ["TLS 1.3"]);
        assert_eq!(not_offered(&adjustments), ["ECDHE-RSA-AES128-GCM-SHA256"]);
    }

    #[test]
    fn a_tls_1_2_list_of_ciphers_rustls_lacks_leaves_tls_1_3_only_and_says_so() {
        let requested = request(
            "Custom",
            &["TLS_AES_128_GCM_SHA256", "DHE-RSA-AES128-GCM-SHA256"],
            TlsVersion::Tls12,
        );
        let (settings, adjustments) = settle_ring(&requested).expect("settles");
        assert_eq!(settings.version_labels(), ["TLS 1.3"]);
        assert!(
            adjustments.contains(&Adjustment::NoTls12Cipher),
            "{adjustments:?}"
        );
    }

    #[test]
    fn a_profile_leaving_no_suite_is_an_error() {
        let requested = request(
            "Custom",
            &["TLS_AES_128_CCM_SHA256", "DHE-RSA-AES128-GCM-SHA256"],
            TlsVersion::Tls12,
        );
        let error = settle_ring(&requested).expect_err("no suite");
        assert_eq!(error.profile, "Custom");
        assert!(
            error
                .to_string()
                .contains("keeping the previous TLS settings"),
            "{error}"
        );
        let tls13 = request("Custom", &["TLS_AES_128_CCM_8_SHA256"], TlsVersion::Tls13);
        assert!(settle_ring(&tls13).is_err());
        // A provider without the named suites is as good as none.
        let modern = request("Modern", MODERN_CIPHERS, TlsVersion::Tls13);
        assert!(settle(&modern, &[]).is_err());
    }
}
