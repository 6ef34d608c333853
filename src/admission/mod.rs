//! Decides what Memcached objects look like once admitted: defaults to fill in and rules to
//! enforce, as pure functions of the objects (no HTTP, no I/O, no clock).
//!
//! The webhook server and the controller's defense-in-depth path both call these, so a
//! Memcached is held to the same rules whether or not the webhooks are installed.

pub mod defaults;
pub mod issuers;
pub mod validate;
pub mod violation;

pub use defaults::{Defaults, default_spec};
pub use issuers::AllowedIssuers;
pub use validate::{
    Denial, Violation, Warnings, validate_create, validate_delete, validate_update,
};
