//! memcached-operator: runs memcached on Kubernetes, with admission and conversion webhooks,
//! and writes its own OLM bundle.

pub mod admission;
pub mod api;
pub mod operator;
pub mod telemetry;
pub mod webhook;

#[cfg(test)]
mod fixtures;
