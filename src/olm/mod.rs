//! Packages the operator for OLM and for plain kustomize: models the ClusterServiceVersion,
//! checks OLM's webhook rules, and writes the bundle, the file-based catalog and `config/`
//! from the Rust declarations (API types, webhook table, RBAC).
//!
//! The building blocks are pure (`csv`, `rules`, `bundle`, `catalog`, `config`); `generate`
//! and `check` are the shells that write and read files, `cli` the one that talks to a user.

pub mod bundle;
pub mod catalog;
pub mod check;
pub mod cli;
pub mod config;
pub mod csv;
pub mod deployment;
pub mod descriptors;
pub mod files;
pub mod generate;
pub mod release;
pub mod rules;
pub mod samples;
pub mod yaml;
