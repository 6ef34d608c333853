//! Builds every answer a webhook gives: admission responses (allowed, patched, denied,
//! unjudgeable), the ConversionReview response written straight into one buffer, and the
//! plain-text errors for bodies that cannot be answered with a review at all.
//!
//! Responses follow controller-runtime: an allowed request has `status.code` 200; a denial has
//! `allowed: false`, code 403, reason `Forbidden` and the validator's message; a request that
//! cannot be judged (an object of the wrong kind or shape) has `allowed: false` and code 400.

use http::StatusCode;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::{DynamicObject, Status};

use super::wire::{CONVERSION_API_VERSION, CONVERSION_KIND, ReviewError};

/// The `Content-Type` of review responses.
pub const JSON_CONTENT_TYPE: &str = "application/json";
/// The `Content-Type` of error messages.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// What an admission or conversion webhook decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Admitted unchanged (or converted).
    Allowed,
    /// Refused (or the conversion failed).
    Denied,
    /// Admitted with a JSON patch.
    Patched,
}

impl Decision {
    /// The `decision` label value.
    pub fn label(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Denied => "denied",
            Decision::Patched => "patched",
        }
    }
}

/// An answer to one webhook request body.
#[derive(Debug)]
pub struct Reply {
    /// The HTTP status.
    pub status: StatusCode,
    /// The `Content-Type` of `body`.
    pub content_type: &'static str,
    /// A serialised review, or an error message.
    pub body: Vec<u8>,
    /// What was decided, when a review was answered.
    pub decision: Option<Decision>,
}

impl Reply {
    /// A serialised review.
    pub fn review(body: Vec<u8>, decision: Decision) -> Self {
        Reply {
            status: StatusCode::OK,
            content_type: JSON_CONTENT_TYPE,
            body,
            decision: Some(decision),
        }
    }

    /// A plain-text error answer.
    pub fn error(status: StatusCode, message: impl Into<String>) -> Self {
        let mut body = message.into().into_bytes();
        body.push(b'\n');
        Reply {
            status,
            content_type: TEXT_CONTENT_TYPE,
            body,
            decision: None,
        }
    }

    /// The plain-text answer to a body that could not be answered with a review.
    pub fn from_error(error: &ReviewError) -> Self {
        Reply::error(error.status(), error.to_string())
    }
}

/// Allows `request` unchanged, with code 200.
pub fn allowed(request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request);
    response.result.code = StatusCode::OK.as_u16();
    response
}

/// Denies `request` with a validator's message: code 403, reason `Forbidden`.
pub fn forbidden(request: &AdmissionRequest<DynamicObject>, message: String) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request).deny(message);
    response.result.code = StatusCode::FORBIDDEN.as_u16();
    response.result.reason = "Forbidden".to_string();
    response
}

/// Refuses `request` because it cannot be judged (wrong kind or shape): code 400.
pub fn unjudgeable(
    request: &AdmissionRequest<DynamicObject>,
    message: String,
) -> AdmissionResponse {
    let mut response = AdmissionResponse::from(request).deny(message);
    response.result.code = StatusCode::BAD_REQUEST.as_u16();
    response
}

/// Serialises an admission response into its review.
pub fn admission_reply(
    response: AdmissionResponse,
    decision: Decision,
) -> Result<Reply, ReviewError> {
    let body = serde_json::to_vec(&response.into_review()).map_err(ReviewError::Serialize)?;
    Ok(Reply::review(body, decision))
}

/// A ConversionReview response written into one buffer: the envelope first, then each
/// converted object as it is converted, then the result. When conversion fails, the objects
/// written so far are taken out again, so nothing is half converted.
pub struct ConversionResponse {
    body: Vec<u8>,
    objects_start: usize,
    objects: usize,
}

impl ConversionResponse {
    /// Starts the response to the review `uid`, whose request was `size` bytes.
    pub fn start(uid: &str, size: usize) -> Result<Self, ReviewError> {
        // Going down, each object gains the stash annotation: a few hundred bytes.
        let mut body = Vec::with_capacity(size + size / 8 + 1024);
        body.extend_from_slice(br#"{"apiVersion":"#);
        write_json(&mut body, CONVERSION_API_VERSION)?;
        body.extend_from_slice(br#","kind":"#);
        write_json(&mut body, CONVERSION_KIND)?;
        body.extend_from_slice(br#","response":{"uid":"#);
        write_json(&mut body, uid)?;
        body.extend_from_slice(br#","convertedObjects":["#);
        let objects_start = body.len();
        Ok(ConversionResponse {
            body,
            objects_start,
            objects: 0,
        })
    }

    /// The buffer to append the next converted object to.
    pub fn next_object(&mut self) -> &mut Vec<u8> {
        if self.objects > 0 {
            self.body.push(b',');
        }
        self.objects += 1;
        &mut self.body
    }

    /// Finishes the response: every object converted.
    pub fn succeeded(self) -> Result<Reply, ReviewError> {
        self.finish(&Status::success(), Decision::Allowed)
    }

    /// Finishes the response: conversion failed with `message`, and no object is returned.
    pub fn failed(mut self, message: &str) -> Result<Reply, ReviewError> {
        self.body.truncate(self.objects_start);
        self.finish(&Status::failure(message, ""), Decision::Denied)
    }

    fn finish(mut self, result: &Status, decision: Decision) -> Result<Reply, ReviewError> {
        self.body.extend_from_slice(br#"],"result":"#);
        write_json(&mut self.body, result)?;
        self.body.extend_from_slice(b"}}");
        Ok(Reply::review(self.body, decision))
    }
}

/// Appends `value` as JSON.
fn write_json<T: serde::Serialize + ?Sized>(
    out: &mut Vec<u8>,
    value: &T,
) -> Result<(), ReviewError> {
    serde_json::to_writer(out, value).map_err(ReviewError::Serialize)
}
