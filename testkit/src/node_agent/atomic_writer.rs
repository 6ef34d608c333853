//! Writes a volume's files the way the kubelet's atomic writer does, so that a reader never
//! sees half an update and an update is one `rename` of the `..data` symbolic link.
//!
//! Layout of a volume directory after a write:
//! ```text
//! ..2026_11_24_02_12_00.123456789/   the payload (a fresh directory per write)
//! ..data -> ..2026_11_24_02_12_00.123456789
//! tls.crt -> ..data/tls.crt           one link per top-level name of the payload
//! ```
//! An update writes a new timestamped directory, points `..data_tmp` at it, renames
//! `..data_tmp` over `..data`, then removes the old directory and any top-level link whose
//! name left the payload. An unchanged payload writes nothing. What goes into the payload
//! (Secret keys, projections, modes) is `volumes`'s job.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Component, Path, PathBuf};

/// The link that names the current payload directory.
pub const DATA_DIR: &str = "..data";
/// The link made before it is renamed over [`DATA_DIR`].
const DATA_DIR_TMP: &str = "..data_tmp";

/// One file of a payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileProjection {
    /// Its contents.
    pub data: Vec<u8>,
    /// Its permission bits.
    pub mode: u32,
}

/// Why a payload could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A payload path is absolute, empty, or climbs out of the volume (`..`).
    #[error("volume {}: payload path {path:?} is not a plain relative path", .dir.display())]
    BadPath {
        /// The volume directory.
        dir: PathBuf,
        /// The offending path.
        path: String,
    },
    /// A file system operation failed.
    #[error("volume {}: cannot {action} {}: {error}", .dir.display(), .path.display())]
    Io {
        /// The volume directory.
        dir: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        error: io::Error,
    },
}

/// Writes payloads into one volume directory.
#[derive(Clone, Debug)]
pub struct AtomicWriter {
    dir: PathBuf,
}

impl AtomicWriter {
    /// A writer for the volume directory `dir` (made when missing).
    pub fn new(dir: impl Into<PathBuf>) -> AtomicWriter {
        AtomicWriter { dir: dir.into() }
    }

