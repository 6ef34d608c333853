//! Generates every manifest from the declarations: builds the CRD and CSV, refuses them if
//! they break an OLM rule, renders `bundle/`, `catalog/`, `config/` and the Helm chart in memory and only then
//! writes them.
//!
//! A refused generation writes nothing. A successful one is byte-identical for the same
//! options: nothing depends on the clock, the environment or iteration order.

use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::crd::MergeError;

use super::bundle::{self, Options};
use super::csv::ClusterServiceVersion;
use super::files::{Files, FilesError};
use super::rules::{self, CrdFacts, Routes, Violation};
use super::{catalog, chart, config, dashboard};
use memcached_operator::{api, webhook};

/// Why nothing was generated.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// The API's versions did not merge into one CRD.
    #[error("cannot build the CRD: {0}")]
    Crd(#[from] MergeError),
    /// An object did not convert to JSON.
    #[error("cannot build the CSV: {0}")]
    Csv(#[from] serde_json::Error),
    /// The CSV breaks OLM's rules; nothing was written.
    #[error("the CSV breaks {} OLM rule(s); nothing was written", .0.len())]
    Rules(Vec<Violation>),
    /// A file could not be rendered or written.
    #[error(transparent)]
    Files(#[from] FilesError),
}

/// The paths the webhook server routes, from the webhook table.
pub fn routed_paths() -> Vec<&'static str> {
    webhook::WEBHOOKS.iter().map(|w| w.path).collect()
}

/// What is about to be generated: the options and the objects built from them.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Images, version, date.
    pub options: Options,
    /// The CRD, every served version.
    pub crd: CustomResourceDefinition,
    /// The CSV.
    pub csv: ClusterServiceVersion,
}

impl Plan {
    /// Builds the CRD and CSV for these options.
    pub fn new(options: Options) -> Result<Self, GenerateError> {
        let crd = api::crd()?;
        let csv = bundle::cluster_service_version(&options)?;
        Ok(Self { options, crd, csv })
    }

    /// Every OLM rule the plan breaks.
    pub fn violations(&self) -> Vec<Violation> {
        let crds = [CrdFacts {
            name: self.crd.metadata.name.clone().unwrap_or_default(),
            preserve_unknown_fields: self.crd.spec.preserve_unknown_fields.unwrap_or(false),
        }];
        rules::check(&self.csv, &crds, Routes::Only(&routed_paths()))
    }

    /// Renders every file, checking the rules first.
    pub fn render(&self) -> Result<Files, GenerateError> {
        let violations = self.violations();
        if !violations.is_empty() {
            return Err(GenerateError::Rules(violations));
        }
        let mut files = bundle::files(&self.csv, &self.crd)?;
        files.extend(catalog::files(&self.csv, &self.options.bundle_image)?)?;
        files.extend(config::files(&self.crd, &self.options.images)?)?;
        files.extend(dashboard::files()?)?;
        files.extend(chart::files(&self.crd, &self.options)?)?;
        Ok(files)
    }

    /// Renders every file and writes them below `dir`; writes nothing if a rule is broken.
    pub fn write(&self, dir: &Path) -> Result<Files, GenerateError> {
        let files = self.render()?;
        files.write_to(dir)?;
        Ok(files)
    }
}
