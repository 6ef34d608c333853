//! Converts Memcached objects between versions.
