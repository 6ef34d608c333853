//! Watches memcached's auth file for the supervisor and decides when memcached may reread it:
//! only when its content changed to one memcached reads as written.
//!
//! The kubelet rewrites the auth Secret's file in the pod when the Secret changes (within its
//! sync period), by swapping the volume's `..data` symlink, so the file is read whole at its
//! path on every look and compared by digest. memcached reads its auth file when it starts,
//! and again on SIGHUP, when it silently keeps its old credentials if it finds the new file
//! malformed. A new content is judged as memcached reads it (`api::auth_file::check`, the one
//! parser admission and the sidecars share: blank lines, a line without `:`, lines over 255
//! bytes, the size limit): a file memcached would refuse or read otherwise than written is
//! never sent, and is reported once per content with the line and the rule it breaks. This
//! module reads and judges; it signals nothing (the supervisor does, `super::supervisor`).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::api::auth_file;

/// The auth file at one path, and what memcached is known to have read of it.
#[derive(Debug)]
pub struct AuthWatch {
    path: PathBuf,
    watch: Watch,
}

/// What one look at the file found.
#[derive(Debug, PartialEq, Eq)]
pub enum Look {
    /// Nothing to do: memcached has this content, or it was refused already.
    Unchanged,
    /// The first look found a file memcached refuses or misreads.
    StartedRefused(auth_file::Refusal),
    /// A new content memcached would refuse or misread: it is not sent.
    Refused(auth_file::Refusal),
    /// A new content memcached reads as written, with this many credentials: memcached is to
    /// reread it. [`AuthWatch::sent`] records that it was told to.
    Changed {
        /// How many credentials it holds.
        credentials: usize,
        /// Its digest, for [`AuthWatch::sent`].
        digest: [u8; 32],
    },
}

impl AuthWatch {
    /// A watch of the auth file at `path`; nothing is read yet.
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            watch: Watch::default(),
        }
    }

    /// The file watched.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the file and judges it against what memcached has. The first look records what
    /// memcached starts with. An unreadable file is judged as an empty one (memcached would
    /// refuse it) and reported with the error.
    pub fn look(&mut self) -> (Look, Option<std::io::Error>) {
        let (content, error) = match std::fs::read(&self.path) {
            Ok(content) => (content, None),
            Err(error) => (Vec::new(), Some(error)),
        };
        let digest = <[u8; 32]>::from(Sha256::digest(&content));
        let verdict = match &error {
            Some(_) => Err(auth_file::Refusal::Empty),
            None => auth_file::check(&content).map(|entries| entries.len()),
        };
        (self.watch.look(digest, verdict), error)
    }

    /// Whether the content of the last look is one memcached would refuse or misread.
    pub fn refusing(&self) -> bool {
        self.watch.refusing
    }

    /// memcached was told to reread the content with `digest`.
    pub fn sent(&mut self, digest: [u8; 32]) {
        self.watch.loaded = Some(digest);
        self.watch.refused = None;
    }
}

/// What is known of the auth file's contents, by digest.
#[derive(Debug, Default)]
struct Watch {
    /// What memcached is known to have read: what it started with (the file as first seen),
    /// or what it was last told to read.
    loaded: Option<[u8; 32]>,
    /// The last content refused, so that each is reported once.
    refused: Option<[u8; 32]>,
    /// Whether the content last looked at is refused.
    refusing: bool,
}

