//! Decides which cert-manager issuers a Memcached may name in `spec.tls.issuerRef`.
//!
//! The operator creates the Certificate, so whoever may create a Memcached would otherwise get
//! certificates from any issuer of the cluster, ClusterIssuers included, without the right to
//! create a Certificate themselves: a confused deputy. By default a Memcached may therefore
//! name only an `Issuer` (`cert-manager.io`) in its own namespace, which that namespace's
//! owners control. A cluster admin allows more with the operator's setting
//! `--allowed-issuers` (environment `ALLOWED_ISSUERS`, which OLM users set through the
//! Subscription's `spec.config.env`): a comma-separated list of `KIND.GROUP` (every issuer of
//! that kind) and `KIND.GROUP/NAME` (one issuer) entries, or `*` (any issuer). The webhook
//! and the reconciler both judge by [`AllowedIssuers::check`]; the CRD cannot, because the
//! setting is the operator's, not the object's.

use std::fmt;
use std::str::FromStr;

use super::violation::Violation;
use crate::api::v1beta1::{IssuerRef, MemcachedSpec};

/// The environment variable that holds the setting.
pub const ALLOWED_ISSUERS_ENV: &str = "ALLOWED_ISSUERS";
/// The flag that holds the setting (it wins over the environment variable).
pub const ALLOWED_ISSUERS_FLAG: &str = "--allowed-issuers";
/// cert-manager's API group, the default group of an issuer reference.
pub const CERT_MANAGER_GROUP: &str = "cert-manager.io";
/// The namespaced issuer kind every Memcached may name.
pub const ISSUER_KIND: &str = "Issuer";

/// One issuer, or every issuer of a kind, the cluster admin allows.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Allowance {
    kind: String,
    group: String,
    /// `None`: every issuer of the kind.
    name: Option<String>,
}

/// The issuers a Memcached may name beyond an `Issuer` in its own namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedIssuers {
    /// `*`: any issuer at all.
    any: bool,
    allowances: Vec<Allowance>,
}

/// The issuer a reference names, with the defaults cert-manager applies.
fn resolved(issuer: &IssuerRef) -> (&str, &str, &str) {
    (
        issuer.kind.as_deref().unwrap_or(ISSUER_KIND),
        issuer.group.as_deref().unwrap_or(CERT_MANAGER_GROUP),
        &issuer.name,
    )
}

impl AllowedIssuers {
    /// Whether a Memcached may name `issuer`.
    pub fn allows(&self, issuer: &IssuerRef) -> bool {
        let (kind, group, name) = resolved(issuer);
        (kind == ISSUER_KIND && group == CERT_MANAGER_GROUP)
            || self.any
            || self.allowances.iter().any(|allowed| {
                allowed.kind == kind
                    && allowed.group == group
                    && allowed.name.as_deref().is_none_or(|only| only == name)
            })
    }

    /// Adds a violation when `spec.tls.issuerRef` names an issuer that is not allowed, saying
    /// how a cluster admin allows it.
    pub fn check(&self, spec: &MemcachedSpec, violations: &mut Vec<Violation>) {
        let Some(issuer) = spec.tls.as_ref().and_then(|tls| tls.issuer_ref.as_ref()) else {
            return;
        };
        if self.allows(issuer) {
            return;
        }
        let (kind, group, name) = resolved(issuer);
        violations.push(Violation::new(
            "spec.tls.issuerRef",
            format!(
                "{kind} {name:?} (group {group}) is not allowed: a Memcached may name only an \
                 {ISSUER_KIND} in its own namespace unless the cluster admin allows more; to \
                 allow this issuer, add {kind}.{group}/{name} to the operator's \
                 {ALLOWED_ISSUERS_ENV} environment variable ({ALLOWED_ISSUERS_FLAG}; under OLM, \
                 in the Subscription's spec.config.env)"
            ),
        ));
    }
}

