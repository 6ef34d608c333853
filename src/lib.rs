//! memcached-operator: runs memcached on Kubernetes, with admission and conversion webhooks.
//!
//! This crate holds only what runs in a cluster. It also declares, once, what the packaging
//! tool (`memcached-packager`) writes into the bundle and `config/`: the API types, the webhook
//! table and the RBAC rules.

pub mod admission;
pub mod api;
pub mod controller;
pub mod flag_bounds;
pub mod listener;
pub mod manager;
pub mod operator;
pub mod rbac;
pub mod sidecar;
pub mod telemetry;
pub mod tls;
pub mod webhook;

#[cfg(test)]
mod fixtures;
