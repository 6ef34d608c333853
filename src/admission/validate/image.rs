//! Judges an image reference by the CRD's own pattern and the distribution library's limits:
//! invalid, unpinned (the latest tag, explicit or not, and no digest: a warning) or pinned.

use std::cell::RefCell;
use std::sync::LazyLock;

use regex::Regex;

use crate::admission::violation::{Violation, Warnings};

/// What an image reference is worth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ImageVerdict {
    /// Not an OCI image reference.
    Invalid,
    /// Valid, but names the latest tag, explicitly or not, and no digest.
    Unpinned,
    /// Valid and pinned to a tag or a digest.
    Pinned,
}

/// The image reference grammar, compiled once: the CRD's own pattern, so the webhook and the
/// API server judge by one grammar. Its classes are ASCII, as in the distribution library's
/// (Go's `\w` is ASCII), which keeps the compiled program small: a Unicode `\w` repeated up to
/// 128 times in the tag compiles to megabytes.
static IMAGE_REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(crate::api::cel::IMAGE_REFERENCE_PATTERN).expect("the CRD's image pattern compiles")
});

/// The longest repository path the distribution library accepts.
const REPOSITORY_MAX: usize = 255;

/// Whether a digest's hex part has its algorithm's length; other algorithms are refused, as
/// the distribution library refuses them.
fn digest_is_valid(digest: &str) -> bool {
    match digest.split_once(':') {
        Some(("sha256", hex)) => hex.len() == 64,
        Some(("sha384", hex)) => hex.len() == 96,
        Some(("sha512", hex)) => hex.len() == 128,
        _ => false,
    }
}

/// The repository path of a reference's name (`name` without tag or digest), as the
/// distribution library normalizes it: the first component is a registry only if it has a
/// dot or a port or is `localhost`, and a one-component Docker Hub name is in `library/`.
fn repository_of(name: &str) -> String {
    match name.split_once('/') {
        Some((host, path)) if host.contains(['.', ':']) || host == "localhost" => {
            let docker_hub = matches!(host, "docker.io" | "index.docker.io");
            if docker_hub && !path.contains('/') {
                format!("library/{path}")
            } else {
                path.to_string()
            }
        }
        Some(_) => name.to_string(),
        None => format!("library/{name}"),
    }
}

pub(super) fn judge_image(image: &str) -> ImageVerdict {
    if image.len() > 512 || !IMAGE_REFERENCE.is_match(image) {
        return ImageVerdict::Invalid;
    }
    let (named, digest) = match image.split_once('@') {
        Some((named, digest)) => (named, Some(digest)),
        None => (image, None),
    };
    let tag = image_names_a_tag(named)
        .then(|| named.rsplit_once(':').map(|(_, tag)| tag))
        .flatten();
    let name = match tag {
        Some(tag) => &named[..named.len() - tag.len() - 1],
        None => named,
    };
    if repository_of(name).len() > REPOSITORY_MAX || digest.is_some_and(|d| !digest_is_valid(d)) {
        return ImageVerdict::Invalid;
    }
    if digest.is_none() && tag.is_none_or(|tag| tag == "latest") {
        ImageVerdict::Unpinned
    } else {
        ImageVerdict::Pinned
    }
}

thread_local! {
    /// The image last judged on this thread, and its verdict. Parsing a reference runs a
    /// regex search that costs a third of a review, and the requests about one Memcached, or
    /// all of one operator's, name the same image again and again.
    static LAST_IMAGE: RefCell<Option<(String, ImageVerdict)>> = const { RefCell::new(None) };
}

/// [`judge_image`], remembering the last image judged on this thread.
pub(super) fn judge_image_once(image: &str) -> ImageVerdict {
    LAST_IMAGE.with_borrow_mut(|last| match last {
        Some((judged, verdict)) if judged == image => *verdict,
        _ => {
            let verdict = judge_image(image);
            *last = Some((image.to_string(), verdict));
            verdict
        }
    })
}

pub(super) fn check_image(
    field: &str,
    image: &str,
    violations: &mut Vec<Violation>,
    warnings: &mut Warnings,
) {
    match judge_image_once(image) {
        ImageVerdict::Invalid => violations.push(Violation::new(
            field,
            format!("{image:?} is not a valid OCI image reference ([registry/]repository[:tag][@digest], lowercase repository)"),
        )),
        ImageVerdict::Unpinned => warnings.push(format!(
            "{field}: {image:?} uses the latest tag; pin a version or a digest so every \
             memcached pod runs the same build"
        )),
        ImageVerdict::Pinned => {}
    }
}

/// Whether the reference as written names a tag (`name:tag`), as opposed to a registry port.
fn image_names_a_tag(image: &str) -> bool {
    let name = image.split('@').next().unwrap_or(image);
    let last_component = name.rsplit('/').next().unwrap_or(name);
    last_component.contains(':')
}