impl fmt::Display for AllowedIssuers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut entries: Vec<String> = Vec::new();
        if self.any {
            entries.push("*".into());
        }
        entries.extend(self.allowances.iter().map(|a| match &a.name {
            Some(name) => format!("{}.{}/{name}", a.kind, a.group),
            None => format!("{}.{}", a.kind, a.group),
        }));
        f.write_str(&entries.join(","))
    }
}

/// Whether `text` is a DNS-1123 subdomain (a group's or an issuer's name).
fn is_subdomain(text: &str) -> bool {
    text.len() <= 253
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Whether `text` is a kind's name: a letter, then letters and digits.
fn is_kind(text: &str) -> bool {
    text.len() <= 63
        && text.starts_with(|c: char| c.is_ascii_alphabetic())
        && text.chars().all(|c| c.is_ascii_alphanumeric())
}

fn allowance(entry: &str) -> Result<Allowance, String> {
    let (qualified, name) = match entry.split_once('/') {
        Some((qualified, name)) => (qualified, Some(name)),
        None => (entry, None),
    };
    let (kind, group) = qualified.split_once('.').ok_or_else(|| {
        format!("{entry:?} names no API group: write KIND.GROUP or KIND.GROUP/NAME, such as ClusterIssuer.{CERT_MANAGER_GROUP}/NAME")
    })?;
    if !is_kind(kind) {
        return Err(format!(
            "{entry:?}: {kind:?} is not a kind (a letter, then letters and digits)"
        ));
    }
    if !is_subdomain(group) {
        return Err(format!(
            "{entry:?}: {group:?} is not an API group (a DNS subdomain)"
        ));
    }
    if let Some(name) = name
        && !is_subdomain(name)
    {
        return Err(format!(
            "{entry:?}: {name:?} is not an issuer's name (a DNS subdomain)"
        ));
    }
    Ok(Allowance {
        kind: kind.to_string(),
        group: group.to_string(),
        name: name.map(str::to_string),
    })
}

impl FromStr for AllowedIssuers {
    type Err = String;

    /// Parses the setting: empty (the default), or comma-separated entries.
    fn from_str(text: &str) -> Result<Self, String> {
        let mut allowed = AllowedIssuers::default();
        if text.trim().is_empty() {
            return Ok(allowed);
        }
        for (index, entry) in text.split(',').map(str::trim).enumerate() {
            match entry {
                "" => {
                    return Err(format!(
                        "entry {} is empty: separate KIND.GROUP[/NAME] entries with single commas",
                        index + 1
                    ));
                }
                "*" => allowed.any = true,
                _ => allowed.allowances.push(allowance(entry)?),
            }
        }
        Ok(allowed)
    }
}

/// clap's parser of the setting.
pub fn parse(text: &str) -> Result<AllowedIssuers, String> {
    text.parse()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1beta1::TlsSpec;

    fn issuer(kind: Option<&str>, group: Option<&str>, name: &str) -> IssuerRef {
        IssuerRef {
            name: name.into(),
            kind: kind.map(str::to_string),
            group: group.map(str::to_string),
        }
    }

    fn spec_naming(issuer: IssuerRef) -> MemcachedSpec {
        MemcachedSpec {
            tls: Some(TlsSpec {
                secret_name: Some("cache-tls".into()),
                issuer_ref: Some(issuer),
                ..TlsSpec::default()
            }),
            ..MemcachedSpec::default()
        }
    }

    fn refusals(allowed: &AllowedIssuers, issuer: IssuerRef) -> Vec<String> {
        let mut violations = Vec::new();
        allowed.check(&spec_naming(issuer), &mut violations);
        violations.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn by_default_only_an_issuer_of_the_memcacheds_namespace_is_allowed() {
        let default = AllowedIssuers::default();
        assert!(default.allows(&issuer(None, None, "local-ca")));
        assert!(default.allows(&issuer(Some("Issuer"), Some("cert-manager.io"), "ca")));
        for refused in [
            issuer(Some("ClusterIssuer"), None, "shared-ca"),
            issuer(Some("ClusterIssuer"), Some("cert-manager.io"), "shared-ca"),
            issuer(Some("Issuer"), Some("awspca.cert-manager.io"), "pca"),
            issuer(
                Some("AWSPCAClusterIssuer"),
                Some("awspca.cert-manager.io"),
                "pca",
            ),
            // cert-manager knows its kinds only as written: anything else is another kind.
            issuer(Some("issuer"), None, "ca"),
        ] {
            assert!(!default.allows(&refused), "{refused:?}");
        }
    }

    #[test]
    fn a_refusal_names_the_issuer_and_how_a_cluster_admin_allows_it() {
        let found = refusals(
            &AllowedIssuers::default(),
            issuer(Some("ClusterIssuer"), None, "shared-ca"),
        );
        assert_eq!(found.len(), 1, "{found:?}");
        let message = &found[0];
        for part in [
            "spec.tls.issuerRef: ClusterIssuer \"shared-ca\" (group cert-manager.io) is not allowed",
            "only an Issuer in its own namespace",
            "add ClusterIssuer.cert-manager.io/shared-ca",
            "ALLOWED_ISSUERS",
            "--allowed-issuers",
            "spec.config.env",
        ] {
            assert!(message.contains(part), "{part:?} missing from {message}");
        }
        assert_eq!(
            refusals(&AllowedIssuers::default(), issuer(None, None, "ca")),
            Vec::<String>::new()
        );
    }

    #[test]
    fn an_allowance_names_one_issuer_or_every_issuer_of_a_kind() {
        let one: AllowedIssuers = "ClusterIssuer.cert-manager.io/shared-ca"
            .parse()
            .expect("parses");
        assert!(one.allows(&issuer(Some("ClusterIssuer"), None, "shared-ca")));
        assert!(!one.allows(&issuer(Some("ClusterIssuer"), None, "other-ca")));
        assert!(
            one.allows(&issuer(None, None, "local-ca")),
            "Issuers stay allowed"
        );

        let kind: AllowedIssuers =
            " ClusterIssuer.cert-manager.io , AWSPCAIssuer.awspca.cert-manager.io/pca "
                .parse()
                .expect("parses");
        assert!(kind.allows(&issuer(Some("ClusterIssuer"), None, "any")));
        assert!(kind.allows(&issuer(
            Some("AWSPCAIssuer"),
            Some("awspca.cert-manager.io"),
            "pca"
        )));
        assert!(!kind.allows(&issuer(
            Some("AWSPCAIssuer"),
            Some("awspca.cert-manager.io"),
            "x"
        )));
        assert!(!kind.allows(&issuer(Some("ClusterIssuer"), Some("example.com"), "any")));
        assert_eq!(
            kind.to_string(),
            "ClusterIssuer.cert-manager.io,AWSPCAIssuer.awspca.cert-manager.io/pca"
        );

        let any: AllowedIssuers = "*".parse().expect("parses");
        assert!(any.allows(&issuer(Some("Anything"), Some("example.com"), "x")));
    }

    #[test]
    fn an_empty_setting_is_the_default() {
        assert_eq!("".parse::<AllowedIssuers>(), Ok(AllowedIssuers::default()));
        assert_eq!(
            "  ".parse::<AllowedIssuers>(),
            Ok(AllowedIssuers::default())
        );
    }

    #[test]
    fn a_malformed_setting_is_refused_naming_the_entry() {
        for (setting, expected) in [
            ("ClusterIssuer", "names no API group"),
            ("ClusterIssuer/shared-ca", "names no API group"),
            ("Cluster-Issuer.cert-manager.io", "is not a kind"),
            ("ClusterIssuer.Cert_Manager.io", "is not an API group"),
            (
                "ClusterIssuer.cert-manager.io/Shared_CA",
                "is not an issuer's name",
            ),
            ("ClusterIssuer.cert-manager.io/", "is not an issuer's name"),
            (
                "ClusterIssuer.cert-manager.io,,Issuer.example.com",
                "entry 2 is empty",
            ),
        ] {
            let error = setting.parse::<AllowedIssuers>().expect_err(setting);
            assert!(error.contains(expected), "{setting}: {error}");
        }
    }
}
