//! Restarts memcached in place, warm, when the operator asks, so that it stops trusting the
//! client CAs withdrawn from its `ca.crt`: memcached's `refresh_certs` adds CAs and removes
//! none, and only a new process reads the file anew.
//!
//! The operator asks one server at a time by annotating its pod with the SHA-256 of the
//! `ca.crt` the server must trust ([`REQUEST_ANNOTATION`]), which the kubelet projects into
//! memcached's container (a downward API file). The supervisor acts once per request, and
//! only once the mounted `ca.crt` has that digest, since the kubelet brings a ConfigMap's
//! change into a running pod at its own pace and the request may come first. It then records
//! the request beside the memory file (whose volume outlives the container, so the next
//! supervisor does not act on it again), says why in the container's termination message, and
//! stops memcached with SIGUSR1, the graceful stop that saves its items. The container ends;
//! the kubelet starts it again, memcached restores its items and reads `ca.crt` anew, and the
//! operator sees the restart.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::trust::{Fingerprint, fingerprints};

/// The pod annotation that asks for the restart: the SHA-256 (lowercase hex) of the `ca.crt`
/// content memcached must trust after it.
pub const REQUEST_ANNOTATION: &str = "cache.f2367556.dev/client-ca-sha256";

/// The pod annotation beside it, for the operator: memcached's restart count when the restart
/// was asked for, so that the operator sees when it happened.
pub const RESTARTS_ANNOTATION: &str = "cache.f2367556.dev/client-ca-restarts";

/// What a look at the request finds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Look {
    /// No request, or one already acted on.
    Idle,
    /// A request whose `ca.crt` the kubelet has not brought into the container yet.
    Waiting {
        /// The requested digest.
        request: String,
        /// The mounted file's digest, if it could be read.
        mounted: Option<String>,
    },
    /// A request to act on now: `ca.crt` has the requested digest.
    Restart {
        /// The requested digest.
        request: String,
    },
}

/// The files a request is judged from.
#[derive(Clone, Debug)]
pub struct CaRestart {
    request: PathBuf,
    ca: PathBuf,
    done: PathBuf,
}

/// The SHA-256 of `content`, in lowercase hex.
pub fn digest(content: &[u8]) -> String {
    Sha256::digest(content)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

impl CaRestart {
    /// Judges the request in the file `request` against the CAs in `ca`, recording the requests
    /// acted on in `done`.
    pub fn new(request: PathBuf, ca: PathBuf, done: PathBuf) -> Self {
        Self { request, ca, done }
    }

    /// The client CAs memcached verifies client certificates against.
    pub fn ca_path(&self) -> &Path {
        &self.ca
    }

    /// The file the requests acted on are recorded in.
    pub fn done_path(&self) -> &Path {
        &self.done
    }

    /// Whether there is a request to act on.
    pub fn look(&self) -> Look {
        let request = read_trimmed(&self.request);
        if request.is_empty() || read_trimmed(&self.done) == request {
            return Look::Idle;
        }
        match std::fs::read(&self.ca).map(|content| digest(&content)) {
            Ok(mounted) if mounted == request => Look::Restart { request },
            mounted => Look::Waiting {
                request,
                mounted: mounted.ok(),
            },
        }
    }

    /// Records `request` as acted on, before memcached is stopped for it.
    pub fn record(&self, request: &str) -> std::io::Result<()> {
        std::fs::write(&self.done, format!("{request}\n"))
    }
}

/// The client CAs memcached may trust, as its supervisor sees `ca.crt`: those of the file
/// when memcached started, and of every version seen since (the refresher's `refresh_certs`
/// adds them). The supervisor starts memcached, so unlike the refresher it knows which file
/// the process read at its start: the count is exact where it restarts memcached for a
/// withdrawn CA, as soon as memcached runs with the new file.
#[derive(Clone, Debug, Default)]
pub struct Trusted {
    cas: BTreeSet<Fingerprint>,
}

impl Trusted {
    /// Records that `ca.crt` holds `content` now (before memcached starts, and at every look);
    /// returns how many CAs memcached may still trust that it no longer holds.
    pub fn saw(&mut self, content: &[u8]) -> usize {
        let now = fingerprints(content);
        self.cas.extend(now.iter().copied());
        self.cas.difference(&now).count()
    }
}

/// The content of `path`, trimmed; empty when it cannot be read.
fn read_trimmed(path: &Path) -> String {
    std::fs::read_to_string(path)
        .map(|content| content.trim().to_string())
        .unwrap_or_default()
}

/// What the container's termination message says of a restart for `request`: the operator
/// and the `ServerRestarted` Event read it.
pub fn reason(request: &str) -> String {
    format!(
        "restarted in place to trust only the client CAs of ca.crt sha256:{request}, \
         as the operator asked: memcached keeps trusting a CA withdrawn from ca.crt until it \
         starts again"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_acted_on_once_and_only_when_ca_crt_has_its_digest() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = |name: &str| dir.path().join(name);
        let watch = CaRestart::new(path("request"), path("ca.crt"), path("done"));
        assert_eq!(watch.look(), Look::Idle, "no request file");
        std::fs::write(path("request"), "").expect("written");
        assert_eq!(watch.look(), Look::Idle, "the annotation is absent");

        let old = b"-----BEGIN CERTIFICATE-----\nold\n-----END CERTIFICATE-----\n";
        let new = b"-----BEGIN CERTIFICATE-----\nnew\n-----END CERTIFICATE-----\n";
        std::fs::write(path("ca.crt"), old).expect("written");
        std::fs::write(path("request"), digest(new)).expect("written");
        assert_eq!(
            watch.look(),
            Look::Waiting {
                request: digest(new),
                mounted: Some(digest(old)),
            },
            "the kubelet has not brought the new ca.crt yet"
        );
        std::fs::write(path("ca.crt"), new).expect("written");
        assert_eq!(
            watch.look(),
            Look::Restart {
                request: digest(new)
            }
        );
        watch.record(&digest(new)).expect("recorded");
        assert_eq!(watch.look(), Look::Idle, "acted on once");

        std::fs::write(path("ca.crt"), old).expect("written");
        std::fs::write(path("request"), format!("{}\n", digest(old))).expect("written");
        assert_eq!(
            watch.look(),
            Look::Restart {
                request: digest(old)
            },
            "a new request is acted on again"
        );
    }

    #[test]
    fn a_withdrawn_ca_is_counted_until_the_next_memcached_starts_with_the_file_without_it() {
        let (one, two) = (testkit::pki::Ca::root(), testkit::pki::Ca::root());
        let (both, only_two) = (format!("{}{}", one.pem, two.pem), two.pem.clone());
        let mut trusted = Trusted::default();
        assert_eq!(trusted.saw(one.pem.as_bytes()), 0, "at memcached's start");
        assert_eq!(trusted.saw(both.as_bytes()), 0, "a CA added");
        assert_eq!(
            trusted.saw(only_two.as_bytes()),
            1,
            "one withdrawn, still trusted"
        );
        assert_eq!(trusted.saw(only_two.as_bytes()), 1);
        let mut next = Trusted::default();
        assert_eq!(
            next.saw(only_two.as_bytes()),
            0,
            "the next memcached's start"
        );
    }

    #[test]
    fn the_digest_is_lowercase_hex_sha256_and_the_reason_names_it() {
        assert_eq!(
            digest(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(reason("ab12").contains("sha256:ab12"));
    }
}
