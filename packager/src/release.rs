//! States the facts of a release that are not in the API types: version and date, images,
//! channel, who maintains the operator and where to find it.
//!
//! Everything the generator writes that is not derived from `api`, `webhook`, `operator` or
//! `rbac` comes from here, so a release is one edit in one file.

use memcached_operator::operator;

/// The operator's version, from Cargo.toml.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Every release, oldest first, with the day it was cut. The last entry is the version in
/// Cargo.toml (a test holds them together); its date is the CSV's `createdAt` unless
/// `SOURCE_DATE_EPOCH` is set, so the output never depends on the wall clock.
pub const RELEASES: &[(&str, &str)] = &[("0.1.0", "2026-11-22T00:00:00Z")];

/// The OLM package, the CSV name prefix.
pub const PACKAGE: &str = operator::NAME;

/// The channel every bundle is published to, and the package's default channel. (OLM's
/// naming guide prefers `candidate`/`fast`/`stable`; `operator-sdk bundle validate` v1.42
/// accepts `alpha` on a bundle directory without a warning, checked by `make validate`.)
pub const CHANNEL: &str = "alpha";

/// Where images are pushed; each image is `<REGISTRY>/<name>:v<version>`.
pub const REGISTRY: &str = operator::IMAGE_REPOSITORY;

/// The operator-sdk release whose scorecard-test image the scorecard config runs (the
/// operator-sdk that `hack/tools.sh` installs; a test compares the two).
pub const OPERATOR_SDK_VERSION: &str = "v1.42.2";

/// The operator-registry release whose `opm` image serves the catalog (the `opm` that
/// `hack/tools.sh` installs; a test compares the two).
pub const OPM_VERSION: &str = "v1.73.0";

/// The oldest Kubernetes the CRD's rules run on: they call the Kubernetes quantity CEL
/// library (`isQuantity`, `quantity`, usable in CRD rules from 1.29) and set
/// `messageExpression`, `reason` and `fieldPath`, all generally available from 1.30
/// (OpenShift 4.17).
pub const MIN_KUBE_VERSION: &str = "1.30.0";

/// The oldest OpenShift release the bundle is for (Kubernetes 1.30).
pub const OPENSHIFT_VERSIONS: &str = "v4.17";

/// A platform the operator image is built for, spelled as Kubernetes spells it: the values of
/// the `kubernetes.io/os` and `kubernetes.io/arch` node labels (Go's `GOOS` and `GOARCH`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImagePlatform {
    /// `linux`, ...
    pub os: &'static str,
    /// `amd64`, `arm64`, ...
    pub arch: &'static str,
}

/// Every platform the operator image is built for, and so the only ones it claims. The CSV's
/// `operatorframework.io/os.*` and `operatorframework.io/arch.*` labels and the operator
/// Deployment's required node affinity (in the CSV and in `config/manager`) are derived from
/// this list and from nothing else.
///
/// `Dockerfile` compiles the operator for the architecture of the machine that builds the
/// image, and release images are built on amd64 Linux. Add a platform here only once its
/// image is built and pushed (docs/packaging.md, "Platforms"): e.g.
/// `ImagePlatform { os: "linux", arch: "arm64" }`.
pub const PLATFORMS: &[ImagePlatform] = &[ImagePlatform {
    os: "linux",
    arch: "amd64",
}];

/// Where the binary sits in the operator image (the Dockerfile copies it there; a test reads
/// the Dockerfile).
pub const BINARY_PATH: &str = operator::BINARY_PATH;

/// Human-facing metadata.
pub const DISPLAY_NAME: &str = "Memcached Operator";
/// One line for OperatorHub tiles and `olm.package`.
pub const SHORT_DESCRIPTION: &str =
    "Runs memcached clusters on Kubernetes with defaulting, validation and version conversion.";
