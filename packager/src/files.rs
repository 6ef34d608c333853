//! Holds generated files in memory, keyed by path, and writes them out.
//!
//! Rendering fills a [`Files`]; nothing touches the disk until every file has been rendered
//! and every rule has passed, so a refused generation leaves the output directory as it was.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::yaml::{YamlError, to_yaml};

/// A file could not be rendered or written.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// Rendering a file's YAML failed.
    #[error("{path}: {source}")]
    Render {
        /// The file.
        path: String,
        /// Why.
        source: YamlError,
    },
    /// Two renderers produced the same path.
    #[error("{0}: rendered twice")]
    Duplicate(String),
    /// Writing failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// Generated files: relative path (with `/` separators) to contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Files(BTreeMap<String, String>);

impl Files {
    /// No files.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a text file.
    pub fn text(&mut self, path: &str, contents: String) -> Result<(), FilesError> {
        if self.0.insert(path.to_string(), contents).is_some() {
            return Err(FilesError::Duplicate(path.to_string()));
        }
        Ok(())
    }

    /// Adds a YAML file rendering `value`.
    pub fn yaml<T: Serialize>(&mut self, path: &str, value: &T) -> Result<(), FilesError> {
        let text = to_yaml(value).map_err(|source| FilesError::Render {
            path: path.to_string(),
            source,
        })?;
        self.text(path, text)
    }

    /// Moves every file of `other` in.
    pub fn extend(&mut self, other: Files) -> Result<(), FilesError> {
        for (path, contents) in other.0 {
            self.text(&path, contents)?;
        }
        Ok(())
    }

    /// The contents of a file.
    pub fn get(&self, path: &str) -> Option<&str> {
        self.0.get(path).map(String::as_str)
    }

    /// Every path, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Every file, sorted by path.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(p, c)| (p.as_str(), c.as_str()))
    }

    /// Writes every file below `dir`, creating directories; a file whose contents are already
    /// right is left untouched (its modification time too).
    pub fn write_to(&self, dir: &Path) -> Result<(), FilesError> {
        for (path, contents) in &self.0 {
            let target = dir.join(path);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|source| FilesError::Write {
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
            if std::fs::read(&target).is_ok_and(|old| old == contents.as_bytes()) {
                continue;
            }
            std::fs::write(&target, contents).map_err(|source| FilesError::Write {
                path: target.clone(),
                source,
            })?;
        }
        Ok(())
    }
}