    /// The volume directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Makes the volume hold exactly `payload` (relative path -> file). Returns whether
    /// anything changed.
    pub fn write(&self, payload: &BTreeMap<String, FileProjection>) -> Result<bool, WriteError> {
        let io_error = |action: &'static str, path: &Path| {
            let dir = self.dir.clone();
            let path = path.to_path_buf();
            move |error| WriteError::Io {
                dir,
                action,
                path,
                error,
            }
        };
        for path in payload.keys() {
            let plain = !path.is_empty()
                && Path::new(path)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)));
            if !plain {
                return Err(WriteError::BadPath {
                    dir: self.dir.clone(),
                    path: path.clone(),
                });
            }
        }
        std::fs::create_dir_all(&self.dir).map_err(io_error("create", &self.dir))?;
        let data_link = self.dir.join(DATA_DIR);
        let old = std::fs::read_link(&data_link).ok();
        if let Some(old) = &old
            && self.holds(&self.dir.join(old), payload)
        {
            return Ok(false);
        }
        let stamp = jiff::Timestamp::now()
            .strftime("..%Y_%m_%d_%H_%M_%S.%N")
            .to_string();
        let mut fresh = self.dir.join(&stamp);
        let mut n = 0;
        while fresh.exists() {
            n += 1;
            fresh = self.dir.join(format!("{stamp}{n}"));
        }
        std::fs::create_dir(&fresh).map_err(io_error("create", &fresh))?;
        for (path, file) in payload {
            let target = fresh.join(path);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(io_error("create", parent))?;
            }
            std::fs::write(&target, &file.data).map_err(io_error("write", &target))?;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(file.mode))
                .map_err(io_error("chmod", &target))?;
        }
        let tmp_link = self.dir.join(DATA_DIR_TMP);
        let _ = std::fs::remove_file(&tmp_link);
        let fresh_name = fresh.file_name().map(PathBuf::from).unwrap_or_default();
        symlink(&fresh_name, &tmp_link).map_err(io_error("link", &tmp_link))?;
        std::fs::rename(&tmp_link, &data_link).map_err(io_error("rename", &data_link))?;
        let top: std::collections::BTreeSet<String> = payload
            .keys()
            .filter_map(|p| p.split('/').next().map(str::to_string))
            .collect();
        for name in &top {
            let link = self.dir.join(name);
            if std::fs::symlink_metadata(&link).is_err() {
                symlink(Path::new(DATA_DIR).join(name), &link).map_err(io_error("link", &link))?;
            }
        }
        let entries = std::fs::read_dir(&self.dir).map_err(io_error("list", &self.dir))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("..") {
                if name != DATA_DIR && Some(PathBuf::from(&name)) != Some(fresh_name.clone()) {
                    let path = entry.path();
                    std::fs::remove_dir_all(&path).map_err(io_error("remove", &path))?;
                }
            } else if !top.contains(&name) {
                let path = entry.path();
                std::fs::remove_file(&path).map_err(io_error("remove", &path))?;
            }
        }
        Ok(true)
    }

    /// Whether directory `dir` holds exactly `payload`.
    fn holds(&self, dir: &Path, payload: &BTreeMap<String, FileProjection>) -> bool {
        let mut found = 0;
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                return false;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                found += 1;
                let Ok(relative) = path.strip_prefix(dir) else {
                    return false;
                };
                let Some(file) = payload.get(&relative.to_string_lossy().into_owned()) else {
                    return false;
                };
                let same_mode = std::fs::metadata(&path)
                    .map(|m| m.permissions().mode() & 0o7777 == file.mode)
                    .unwrap_or(false);
                if !same_mode || std::fs::read(&path).ok().as_deref() != Some(&file.data[..]) {
                    return false;
                }
            }
        }
        found == payload.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(pairs: &[(&str, &str)]) -> BTreeMap<String, FileProjection> {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    FileProjection {
                        data: v.as_bytes().to_vec(),
                        mode: 0o644,
                    },
                )
            })
            .collect()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_write_makes_a_timestamped_dir_a_data_link_and_one_link_per_key() {
        let tmp = tempfile::tempdir().unwrap();
        let writer = AtomicWriter::new(tmp.path().join("vol"));
        assert!(
            writer
                .write(&payload(&[("tls.crt", "C"), ("tls.key", "K")]))
                .unwrap()
        );
        let dir = writer.dir();
        let listed = names(dir);
        assert_eq!(listed.len(), 4, "{listed:?}");
        let stamp = &listed[0];
        assert!(stamp.starts_with("..20"), "{stamp}");
        assert_eq!(
            stamp.len(),
            "..2026_11_24_02_12_00.123456789".len(),
            "{stamp}"
        );
        assert_eq!(&listed[1..], ["..data", "tls.crt", "tls.key"]);
        assert_eq!(
            std::fs::read_link(dir.join("..data")).unwrap(),
            PathBuf::from(stamp)
        );
        assert_eq!(
            std::fs::read_link(dir.join("tls.crt")).unwrap(),
            PathBuf::from("..data/tls.crt")
        );
        assert_eq!(std::fs::read_to_string(dir.join("tls.key")).unwrap(), "K");
    }

    #[test]
    fn an_update_swaps_the_data_link_and_drops_the_old_dir_and_removed_keys() {
        let tmp = tempfile::tempdir().unwrap();
        let writer = AtomicWriter::new(tmp.path().join("vol"));
        writer.write(&payload(&[("a", "1"), ("b", "2")])).unwrap();
        let before = std::fs::read_link(writer.dir().join("..data")).unwrap();
        assert!(writer.write(&payload(&[("a", "3")])).unwrap());
        let after = std::fs::read_link(writer.dir().join("..data")).unwrap();
        assert_ne!(before, after);
        let listed = names(writer.dir());
        assert_eq!(
            listed,
            [after.to_string_lossy().as_ref(), "..data", "a"],
            "the old payload directory and the link of b are gone"
        );
        assert_eq!(
            std::fs::read_to_string(writer.dir().join("a")).unwrap(),
            "3"
        );
    }

    #[test]
    fn an_unchanged_payload_writes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let writer = AtomicWriter::new(tmp.path().join("vol"));
        writer.write(&payload(&[("dir/a", "1")])).unwrap();
        let before = std::fs::read_link(writer.dir().join("..data")).unwrap();
        assert!(!writer.write(&payload(&[("dir/a", "1")])).unwrap());
        assert_eq!(
            std::fs::read_link(writer.dir().join("..data")).unwrap(),
            before
        );
        assert_eq!(
            std::fs::read_to_string(writer.dir().join("dir/a")).unwrap(),
            "1"
        );
    }

    #[test]
    fn a_path_that_climbs_out_of_the_volume_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let writer = AtomicWriter::new(tmp.path().join("vol"));
        let error = writer.write(&payload(&[("../x", "1")])).unwrap_err();
        assert!(error.to_string().contains("\"../x\""), "{error}");
    }
}
