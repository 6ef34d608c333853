//! Decides admission: defaulting and validation of Memcached objects, as pure functions.

pub mod defaults;
pub mod validate;
