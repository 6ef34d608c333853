//! Reads a registry+v1 bundle directory from disk and runs OLM's webhook rules over it: the
//! shell behind `memcached-operator check-bundle`.
//!
//! Every YAML or JSON file in `manifests/` is read; the one ClusterServiceVersion and every
//! CustomResourceDefinition are picked out. Webhook paths are checked against the server's
//! routes only when the CSV is this operator's (its name starts with `memcached-operator.`);
//! other operators' routes are unknown.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::csv::{self, ClusterServiceVersion};
use super::generate::routed_paths;
use super::release;
use super::rules::{self, CrdFacts, Routes, Violation};
use super::yaml;

/// The bundle could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// A file or directory could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// Which.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A file is not YAML, or an object in it is malformed.
    #[error("{}: {message}", path.display())]
    Parse {
        /// Which.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// No ClusterServiceVersion in `manifests/`.
    #[error("{}: no ClusterServiceVersion found", path.display())]
    NoCsv {
        /// The manifests directory.
        path: PathBuf,
    },
    /// More than one.
    #[error("{}: more than one ClusterServiceVersion ({})", path.display(), names.join(", "))]
    ManyCsvs {
        /// The manifests directory.
        path: PathBuf,
        /// Their files.
        names: Vec<String>,
    },
}

/// What `check-bundle` found.
#[derive(Clone, Debug)]
pub struct Report {
    /// The CSV's name.
    pub csv: String,
    /// Files read from `manifests/`.
    pub files: usize,
    /// CRDs found.
    pub crds: Vec<String>,
    /// Broken rules.
    pub violations: Vec<Violation>,
}

fn is_manifest(path: &Path) -> bool {
    let hidden = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'));
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default();
    !hidden && matches!(extension, "yaml" | "yml" | "json")
}

/// What the rules need from a CRD object, of either apiextensions version.
fn crd_facts(path: &Path, object: &Value) -> Result<CrdFacts, CheckError> {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or_else(|| CheckError::Parse {
            path: path.to_path_buf(),
            message: "CustomResourceDefinition has no metadata.name".to_string(),
        })?;
    // apiextensions.k8s.io/v1beta1 preserved unknown fields unless told otherwise.
    let legacy =
        object.get("apiVersion").and_then(Value::as_str) == Some("apiextensions.k8s.io/v1beta1");
    let preserve = match object.pointer("/spec/preserveUnknownFields") {
        Some(Value::Bool(b)) => *b,
        None | Some(Value::Null) => legacy,
        Some(other) => {
            return Err(CheckError::Parse {
                path: path.to_path_buf(),
                message: format!("spec.preserveUnknownFields: {other} is not a boolean"),
            });
        }
    };
    Ok(CrdFacts {
        name: name.to_string(),
        preserve_unknown_fields: preserve,
    })
}

/// Reads the bundle at `dir` and checks its CSV's webhook definitions.
pub fn check_bundle(dir: &Path) -> Result<Report, CheckError> {
    let manifests = dir.join("manifests");
    let entries = std::fs::read_dir(&manifests).map_err(|source| CheckError::Read {
        path: manifests.clone(),
        source,
    })?;
    let mut paths = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| CheckError::Read {
            path: manifests.clone(),
            source,
        })?;
        let path = entry.path();
        if path.is_file() && is_manifest(&path) {
            paths.push(path);
        }
    }
    paths.sort();

    let mut csvs: Vec<(PathBuf, ClusterServiceVersion)> = Vec::new();
    let mut crds = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).map_err(|source| CheckError::Read {
            path: path.clone(),
            source,
        })?;
        let documents = yaml::documents(&text).map_err(|e| CheckError::Parse {
            path: path.clone(),
            message: e.to_string(),
        })?;
        for object in documents {
            match object.get("kind").and_then(Value::as_str) {
                Some(csv::KIND) => {
                    let csv: ClusterServiceVersion =
                        serde_json::from_value(object).map_err(|e| CheckError::Parse {
                            path: path.clone(),
                            message: format!("malformed ClusterServiceVersion: {e}"),
                        })?;
                    csvs.push((path.clone(), csv));
                }
                Some("CustomResourceDefinition") => crds.push(crd_facts(path, &object)?),
                _ => {}
            }
        }
    }
    let csv = match csvs.len() {
        0 => return Err(CheckError::NoCsv { path: manifests }),
        1 => csvs.remove(0).1,
        _ => {
            return Err(CheckError::ManyCsvs {
                path: manifests,
                names: csvs.iter().map(|(p, _)| p.display().to_string()).collect(),
            });
        }
    };
    let ours = csv.name().starts_with(&format!("{}.", release::PACKAGE));
    let paths_routed = routed_paths();
    let routes = if ours {
        Routes::Only(&paths_routed)
    } else {
        Routes::Unknown
    };
    let violations = rules::check(&csv, &crds, routes);
    Ok(Report {
        csv: csv.name().to_string(),
        files: paths.len(),
        crds: crds.into_iter().map(|c| c.name).collect(),
        violations,
    })
}
