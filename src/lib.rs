//! memcached-operator: runs memcached on Kubernetes, with admission and conversion webhooks,
//! and writes its own OLM bundle.

pub mod admission;
pub mod api;
pub mod controller;
pub mod olm;
pub mod operator;
pub mod rbac;
pub mod run;
pub mod telemetry;
pub mod webhook;
pub mod wiring;

#[cfg(test)]
mod fixtures;
