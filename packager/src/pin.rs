//! Pins image references to digests through the registry API (oci-client): what `generate
//! --image-digests` writes in place of tags, so that a disconnected cluster's mirror, which
//! serves images by digest (an ImageDigestMirrorSet, containerd's `hosts.toml` without
//! `resolve`), serves every image the bundle names, and what runs is what was released.
//!
//! A reference is resolved where its registry serves it, or through a mirror given for its
//! host (`quay.io=http://127.0.0.1:5000/quay.io`): the mirror is asked for the digest of the
//! same name below its path, and the pinned reference keeps the original name, since a
//! mirror serves the same content under the same digest. Each registry asked is read with the
//! credentials a `podman login`, `skopeo login` or `docker login` left for it
//! (`registry_auth`), or anonymously.

use std::path::PathBuf;
use std::str::FromStr;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::bundle::Options;
use super::images;
use super::registry_auth::{self, AuthError};

/// Why a reference could not be pinned.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// `--registry-mirror` is not `HOST=URL` with an http or https URL.
    #[error(
        "--registry-mirror {0:?}: {1} (expected HOST=URL, e.g. quay.io=http://127.0.0.1:5000/quay.io)"
    )]
    Mirror(String, &'static str),
    /// Two mirrors for one host.
    #[error("--registry-mirror: two mirrors for {0}")]
    TwoMirrors(String),
    /// Not an image reference.
    #[error("{0:?} is no image reference: {1}")]
    Reference(String, String),
    /// A reference with neither tag nor digest: nothing to pin.
    #[error("{0:?} names neither a tag nor a digest")]
    NoTag(String),
    /// The registry client could not be built.
    #[error("cannot build the registry client: {0}")]
    Client(String),
    /// The registry (or mirror) did not give the digest.
    #[error("cannot resolve {reference} (asked of {asked}): {error}")]
    Resolve {
        /// The reference.
        reference: String,
        /// Where the digest was asked for.
        asked: String,
        /// What the registry client said.
        error: String,
    },
    /// The credentials for a registry cannot be used.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The registry answered with something that is not a sha256 digest.
    #[error("{reference}: the registry gave {digest:?}, not a sha256 digest")]
    NotADigest {
        /// The reference.
        reference: String,
        /// What it gave.
        digest: String,
    },
}

/// A mirror of one registry host: where its images' digests are asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mirror {
    /// The host whose images it mirrors (`quay.io`).
    pub host: String,
    /// The mirror's own registry host and port (`127.0.0.1:5000`).
    pub registry: String,
    /// The path below which it stores the host's repositories (`quay.io`), or empty.
    pub prefix: String,
    /// Whether it is spoken to over plain HTTP.
    pub plain_http: bool,
}

impl FromStr for Mirror {
    type Err = PinError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |why| PinError::Mirror(text.to_string(), why);
        let (host, url) = text.split_once('=').ok_or_else(|| bad("no '='"))?;
        if host.is_empty() || host.contains('/') {
            return Err(bad("the host is empty or has a path"));
        }
        let (plain_http, rest) = if let Some(rest) = url.strip_prefix("http://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("https://") {
            (false, rest)
        } else {
            return Err(bad("the URL is neither http:// nor https://"));
        };
        let (registry, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if registry.is_empty() {
            return Err(bad("the URL has no host"));
        }
        Ok(Self {
            host: host.to_string(),
            registry: registry.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
            plain_http,
        })
    }
}

/// Resolves references to digests, through the mirrors given.
pub struct Resolver {
    client: Client,
    mirrors: Vec<Mirror>,
    auth_file: Option<PathBuf>,
}

/// A reference pinned, and where the credentials it was read with came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pinned {
    /// `REGISTRY/REPOSITORY@sha256:...`.
    pub reference: String,
    /// The registry asked and the file holding its credentials, when it was not read
    /// anonymously.
    pub credentials: Option<(String, PathBuf)>,
}

impl Resolver {
    /// A resolver asking each host's mirror, when one is given, and the host itself otherwise,
    /// with the credentials in `auth_file` (the one file to read), or where podman, skopeo and
    /// docker keep them when it is `None`.
    pub fn new(mirrors: Vec<Mirror>, auth_file: Option<PathBuf>) -> Result<Self, PinError> {
        for (i, mirror) in mirrors.iter().enumerate() {
            if mirrors[..i].iter().any(|m| m.host == mirror.host) {
                return Err(PinError::TwoMirrors(mirror.host.clone()));
            }
        }
        let plain: Vec<String> = mirrors
            .iter()
            .filter(|m| m.plain_http)
            .map(|m| m.registry.clone())
            .collect();
        let config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(plain),
            ..ClientConfig::default()
        };
        let client = Client::try_from(config).map_err(|e| PinError::Client(e.to_string()))?;
        Ok(Self {
            client,
            mirrors,
            auth_file,
        })
    }

    /// `reference` by digest: `REGISTRY/REPOSITORY@sha256:...`, the digest of what its tag
    /// names now (of an index, for a multi-platform image). A reference with a digest already
    /// is returned as it is.
    pub async fn pin(&self, reference: &str) -> Result<Pinned, PinError> {
        if images::parts(reference).digest.is_some() {
            return Ok(Pinned {
                reference: reference.to_string(),
                credentials: None,
            });
        }
        let parsed = Reference::try_from(reference)
            .map_err(|e| PinError::Reference(reference.to_string(), e.to_string()))?;
        let tag = parsed
            .tag()
            .ok_or_else(|| PinError::NoTag(reference.to_string()))?;
        let asked = match self.mirrors.iter().find(|m| m.host == parsed.registry()) {
            Some(mirror) => Reference::with_tag(
                mirror.registry.clone(),
                [mirror.prefix.as_str(), parsed.repository()]
                    .iter()
                    .filter(|part| !part.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join("/"),
                tag.to_string(),
            ),
            None => parsed.clone(),
        };
        let (auth, auth_file) =
            registry_auth::registry_auth(asked.registry(), self.auth_file.as_deref())?;
        let credentials = auth_file.map(|file| (asked.registry().to_string(), file));
        let anonymous = matches!(auth, RegistryAuth::Anonymous);
        let digest = self
            .client
            .fetch_manifest_digest(&asked, &auth)
            .await
            .map_err(|e| PinError::Resolve {
                reference: reference.to_string(),
                asked: asked.whole(),
                error: if anonymous {
                    format!(
                        "{e} (read anonymously: no credentials for {} found)",
                        asked.registry()
                    )
                } else {
                    e.to_string()
                },
            })?;
        if !images::is_digest(&digest) {
            return Err(PinError::NotADigest {
                reference: reference.to_string(),
                digest,
            });
        }
        Ok(Pinned {
            reference: format!("{}/{}@{digest}", parsed.registry(), parsed.repository()),
            credentials,
        })
    }
}

