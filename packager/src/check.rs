//! Reads a registry+v1 bundle directory from disk and runs the webhook rules of OLM v0, OLM v1
//! and this operator's server over it: the shell behind `memcached-packager check-bundle`.
//!
//! Every YAML or JSON file in `manifests/` is read; the one ClusterServiceVersion and every
//! CustomResourceDefinition are picked out. This operator's own rules (routed paths, review
//! versions) apply only when the CSV is this operator's: named `memcached-operator.v…` and
//! owning its CRD. Other operators' servers are their own business.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::csv::{self, ClusterServiceVersion};
use super::generate::routed_paths;
use super::release;
use super::rules::{self, CrdFacts, Enforcer, Routes, Violation};
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
    /// Whether it is this operator's own bundle (its own server's rules were checked too).
    pub ours: bool,
    /// Broken rules.
    pub violations: Vec<Violation>,
}

impl Report {
    /// Whether `enforcer` refuses the bundle.
    pub fn refused_by(&self, enforcer: Enforcer) -> bool {
        self.count_refused_by(enforcer) > 0
    }

    /// How many findings `enforcer` refuses.
    pub fn count_refused_by(&self, enforcer: Enforcer) -> usize {
        self.violations
            .iter()
            .filter(|v| v.refused_by(enforcer))
            .count()
    }
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
    let files = read_manifests(&manifests)?;
    check_manifests(&manifests, &files)
}

/// Reads every YAML or JSON file of a `manifests/` directory, sorted by path.
fn read_manifests(manifests: &Path) -> Result<Vec<(PathBuf, Vec<u8>)>, CheckError> {
    let entries = std::fs::read_dir(manifests).map_err(|source| CheckError::Read {
        path: manifests.to_path_buf(),
        source,
    })?;
    let mut paths = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| CheckError::Read {
            path: manifests.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        if path.is_file() && is_manifest(&path) {
            paths.push(path);
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| match std::fs::read(&path) {
            Ok(bytes) => Ok((path, bytes)),
            Err(source) => Err(CheckError::Read { path, source }),
        })
        .collect()
}

/// Checks a bundle whose `manifests/` files are already read: each file is its path (used in
/// messages) and its bytes, in the order given. [`check_bundle`] is this after reading the
/// directory; the paths need not exist.
pub fn check_manifests(
    manifests: &Path,
    files: &[(PathBuf, Vec<u8>)],
) -> Result<Report, CheckError> {
    let mut csvs: Vec<(PathBuf, ClusterServiceVersion)> = Vec::new();
    let mut crds = Vec::new();
    for (path, bytes) in files {
        let text = std::str::from_utf8(bytes).map_err(|e| CheckError::Parse {
            path: path.clone(),
            message: format!("not UTF-8: {e}"),
        })?;
        let documents = yaml::documents(text).map_err(|e| CheckError::Parse {
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
        0 => {
            return Err(CheckError::NoCsv {
                path: manifests.to_path_buf(),
            });
        }
        1 => csvs.remove(0).1,
        _ => {
            return Err(CheckError::ManyCsvs {
                path: manifests.to_path_buf(),
                names: csvs.iter().map(|(p, _)| p.display().to_string()).collect(),
            });
        }
    };
    // This operator's own bundle carries its name and owns its CRD; another operator's
    // (operator-sdk's memcached sample is also named `memcached-operator.v…`, but owns
    // memcacheds.cache.example.com) is served by another server, whose paths are its own.
    let ours = csv.name().starts_with(&format!("{}.", release::PACKAGE))
        && csv
            .spec
            .customresourcedefinitions
            .owned
            .iter()
            .any(|crd| crd.name == memcached_operator::api::CRD_NAME);
    let paths_routed = routed_paths();
    let routes = if ours {
        Routes::Only(&paths_routed)
    } else {
        Routes::Unknown
    };
    let violations = rules::check(&csv, &crds, routes);
    Ok(Report {
        csv: csv.name().to_string(),
        files: files.len(),
        crds: crds.into_iter().map(|c| c.name).collect(),
        ours,
        violations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::Options;
    use crate::generate::Plan;

    /// The generated bundle's manifests, as `check-bundle` reads them from disk.
    fn generated_manifests() -> Vec<(PathBuf, Vec<u8>)> {
        let files = Plan::new(Options::for_release())
            .and_then(|plan| plan.render())
            .expect("the generator renders");
        files
            .iter()
            .filter(|(path, _)| path.starts_with("bundle/manifests/"))
            .map(|(path, text)| (PathBuf::from(path), text.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn the_generated_manifests_break_no_rule() {
        let files = generated_manifests();
        let report = check_manifests(Path::new("bundle/manifests"), &files).expect("reads");
        assert_eq!(report.files, files.len());
        assert!(
            report.csv.starts_with("memcached-operator."),
            "{}",
            report.csv
        );
        assert_eq!(report.crds, ["memcacheds.cache.f2367556.dev"]);
        assert!(report.violations.is_empty(), "{:?}", report.violations);
    }

    #[test]
    fn a_file_that_is_not_utf8_is_named_with_the_offset() {
        let mut files = generated_manifests();
        files.push((
            PathBuf::from("manifests/latin1.yaml"),
            b"name: caf\xe9\n".to_vec(),
        ));
        let error = check_manifests(Path::new("manifests"), &files).expect_err("refused");
        assert_eq!(
            error.to_string(),
            "manifests/latin1.yaml: not UTF-8: invalid utf-8 sequence of 1 bytes from index 9"
        );
    }

    #[test]
    fn no_csv_and_two_csvs_are_errors_naming_the_directory() {
        let files: Vec<_> = generated_manifests()
            .into_iter()
            .filter(|(path, _)| !path.to_string_lossy().contains("clusterserviceversion"))
            .collect();
        let error = check_manifests(Path::new("manifests"), &files).expect_err("no CSV");
        assert_eq!(
            error.to_string(),
            "manifests: no ClusterServiceVersion found"
        );

        let mut files = generated_manifests();
        let csv = files
            .iter()
            .find(|(path, _)| path.to_string_lossy().contains("clusterserviceversion"))
            .cloned()
            .expect("a CSV");
        files.push((PathBuf::from("manifests/copy.yaml"), csv.1));
        let error = check_manifests(Path::new("manifests"), &files).expect_err("two CSVs");
        assert!(
            error
                .to_string()
                .starts_with("manifests: more than one ClusterServiceVersion ("),
            "{error}"
        );
    }
}
