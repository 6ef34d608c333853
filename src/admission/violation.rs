//! What validation says: the rules an object breaks (each a field and what is wrong with its
//! value), the refusal that names them all, and the warnings of an admitted object.

use std::fmt;

/// Warnings returned to the client with an admitted request.
pub type Warnings = Vec<String>;

/// One broken rule: the field and what is wrong with its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The field path, e.g. `spec.memcached.maxItemSize`.
    pub field: String,
    /// The value and the reason, e.g. `64m exceeds half of memoryLimitMB (64 MiB)`.
    pub message: String,
}

impl Violation {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// A refused request: every rule it breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// The whole message, as the client sees it.
    pub message: String,
    /// The broken rules, one per field.
    pub violations: Vec<Violation>,
}

impl Denial {
    pub(super) fn from_violations(violations: Vec<Violation>) -> Self {
        let message = violations
            .iter()
            .map(Violation::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        Self {
            message,
            violations,
        }
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Denial {}
