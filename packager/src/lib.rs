//! Packages memcached-operator for OLM and for plain kustomize: models the
//! ClusterServiceVersion, checks OLM's webhook rules, and writes the bundle, the file-based
//! catalog and `config/` from the operator's own declarations (API types, webhook table, RBAC),
//! which it reads from the operator's library crate and never spells again.
//!
//! The building blocks are pure (`csv`, `rules`, `bundle`, `catalog`, `config`); `generate`
//! and `check` are the shells that write and read files, and `cli` the one that talks to a
//! user. Nothing here runs in a cluster: the
//! operator's image does not contain this crate.

pub mod bundle;
pub mod catalog;
pub mod certificates;
pub mod chart;
pub mod check;
pub mod cli;
pub mod config;
pub mod csv;
pub mod dashboard;
pub mod deployment;
pub mod descriptors;
pub mod files;
pub mod generate;
pub mod images;
pub mod monitoring;
pub mod network_policy;
pub mod pin;
pub mod production_sample;
pub mod registry_auth;
pub mod release;
pub mod roles;
pub mod rules;
pub mod samples;
pub mod yaml;
