//! Lays certificates out on disk the way the operator finds them in a cluster: at the paths
//! OLM mounts a webhook's serving certificate at, under a root given to `--cert-root`, and as
//! a Secret volume the kubelet keeps up to date with symbolic links.
//!
//! Issuing the certificates is [`crate::pki`]'s job; the paths come from the operator's own
//! `tls::certs`.

use std::path::{Path, PathBuf};

use memcached_operator::tls::certs::{OLM_APISERVER_CERTS_DIR, OLM_SERVING_CERTS_DIR};
use tempfile::TempDir;

use crate::pki::{Ca, KeyForm, Leaf};

/// Where a certificate and its key are written, relative to the OLM root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `tmp/k8s-webhook-server/serving-certs/tls.crt` + `tls.key`.
    ServingCerts,
    /// `tmp/k8s-webhook-server/serving-certs/tls.cert` + `tls.key` (OLM's docs' spelling).
    ServingCertsTlsCert,
    /// `apiserver.local.config/certificates/apiserver.crt` + `apiserver.key`.
    ApiServer,
}

impl Layout {
    /// The directory and the certificate and key file names.
    pub fn files(self, root: &Path) -> (PathBuf, &'static str, &'static str) {
        match self {
            Layout::ServingCerts => (root.join(OLM_SERVING_CERTS_DIR), "tls.crt", "tls.key"),
            Layout::ServingCertsTlsCert => {
                (root.join(OLM_SERVING_CERTS_DIR), "tls.cert", "tls.key")
            }
            Layout::ApiServer => (
                root.join(OLM_APISERVER_CERTS_DIR),
                "apiserver.crt",
                "apiserver.key",
            ),
        }
    }
}

/// Writes a certificate and key under `root` in `layout`, each file atomically (written aside,
/// then renamed), key first.
///
/// # Panics
/// If a directory or file cannot be written; the message names it.
pub fn write(root: &Path, layout: Layout, cert_pem: &str, key_pem: &str) {
    let (dir, cert, key) = layout.files(root);
    create_dir_all(&dir);
    for (name, contents) in [(key, key_pem), (cert, cert_pem)] {
        let aside = dir.join(format!(".{name}.tmp"));
        write_file(&aside, contents);
        rename(&aside, &dir.join(name));
    }
}

/// A temporary OLM root holding a fresh root CA's serving certificate (EC key, PKCS#8) at
/// OLM's first path: what a test of a working server starts from.
///
/// # Panics
/// If the temporary directory or its files cannot be made.
pub fn olm_root() -> (TempDir, Ca, Leaf) {
    let root =
        TempDir::new().unwrap_or_else(|error| panic!("cannot make a temporary OLM root: {error}"));
    let ca = Ca::root();
    let leaf = ca.serving(KeyForm::EcPkcs8);
    write(
        root.path(),
        Layout::ServingCerts,
        &leaf.cert_pem,
        &leaf.key_pem,
    );
    (root, ca, leaf)
}

/// A Secret volume as the kubelet maintains it: the files live in a timestamped directory,
/// `..data` links to it, and `tls.crt`/`tls.key` link through `..data`. An update writes a new
/// directory and renames a fresh `..data_tmp` link over `..data`.
pub struct KubeletVolume {
    dir: PathBuf,
    generation: u32,
}

impl KubeletVolume {
    /// A volume at `dir` (created) publishing `tls.crt` and `tls.key`.
    ///
    /// # Panics
    /// If `dir` cannot be created.
    pub fn new(dir: &Path) -> KubeletVolume {
        create_dir_all(dir);
        KubeletVolume {
            dir: dir.to_path_buf(),
            generation: 0,
        }
    }

    /// Publishes a new certificate and key the way the kubelet's atomic writer does.
    ///
    /// # Panics
    /// If a file, directory or link of the volume cannot be written; the message names it.
    pub fn publish(&mut self, cert_pem: &str, key_pem: &str) {
        self.generation += 1;
        let timestamped = format!("..2026_11_22_13_00_00.{:010}", self.generation);
        let data = self.dir.join(&timestamped);
        create_dir_all(&data);
        write_file(&data.join("tls.crt"), cert_pem);
        write_file(&data.join("tls.key"), key_pem);
        let old = std::fs::read_link(self.dir.join("..data")).ok();
        let tmp = self.dir.join("..data_tmp");
        symlink(Path::new(&timestamped), &tmp);
        rename(&tmp, &self.dir.join("..data"));
        for name in ["tls.crt", "tls.key"] {
            let link = self.dir.join(name);
            if std::fs::symlink_metadata(&link).is_err() {
                symlink(&Path::new("..data").join(name), &link);
            }
        }
        if let Some(old) = old {
            let old = self.dir.join(old);
            std::fs::remove_dir_all(&old).unwrap_or_else(|error| {
                panic!(
                    "cannot remove the old volume directory {}: {error}",
                    old.display()
                )
            });
        }
    }
}

fn create_dir_all(dir: &Path) {
    std::fs::create_dir_all(dir)
        .unwrap_or_else(|error| panic!("cannot create {}: {error}", dir.display()));
}

fn write_file(path: &Path, contents: &str) {
    std::fs::write(path, contents)
        .unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
}

fn rename(from: &Path, to: &Path) {
    std::fs::rename(from, to).unwrap_or_else(|error| {
        panic!(
            "cannot rename {} to {}: {error}",
            from.display(),
            to.display()
        )
    });
}

fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap_or_else(|error| {
        panic!(
            "cannot link {} to {}: {error}",
            link.display(),
            target.display()
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_puts_the_pair_at_the_layouts_paths_and_leaves_nothing_aside() {
        let root = TempDir::new().expect("a temporary directory");
        write(root.path(), Layout::ApiServer, "CERT", "KEY");
        let dir = root.path().join(OLM_APISERVER_CERTS_DIR);
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect("written");
        assert_eq!(read("apiserver.crt"), "CERT");
        assert_eq!(read("apiserver.key"), "KEY");
        assert_eq!(std::fs::read_dir(&dir).expect("a directory").count(), 2);
    }

    #[test]
    fn a_kubelet_volume_serves_the_latest_pair_through_data_and_keeps_one_directory() {
        let dir = TempDir::new().expect("a temporary directory");
        let mut volume = KubeletVolume::new(dir.path());
        volume.publish("CERT 1", "KEY 1");
        volume.publish("CERT 2", "KEY 2");
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).expect("linked");
        assert_eq!(read("tls.crt"), "CERT 2");
        assert_eq!(read("tls.key"), "KEY 2");
        let timestamped = std::fs::read_dir(dir.path())
            .expect("a directory")
            .filter_map(Result::ok)
            .filter(|entry| entry.file_name().to_string_lossy().starts_with("..2026"))
            .count();
        assert_eq!(timestamped, 1);
    }
}
