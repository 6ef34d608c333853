//! Decodes review bodies: AdmissionReview (`admission.k8s.io/v1`) and ConversionReview
//! (`apiextensions.k8s.io/v1`), each with two decoders.
//!
//! The fast decoder reads a body in one pass and leaves what no rule reads as [`Lazy`] slices
//! of the body; the strict decoder reads it with kube's types, exactly as kube would. Every
//! body the fast decoder refuses goes to the strict one, so a malformed body is answered with
//! kube's own message, and `equivalence` proves that both answer every body alike. This module
//! decodes only: it neither decides nor writes responses.

pub mod admission;
pub mod conversion;
pub mod lazy;
mod metadata;

#[cfg(test)]
mod equivalence;

use http::StatusCode;
use kube::core::TypeMeta;

pub use lazy::{Expand, Lazy, Members, PathError};

/// The `apiVersion` of the ConversionReview served (kube-core keeps its own constant private).
pub const CONVERSION_API_VERSION: &str = "apiextensions.k8s.io/v1";
/// The `kind` of a ConversionReview.
pub const CONVERSION_KIND: &str = "ConversionReview";
/// The `apiVersion` of the AdmissionReview served.
pub use kube::core::admission::META_API_VERSION_V1 as ADMISSION_API_VERSION;
/// The `kind` of an AdmissionReview.
pub use kube::core::admission::META_KIND as ADMISSION_KIND;

/// Why a body could not be answered with a review at all.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The body is not JSON of the review's shape.
    #[error("malformed {expected}: {source}")]
    Malformed {
        /// The review expected, e.g. `admission.k8s.io/v1 AdmissionReview`.
        expected: String,
        /// What the decoder said.
        #[source]
        source: serde_json::Error,
    },
    /// The body is a review of another kind or version.
    #[error("expected {expected}, got {found}")]
    WrongReview {
        /// The review expected.
        expected: String,
        /// The `apiVersion` and `kind` of the body.
        found: String,
    },
    /// The review carries no request.
    #[error("{expected} has no request")]
    MissingRequest {
        /// The review expected.
        expected: String,
    },
    /// The response could not be serialised.
    #[error("cannot serialise the response: {0}")]
    Serialize(#[source] serde_json::Error),
}

impl ReviewError {
    /// The HTTP status answering this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ReviewError::Serialize(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

/// `apiVersion kind`, as messages name a review.
pub(crate) fn expected(api_version: &str, kind: &str) -> String {
    format!("{api_version} {kind}")
}

/// Turns a decoding failure into the most useful error: a review of the wrong kind or
/// version is named as such, anything else is malformed.
fn decode_error(
    body: &[u8],
    source: serde_json::Error,
    api_version: &str,
    kind: &str,
) -> ReviewError {
    match serde_json::from_slice::<TypeMeta>(body) {
        Ok(types) if types.api_version != api_version || types.kind != kind => {
            ReviewError::WrongReview {
                expected: expected(api_version, kind),
                found: expected(&types.api_version, &types.kind),
            }
        }
        _ => ReviewError::Malformed {
            expected: expected(api_version, kind),
            source,
        },
    }
}

/// Refuses a review whose `apiVersion` and `kind` are not the ones expected.
fn check_types(types: &TypeMeta, api_version: &str, kind: &str) -> Result<(), ReviewError> {
    if types.api_version == api_version && types.kind == kind {
        Ok(())
    } else {
        Err(ReviewError::WrongReview {
            expected: expected(api_version, kind),
            found: expected(&types.api_version, &types.kind),
        })
    }
}