/// Who provides the operator.
pub const PROVIDER: &str = "f2367556";
/// Who maintains it.
pub const MAINTAINER_NAME: &str = "Memcached Operator Maintainers";
/// Where to reach them.
pub const MAINTAINER_EMAIL: &str = "memcached-operator@f2367556.dev";
/// The source repository.
pub const REPOSITORY: &str = "https://github.com/f2367556/memcached-operator";
/// Where to get help.
pub const SUPPORT: &str = "Memcached Operator Maintainers";
/// The namespace OperatorHub suggests installing into.
pub const SUGGESTED_NAMESPACE: &str = "memcached-operator-system";
/// Search keywords.
pub const KEYWORDS: &[&str] = &["memcached", "cache", "key-value", "in-memory", "database"];
/// OperatorHub category (from OLM's list).
pub const CATEGORIES: &str = "Database";
/// The capability level honestly met: installs and configures; upgrades are not yet handled.
pub const CAPABILITIES: &str = "Basic Install";
/// Maturity of the API.
pub const MATURITY: &str = "alpha";

/// The operator's image for a version.
pub fn operator_image(version: &str) -> String {
    operator::image(version)
}

/// The bundle image for a version.
pub fn bundle_image(version: &str) -> String {
    format!("{REGISTRY}/{PACKAGE}-bundle:v{version}")
}

/// The catalog image for a version.
pub fn catalog_image(version: &str) -> String {
    format!("{REGISTRY}/{PACKAGE}-catalog:v{version}")
}

/// The CSV's name for a version, `<package>.v<version>`.
pub fn csv_name(version: &str) -> String {
    format!("{PACKAGE}.v{version}")
}

/// The scorecard-test image of [`OPERATOR_SDK_VERSION`].
pub fn scorecard_image() -> String {
    format!("quay.io/operator-framework/scorecard-test:{OPERATOR_SDK_VERSION}")
}

/// The opm image of [`OPM_VERSION`].
pub fn opm_image() -> String {
    format!("quay.io/operator-framework/opm:{OPM_VERSION}")
}

/// The date of the current release, from [`RELEASES`].
pub fn release_date() -> Option<&'static str> {
    RELEASES
        .iter()
        .find(|(version, _)| *version == VERSION)
        .map(|(_, date)| *date)
}

/// The release before the current one, if any: the one the current CSV replaces.
pub fn previous_version() -> Option<&'static str> {
    let position = RELEASES.iter().position(|(v, _)| *v == VERSION)?;
    position
        .checked_sub(1)
        .and_then(|i| RELEASES.get(i))
        .map(|(v, _)| *v)
}

/// Formats `SOURCE_DATE_EPOCH` (seconds since the epoch) as an RFC 3339 UTC timestamp.
pub fn created_at_from_epoch(epoch: &str) -> Result<String, String> {
    let seconds: i64 = epoch
        .trim()
        .parse()
        .map_err(|_| format!("SOURCE_DATE_EPOCH: {epoch:?} is not a number of seconds"))?;
    let timestamp = k8s_openapi::jiff::Timestamp::from_second(seconds)
        .map_err(|e| format!("SOURCE_DATE_EPOCH: {seconds} is out of range: {e}"))?;
    Ok(timestamp.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_release_is_the_crate_version_and_has_a_date() {
        assert_eq!(RELEASES.last().map(|(v, _)| *v), Some(VERSION));
        assert!(release_date().is_some());
    }

    #[test]
    fn release_dates_are_rfc3339_utc_midnights_in_order() {
        for (_, date) in RELEASES {
            assert!(
                date.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
                "{date}"
            );
            assert!(date.ends_with("T00:00:00Z"), "{date}");
        }
        assert!(RELEASES.windows(2).all(|w| w[0].1 < w[1].1));
    }

    #[test]
    fn source_date_epoch_is_formatted_in_utc() {
        assert_eq!(
            created_at_from_epoch("1700000000").as_deref(),
            Ok("2023-11-14T22:13:20Z")
        );
        assert!(created_at_from_epoch("soon").is_err());
    }

    #[test]
    fn images_are_versioned() {
        assert_eq!(
            operator_image("0.1.0"),
            "quay.io/f2367556/memcached-operator:v0.1.0"
        );
        assert_eq!(csv_name("0.1.0"), "memcached-operator.v0.1.0");
    }
}
