//! Holds reviews captured from real API servers, byte for byte as they were sent, and edits
//! of them: the golden inputs of the webhook's own unit tests.

use serde_json::Value;

/// An AdmissionReview as a v1.33 API server sends it for `kubectl apply` of a new Memcached
/// (uid and timestamps from a kind cluster).
pub const CREATE_REVIEW: &str = include_str!("../testdata/create-review.json");

/// A ConversionReview as the API server sends it to read a v1beta1 object as v1alpha1.
pub const CONVERSION_REVIEW: &str = include_str!("../testdata/conversion-review.json");

/// [`CREATE_REVIEW`] with its `request` edited by `edit`, as a body.
///
/// # Panics
/// Never for the committed review, which is valid JSON.
pub fn create_review_with(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut review: Value = serde_json::from_str(CREATE_REVIEW).expect("valid JSON");
    edit(&mut review["request"]);
    serde_json::to_vec(&review).expect("serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_captured_reviews_are_a_create_and_a_conversion() {
        let create: Value = serde_json::from_str(CREATE_REVIEW).expect("JSON");
        assert_eq!(create["kind"], "AdmissionReview");
        assert_eq!(create["request"]["operation"], "CREATE");
        let conversion: Value = serde_json::from_str(CONVERSION_REVIEW).expect("JSON");
        assert_eq!(conversion["kind"], "ConversionReview");
        let edited: Value =
            serde_json::from_slice(&create_review_with(|r| r["name"] = "x".into())).expect("JSON");
        assert_eq!(edited["request"]["name"], "x");
    }
}
