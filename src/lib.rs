//! memcached-operator: runs memcached on Kubernetes, with admission and conversion webhooks,
//! and writes its own OLM bundle.

pub mod api;
pub mod operator;
pub mod webhook;
