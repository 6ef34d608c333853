//! Admits a metrics request only from a caller the API server authenticates (TokenReview of
//! its bearer token) and authorizes (SubjectAccessReview of the request's lowercase method on
//! its path, `get` on `/metrics` for a scrape), as controller-runtime's
//! `filters.WithAuthenticationAndAuthorization` does for kubebuilder's scaffolds.
//!
//! Answers: 401 without a bearer token or with one TokenReview rejects, 403 when
//! SubjectAccessReview does not allow it, 500 when a review cannot be made (nothing is cached
//! then), and the request goes through otherwise. Both decisions are cached, so a scrape every
//! 15 s costs no API call most of the time: an authenticated token and an allowed access for
//! [`ALLOWED_TTL`], a rejected token and a denied access for the shorter [`DENIED_TTL`] (a
//! new binding takes effect sooner than a removed one), at most [`CACHE_CAPACITY`] entries
//! each. Tokens are kept as SHA-256 digests, never in clear. Concurrent requests with the same
//! uncached token share one review. Making the calls is `reviews`' job; serving is the metrics
//! server's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use moka::Expiry;
use moka::future::Cache;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use sha2::{Digest, Sha256};

use super::reviews::{Access, ReviewError, Reviews, User};

/// How long an authenticated token and an allowed access are remembered.
pub const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a rejected token and a denied access are remembered.
pub const DENIED_TTL: Duration = Duration::from_secs(30);
/// The most tokens, and the most (user, verb, path) decisions, remembered at once.
pub const CACHE_CAPACITY: u64 = 1024;

/// How long decisions are remembered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ttls {
    /// An authenticated token, an allowed access.
    pub allowed: Duration,
    /// A rejected token, a denied access.
    pub denied: Duration,
}

impl Default for Ttls {
    fn default() -> Self {
        Ttls {
            allowed: ALLOWED_TTL,
            denied: DENIED_TTL,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReviewLabels {
    review: &'static str,
}

/// Counts the reviews the gate asks the API server for, by kind (`token`, `access`): the
/// figure that shows a cached scrape costs no call.
#[derive(Clone, Debug, Default)]
pub struct ReviewCounter {
    reviews: Family<ReviewLabels, Counter>,
}

impl ReviewCounter {
    /// Registers `metrics_auth_reviews` in `registry` (the manager's prefix makes it
    /// `memcached_operator_metrics_auth_reviews_total`).
    pub fn register(registry: &mut Registry) -> Self {
        let counter = ReviewCounter::default();
        registry.register(
            "metrics_auth_reviews",
            "TokenReviews (review=token) and SubjectAccessReviews (review=access) made to \
             admit metrics requests; cached decisions make none",
            counter.reviews.clone(),
        );
        counter
    }

    fn count(&self, review: &'static str) {
        self.reviews.get_or_create(&ReviewLabels { review }).inc();
    }

    /// The reviews of kind `review` made so far.
    pub fn get(&self, review: &'static str) -> u64 {
        self.reviews.get_or_create(&ReviewLabels { review }).get()
    }
}

/// What TokenReview said about a token.
#[derive(Clone, Debug)]
enum Identity {
    Authenticated(Arc<User>),
    Rejected,
}

/// One authorization question: this user, this verb, this path.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct AccessKey {
    user: Arc<User>,
    verb: String,
    path: String,
}

/// Remembers allowances longer than refusals.
struct ByOutcome(Ttls);

impl Expiry<[u8; 32], Identity> for ByOutcome {
    fn expire_after_create(
        &self,
        _token: &[u8; 32],
        identity: &Identity,
        _created_at: Instant,
    ) -> Option<Duration> {
        Some(match identity {
            Identity::Authenticated(_) => self.0.allowed,
            Identity::Rejected => self.0.denied,
        })
    }
}

impl Expiry<AccessKey, Access> for ByOutcome {
    fn expire_after_create(
        &self,
        _key: &AccessKey,
        access: &Access,
        _created_at: Instant,
    ) -> Option<Duration> {
        Some(match access {
            Access::Allowed => self.0.allowed,
            Access::Denied(_) => self.0.denied,
        })
    }
}

/// Why a request is not let through; each becomes controller-runtime's answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No bearer token, or one TokenReview rejected: 401.
    Unauthenticated,
    /// SubjectAccessReview did not allow it: 403, naming the user.
    Forbidden {
        /// The user name.
        user: String,
    },
    /// TokenReview could not be made: 500.
    AuthenticationFailed,
    /// SubjectAccessReview could not be made: 500, naming the user.
    AuthorizationFailed {
        /// The user name.
        user: String,
    },
}

impl Refusal {
    /// The HTTP status it is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::Unauthenticated => StatusCode::UNAUTHORIZED,
            Refusal::Forbidden { .. } => StatusCode::FORBIDDEN,
            Refusal::AuthenticationFailed | Refusal::AuthorizationFailed { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }

    fn message(&self) -> String {
        match self {
            Refusal::Unauthenticated => "Unauthorized\n".to_string(),
            Refusal::Forbidden { user } => format!("Authorization denied for user {user}\n"),
            Refusal::AuthenticationFailed => "Authentication failed\n".to_string(),
            Refusal::AuthorizationFailed { user } => {
                format!("Authorization for user {user} failed\n")
            }
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (
            self.status(),
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            )],
            self.message(),
        )
            .into_response()
    }
}

/// The bearer token of `Authorization: Bearer TOKEN` (the scheme in any case), as the API
/// server reads it; `None` for no header, another scheme or an empty token.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Authenticates and authorizes metrics requests through `R`, remembering decisions.
pub struct Gate<R> {
    reviews: R,
    identities: Cache<[u8; 32], Identity>,
    decisions: Cache<AccessKey, Access>,
    counter: ReviewCounter,
}

impl<R: Reviews> Gate<R> {
    /// A gate asking `reviews`, remembering for `ttls`, counting its calls in `counter`.
    pub fn new(reviews: R, ttls: Ttls, counter: ReviewCounter) -> Self {
        Gate {
            reviews,
            identities: Cache::builder()
                .max_capacity(CACHE_CAPACITY)
                .expire_after(ByOutcome(ttls))
                .build(),
            decisions: Cache::builder()
                .max_capacity(CACHE_CAPACITY)
                .expire_after(ByOutcome(ttls))
                .build(),
            counter,
        }
    }

    /// Lets a request with `headers` for `method path` through, or says why not.
    pub async fn admit(
        &self,
        headers: &HeaderMap,
        method: &Method,
        path: &str,
    ) -> Result<(), Refusal> {
        let token = bearer_token(headers).ok_or(Refusal::Unauthenticated)?;
        let user = match self.identify(token).await {
            Ok(Identity::Authenticated(user)) => user,
            Ok(Identity::Rejected) => {
                tracing::debug!("metrics request refused: the token was not authenticated");
                return Err(Refusal::Unauthenticated);
            }
            Err(error) => {
                tracing::warn!(error = %error, "cannot authenticate a metrics request");
                return Err(Refusal::AuthenticationFailed);
            }
        };
        let key = AccessKey {
            user: user.clone(),
            verb: method.as_str().to_ascii_lowercase(),
            path: path.to_string(),
        };
        match self.decide(key).await {
            Ok(Access::Allowed) => Ok(()),
            Ok(Access::Denied(reason)) => {
                tracing::debug!(user = %user.name, %reason, "metrics request refused");
                Err(Refusal::Forbidden {
                    user: user.name.clone(),
                })
            }
            Err(error) => {
                tracing::warn!(user = %user.name, error = %error, "cannot authorize a metrics request");
                Err(Refusal::AuthorizationFailed {
                    user: user.name.clone(),
                })
            }
        }
    }

    async fn identify(&self, token: &str) -> Result<Identity, Arc<ReviewError>> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        self.identities
            .try_get_with(digest, async {
                self.counter.count("token");
                Ok(match self.reviews.authenticate(token).await? {
                    Some(user) => Identity::Authenticated(Arc::new(user)),
                    None => Identity::Rejected,
                })
            })
            .await
    }

    async fn decide(&self, key: AccessKey) -> Result<Access, Arc<ReviewError>> {
        let question = key.clone();
        self.decisions
            .try_get_with(key, async {
                self.counter.count("access");
                self.reviews
                    .authorize(&question.user, &question.verb, &question.path)
                    .await
            })
            .await
    }
}

/// The axum middleware: answers the refusal, or runs the rest of the router.
pub async fn guard<R: Reviews>(
    State(gate): State<Arc<Gate<R>>>,
    request: Request,
    next: Next,
) -> Response {
    match gate
        .admit(request.headers(), request.method(), request.uri().path())
        .await
    {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

#[cfg(test)]
mod tests;
