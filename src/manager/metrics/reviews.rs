//! Asks the API server who a bearer token belongs to (TokenReview) and whether that user may
//! read the metrics (SubjectAccessReview), behind the [`Reviews`] trait the metrics gate uses.
//!
//! This module makes one call per question and remembers nothing: caching is the gate's job
//! (`auth`), and so is deciding what a caller is answered. The trait keeps the gate testable
//! with a counting fake.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

/// How long one review may take before the scrape is answered 500 (controller-runtime's
/// TokenReview timeout).
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// An authenticated caller, as TokenReview reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct User {
    /// The user name, e.g. `system:serviceaccount:monitoring:prometheus-k8s`.
    pub name: String,
    /// The user's UID, when the authenticator gives one.
    pub uid: String,
    /// The groups the user belongs to.
    pub groups: Vec<String>,
    /// Extra attributes (a service account token's pod and node names, for instance).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What SubjectAccessReview said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// The user may.
    Allowed,
    /// The user may not (denied, or no authorizer had an opinion), with the reason given.
    Denied(String),
}

/// Why a review could not be made: the answer is unknown, so it is neither cached nor taken as
/// a refusal.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The API server refused or failed the call (RBAC missing, server down...).
    #[error("the {review} call failed: {source}")]
    Call {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
        /// What kube said.
        #[source]
        source: kube::Error,
    },
    /// The call took longer than [`REVIEW_TIMEOUT`].
    #[error("the {review} call took longer than {REVIEW_TIMEOUT:?}")]
    Timeout {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
    },
    /// The API server answered without a status.
    #[error("the {review} came back without a status")]
    NoStatus {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
    },
}

/// The two questions the metrics gate asks.
pub trait Reviews: Send + Sync + 'static {
    /// Who `token` belongs to; `None` when it is not a valid token.
    fn authenticate(
        &self,
        token: &str,
    ) -> impl Future<Output = Result<Option<User>, ReviewError>> + Send;

    /// Whether `user` may `verb` the non-resource URL `path`.
    fn authorize(
        &self,
        user: &User,
        verb: &str,
        path: &str,
    ) -> impl Future<Output = Result<Access, ReviewError>> + Send;
}

/// [`Reviews`] answered by the API server `client` talks to.
#[derive(Clone)]
pub struct ApiServerReviews {
    tokens: Api<TokenReview>,
    access: Api<SubjectAccessReview>,
}

impl ApiServerReviews {
    /// Reviews made with `client`'s identity (the operator's ServiceAccount in a cluster).
    pub fn new(client: Client) -> Self {
        ApiServerReviews {
            tokens: Api::all(client.clone()),
            access: Api::all(client),
        }
    }
}

async fn within_timeout<T>(
    review: &'static str,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, ReviewError> {
    match tokio::time::timeout(REVIEW_TIMEOUT, call).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(source)) => Err(ReviewError::Call { review, source }),
        Err(_) => Err(ReviewError::Timeout { review }),
    }
}

impl Reviews for ApiServerReviews {
    async fn authenticate(&self, token: &str) -> Result<Option<User>, ReviewError> {
        const REVIEW: &str = "TokenReview";
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let answer =
            within_timeout(REVIEW, self.tokens.create(&PostParams::default(), &review)).await?;
        let status = answer
            .status
            .ok_or(ReviewError::NoStatus { review: REVIEW })?;
        if status.authenticated != Some(true) {
            if let Some(error) = status.error.filter(|e| !e.is_empty()) {
                tracing::debug!(%error, "a metrics caller's token was not authenticated");
            }
            return Ok(None);
        }
        let user = status.user.unwrap_or_default();
        Ok(Some(User {
            name: user.username.unwrap_or_default(),
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        }))
    }

    async fn authorize(&self, user: &User, verb: &str, path: &str) -> Result<Access, ReviewError> {
        const REVIEW: &str = "SubjectAccessReview";
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb.to_string()),
                }),
                resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let answer =
            within_timeout(REVIEW, self.access.create(&PostParams::default(), &review)).await?;
        let status = answer
            .status
            .ok_or(ReviewError::NoStatus { review: REVIEW })?;
        if status.allowed {
            return Ok(Access::Allowed);
        }
        let reason = status
            .reason
            .filter(|r| !r.is_empty())
            .or(status.evaluation_error.filter(|e| !e.is_empty()))
            .unwrap_or_else(|| "no rule allows it".to_string());
        Ok(Access::Denied(reason))
    }
}