/// What a line says of the credentials a reference was pinned with.
fn with_credentials(pinned: &Pinned) -> String {
    match &pinned.credentials {
        Some((registry, file)) => format!(" (credentials for {registry} from {})", file.display()),
        None => String::new(),
    }
}

/// Names every image of `options` by digest, asking the mirrors given for their hosts: the
/// operator's, memcached's and the exporter's, or nothing if one cannot be resolved; and the
/// bundle image, when its registry has it (a release's bundle image exists only once the
/// bundle is built, so a first generation names it by tag). Returns what it says of each, a
/// line each: what it was pinned to, or a warning for the bundle image.
pub fn pin_images(
    options: &mut Options,
    mirrors: &[Mirror],
    auth_file: Option<PathBuf>,
) -> Result<Vec<String>, PinError> {
    // The registry client speaks TLS through rustls with ring, as the operator does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| PinError::Client(e.to_string()))?;
    runtime.block_on(async {
        let resolver = Resolver::new(mirrors.to_vec(), auth_file)?;
        let mut said = Vec::new();
        let mut images = options.images.clone();
        for (name, image) in images.named_mut() {
            if images::parts(image).digest.is_some() {
                said.push(format!("kept {name}: {image} (named by digest already)"));
                continue;
            }
            let pinned = resolver.pin(image).await?;
            said.push(format!(
                "pinned {name}: {image} -> {}{}",
                pinned.reference,
                with_credentials(&pinned)
            ));
            *image = pinned.reference;
        }
        options.images = images;
        match resolver.pin(&options.bundle_image).await {
            Ok(pinned) if pinned.reference == options.bundle_image => said.push(format!(
                "kept the bundle: {} (named by digest already)",
                pinned.reference
            )),
            Ok(pinned) => {
                said.push(format!(
                    "pinned the bundle: {} -> {}{}",
                    options.bundle_image,
                    pinned.reference,
                    with_credentials(&pinned)
                ));
                options.bundle_image = pinned.reference;
            }
            Err(error) => said.push(format!(
                "warning: the catalog names the bundle image by tag ({error}): push the bundle \
                 image, then generate again to pin it"
            )),
        }
        Ok(said)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_is_a_host_and_an_http_or_https_url_with_an_optional_path() {
        let mirror: Mirror = "quay.io=http://127.0.0.1:5000/quay.io"
            .parse()
            .expect("a mirror");
        assert_eq!(
            mirror,
            Mirror {
                host: "quay.io".into(),
                registry: "127.0.0.1:5000".into(),
                prefix: "quay.io".into(),
                plain_http: true,
            }
        );
        let mirror: Mirror = "docker.io=https://mirror.example/"
            .parse()
            .expect("a mirror");
        assert_eq!((mirror.prefix.as_str(), mirror.plain_http), ("", false));
        for (text, why) in [
            ("quay.io", "no '='"),
            ("=http://m", "the host is empty"),
            ("quay.io=ftp://m", "neither http:// nor https://"),
            ("quay.io=http://", "no host"),
        ] {
            let error = text.parse::<Mirror>().expect_err(text).to_string();
            assert!(
                error.contains(why) && error.contains(text),
                "{text}: {error}"
            );
        }
    }

    #[test]
    fn two_mirrors_for_one_host_are_refused() {
        let mirrors = vec![
            "quay.io=http://a:5000".parse().expect("a mirror"),
            "quay.io=http://b:5000".parse().expect("a mirror"),
        ];
        let error = Resolver::new(mirrors, None)
            .err()
            .expect("refused")
            .to_string();
        assert!(error.contains("two mirrors for quay.io"), "{error}");
    }

    #[tokio::test]
    async fn a_pinned_reference_stays_and_one_without_tag_or_digest_is_refused_without_a_request() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let resolver = Resolver::new(Vec::new(), None).expect("a resolver");
        let pinned = format!("quay.io/org/name@sha256:{}", "a".repeat(64));
        assert_eq!(resolver.pin(&pinned).await.expect("kept").reference, pinned);
        let error = resolver
            .pin("not a reference")
            .await
            .expect_err("refused")
            .to_string();
        assert!(error.contains("no image reference"), "{error}");
    }
}
