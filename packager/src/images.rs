//! The images a generation names: the operator's (which the sidecars beside memcached share),
//! and the default memcached and memcached_exporter the operator hands to Memcacheds that name
//! none. As released they are named by tag; `pin` resolves them to digests, which is what a
//! disconnected cluster's mirror (an ImageDigestMirrorSet, containerd's `hosts.toml`) needs.

use memcached_operator::operator;

use super::release;

/// The images the CSV, `config/` and the chart name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Images {
    /// The operator's image, which its Deployment runs and its sidecars share.
    pub operator: String,
    /// The memcached image of Memcacheds that name none (`RELATED_IMAGE_MEMCACHED`).
    pub memcached: String,
    /// The memcached_exporter image (`RELATED_IMAGE_MEMCACHED_EXPORTER`).
    pub exporter: String,
}

impl Images {
    /// The images of release `version`, by tag.
    pub fn for_release(version: &str) -> Self {
        Self {
            operator: release::operator_image(version),
            memcached: operator::DEFAULT_MEMCACHED_IMAGE.to_string(),
            exporter: operator::DEFAULT_EXPORTER_IMAGE.to_string(),
        }
    }

    /// Every image with the name the CSV's `spec.relatedImages` gives it.
    pub fn named(&self) -> [(&'static str, &str); 3] {
        [
            (operator::NAME, &self.operator),
            ("memcached", &self.memcached),
            ("memcached-exporter", &self.exporter),
        ]
    }

    /// Every image, mutable, with its name.
    pub fn named_mut(&mut self) -> [(&'static str, &mut String); 3] {
        [
            (operator::NAME, &mut self.operator),
            ("memcached", &mut self.memcached),
            ("memcached-exporter", &mut self.exporter),
        ]
    }

    /// Whether every image is named by digest, so that a mirror that serves only digests
    /// serves them all.
    pub fn all_by_digest(&self) -> bool {
        self.named()
            .iter()
            .all(|(_, reference)| parts(reference).digest.is_some())
    }
}

/// A reference split into what a chart's values and a registry's API take apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts<'a> {
    /// Host and path, without tag or digest: `quay.io/org/name`.
    pub repository: &'a str,
    /// The tag, if the reference has one.
    pub tag: Option<&'a str>,
    /// The digest (`sha256:` and 64 hex digits), if the reference has one.
    pub digest: Option<&'a str>,
}

/// Splits `reference` into repository, tag and digest. A port in the host is not a tag; a
/// digest is only `sha256:` followed by 64 lower-case hex digits.
pub fn parts(reference: &str) -> Parts<'_> {
    let (name, digest) = match reference.split_once('@') {
        Some((name, digest)) if is_digest(digest) => (name, Some(digest)),
        _ => (reference, None),
    };
    let (repository, tag) = match name.rsplit_once(':') {
        Some((repository, tag)) if !tag.contains('/') => (repository, Some(tag)),
        _ => (name, None),
    };
    Parts {
        repository,
        tag,
        digest,
    }
}

/// Whether `digest` is a sha256 digest as registries give them.
pub fn is_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_reference_splits_into_repository_tag_and_digest() {
        assert_eq!(
            parts("quay.io/org/name:v1"),
            Parts {
                repository: "quay.io/org/name",
                tag: Some("v1"),
                digest: None
            }
        );
        let pinned = format!("quay.io/org/name@{DIGEST}");
        assert_eq!(
            parts(&pinned),
            Parts {
                repository: "quay.io/org/name",
                tag: None,
                digest: Some(DIGEST)
            }
        );
        let both = format!("host:5000/name:v2@{DIGEST}");
        assert_eq!(
            parts(&both),
            Parts {
                repository: "host:5000/name",
                tag: Some("v2"),
                digest: Some(DIGEST)
            }
        );
        assert_eq!(parts("host:5000/name").tag, None);
        assert_eq!(parts("name@sha256:short").digest, None, "not a digest");
    }

    #[test]
    fn only_a_release_whose_every_image_has_a_digest_is_by_digest() {
        let mut images = Images::for_release("0.1.0");
        assert!(
            !images.all_by_digest(),
            "the release names its images by tag"
        );
        images.operator = format!("quay.io/org/operator@{DIGEST}");
        images.memcached = format!("docker.io/library/memcached@{DIGEST}");
        assert!(!images.all_by_digest(), "the exporter is still by tag");
        images.exporter = format!("quay.io/prometheus/memcached-exporter@{DIGEST}");
        assert!(images.all_by_digest());
    }
}