impl Watch {
    /// Judges the content `now` whose verdict is `verdict`.
    fn look(&mut self, now: [u8; 32], verdict: Result<usize, auth_file::Refusal>) -> Look {
        self.refusing = verdict.is_err();
        let Some(loaded) = self.loaded else {
            self.loaded = Some(now);
            return match verdict {
                Ok(_) => Look::Unchanged,
                Err(refusal) => {
                    self.refused = Some(now);
                    Look::StartedRefused(refusal)
                }
            };
        };
        match verdict {
            _ if loaded == now => Look::Unchanged,
            Err(_) if self.refused == Some(now) => Look::Unchanged,
            Err(refusal) => {
                self.refused = Some(now);
                Look::Refused(refusal)
            }
            Ok(credentials) => Look::Changed {
                credentials,
                digest: now,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `content` as the auth file and looks; a change is taken as sent.
    fn look(watch: &mut AuthWatch, content: &[u8]) -> Look {
        std::fs::write(watch.path(), content).expect("writes the auth file");
        let (look, error) = watch.look();
        assert!(error.is_none(), "{error:?}");
        if let Look::Changed { digest, .. } = look {
            watch.sent(digest);
        }
        look
    }

    fn changed(credentials: usize) -> impl Fn(&Look) -> bool {
        move |look| matches!(look, Look::Changed { credentials: c, .. } if *c == credentials)
    }

    #[test]
    fn a_file_memcached_would_refuse_is_never_sent_and_reported_once() {
        let dir = tempfile::tempdir().expect("a directory");
        let mut watch = AuthWatch::new(dir.path().join("authfile"));
        assert_eq!(look(&mut watch, b"app:one\n"), Look::Unchanged);
        assert_eq!(look(&mut watch, b"app:one\n"), Look::Unchanged);
        let blank = b"app:one\n\napp:two\n";
        assert_eq!(
            look(&mut watch, blank),
            Look::Refused(auth_file::Refusal::Malformed {
                line: 2,
                blank: true
            })
        );
        assert_eq!(look(&mut watch, blank), Look::Unchanged, "reported once");
        assert!(watch.refusing(), "still refusing what it reported once");
        assert!(changed(2)(&look(&mut watch, b"app:one\napp:two\n")));
        assert!(!watch.refusing());
        assert_eq!(look(&mut watch, b"app:one\napp:two\n"), Look::Unchanged);
        // Back to a content refused before: reported again, since memcached moved on.
        assert!(matches!(
            look(&mut watch, b"app\n"),
            Look::Refused(auth_file::Refusal::Malformed {
                line: 1,
                blank: false
            })
        ));
        assert!(changed(1)(&look(&mut watch, b"app:three\n")));
        assert!(matches!(look(&mut watch, b"app\n"), Look::Refused(_)));
    }

    #[test]
    fn back_to_what_memcached_has_after_a_refused_file_is_refusing_no_more() {
        let dir = tempfile::tempdir().expect("a directory");
        let mut watch = AuthWatch::new(dir.path().join("authfile"));
        assert_eq!(look(&mut watch, b"app:one\n"), Look::Unchanged);
        assert!(matches!(look(&mut watch, b"app\n"), Look::Refused(_)));
        assert!(watch.refusing());
        assert_eq!(look(&mut watch, b"app:one\n"), Look::Unchanged);
        assert!(
            !watch.refusing(),
            "the file memcached has is refused no more"
        );
    }

    #[test]
    fn every_rule_of_memcacheds_reader_refuses_a_change() {
        let long = format!("app:{}\n", "x".repeat(auth_file::MAX_LINE_BYTES));
        let large = "a:b\n".repeat(auth_file::MAX_FILE_BYTES / 4 + 1);
        for (content, rule) in [
            (long.as_bytes(), "line 1"),
            (large.as_bytes(), "exceed"),
            (b"\n".as_slice(), "blank"),
            (b"app:one\nnocolon\n".as_slice(), "line 2 has no ':'"),
        ] {
            let dir = tempfile::tempdir().expect("a directory");
            let mut watch = AuthWatch::new(dir.path().join("authfile"));
            assert_eq!(look(&mut watch, b"app:one\n"), Look::Unchanged);
            match look(&mut watch, content) {
                Look::Refused(refusal) => {
                    assert!(refusal.to_string().contains(rule), "{rule}: {refusal}")
                }
                other => panic!("{rule}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_refused_file_memcached_started_with_is_reported() {
        let dir = tempfile::tempdir().expect("a directory");
        let mut watch = AuthWatch::new(dir.path().join("authfile"));
        assert!(matches!(
            look(&mut watch, b"no colon\n"),
            Look::StartedRefused(_)
        ));
        assert_eq!(look(&mut watch, b"no colon\n"), Look::Unchanged);
        assert!(changed(1)(&look(&mut watch, b"app:fixed\n")));
    }

    #[test]
    fn a_file_swapped_in_through_a_symlink_as_the_kubelet_does_is_seen() {
        let dir = tempfile::tempdir().expect("a directory");
        let first = dir.path().join("..2026_01_01_first");
        let second = dir.path().join("..2026_01_02_second");
        for (version, content) in [(&first, "app:one\n"), (&second, "app:two\n")] {
            std::fs::create_dir(version).expect("a version directory");
            std::fs::write(version.join("authfile"), content).expect("a version's file");
        }
        let data = dir.path().join("..data");
        std::os::unix::fs::symlink(&first, &data).expect("..data");
        std::os::unix::fs::symlink("..data/authfile", dir.path().join("authfile"))
            .expect("authfile");
        let mut watch = AuthWatch::new(dir.path().join("authfile"));
        assert_eq!(watch.look().0, Look::Unchanged);
        let swapped = dir.path().join("..data_tmp");
        std::os::unix::fs::symlink(&second, &swapped).expect("the new link");
        std::fs::rename(&swapped, &data).expect("swapped as the kubelet does");
        assert!(changed(1)(&watch.look().0));
    }

    #[test]
    fn an_unreadable_file_is_refused_with_the_error() {
        let dir = tempfile::tempdir().expect("a directory");
        let mut watch = AuthWatch::new(dir.path().join("authfile"));
        assert_eq!(look(&mut watch, b"app:one\n"), Look::Unchanged);
        std::fs::remove_file(watch.path()).expect("removed");
        let (look, error) = watch.look();
        assert_eq!(look, Look::Refused(auth_file::Refusal::Empty));
        assert!(error.is_some());
    }
}
