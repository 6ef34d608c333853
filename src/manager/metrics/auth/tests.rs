//! The gate's answers and its cache, against a fake API server that counts its reviews.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::*;

const READER_TOKEN: &str = "reader-token";
const STRANGER_TOKEN: &str = "stranger-token";
const READER: &str = "system:serviceaccount:monitoring:prometheus";
const STRANGER: &str = "system:serviceaccount:default:stranger";

/// What the fake saw and how it should behave.
#[derive(Default)]
struct Calls {
    tokens: AtomicUsize,
    access: AtomicUsize,
    asked: Mutex<Vec<(String, String, String)>>,
    failing: AtomicBool,
}

/// Knows two tokens; allows `get /metrics` to the reader only.
#[derive(Clone, Default)]
struct FakeApiServer {
    calls: Arc<Calls>,
}

fn user(name: &str) -> User {
    User {
        name: name.to_string(),
        uid: format!("uid-of-{name}"),
        groups: vec!["system:serviceaccounts".to_string()],
        extra: BTreeMap::from([("pod".to_string(), vec!["p".to_string()])]),
    }
}

impl Reviews for FakeApiServer {
    async fn authenticate(&self, token: &str) -> Result<Option<User>, ReviewError> {
        self.calls.tokens.fetch_add(1, Ordering::SeqCst);
        // Slow enough for concurrent requests to overlap.
        tokio::time::sleep(Duration::from_millis(20)).await;
        if self.calls.failing.load(Ordering::SeqCst) {
            return Err(ReviewError::Timeout {
                review: "TokenReview",
            });
        }
        Ok(match token {
            READER_TOKEN => Some(user(READER)),
            STRANGER_TOKEN => Some(user(STRANGER)),
            _ => None,
        })
    }

    async fn authorize(&self, user: &User, verb: &str, path: &str) -> Result<Access, ReviewError> {
        self.calls.access.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut asked) = self.calls.asked.lock() {
            asked.push((user.name.clone(), verb.to_string(), path.to_string()));
        }
        if self.calls.failing.load(Ordering::SeqCst) {
            return Err(ReviewError::Timeout {
                review: "SubjectAccessReview",
            });
        }
        Ok(
            if user.name == READER && verb == "get" && path == "/metrics" {
                Access::Allowed
            } else {
                Access::Denied("no binding".to_string())
            },
        )
    }
}

struct Fixture {
    gate: Gate<FakeApiServer>,
    calls: Arc<Calls>,
    counter: ReviewCounter,
}

fn fixture(ttls: Ttls) -> Fixture {
    let fake = FakeApiServer::default();
    let calls = fake.calls.clone();
    let counter = ReviewCounter::default();
    Fixture {
        gate: Gate::new(fake, ttls, counter.clone()),
        calls,
        counter,
    }
}

impl Fixture {
    fn calls(&self) -> (usize, usize) {
        (
            self.calls.tokens.load(Ordering::SeqCst),
            self.calls.access.load(Ordering::SeqCst),
        )
    }

    async fn scrape(&self, authorization: Option<&str>) -> Result<(), Refusal> {
        let mut headers = HeaderMap::new();
        if let Some(value) = authorization {
            headers.insert(
                header::AUTHORIZATION,
                HeaderValue::from_str(value).expect("a header value"),
            );
        }
        self.gate.admit(&headers, &Method::GET, "/metrics").await
    }
}

#[tokio::test]
async fn no_token_is_unauthorized_without_a_review() {
    let f = fixture(Ttls::default());
    assert_eq!(f.scrape(None).await, Err(Refusal::Unauthenticated));
    assert_eq!(f.calls(), (0, 0));
}

#[tokio::test]
async fn another_scheme_or_an_empty_token_is_unauthorized_without_a_review() {
    let f = fixture(Ttls::default());
    for value in [
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer ",
        "Bearer  x",
        READER_TOKEN,
    ] {
        assert_eq!(
            f.scrape(Some(value)).await,
            Err(Refusal::Unauthenticated),
            "{value:?}"
        );
    }
    assert_eq!(f.calls(), (0, 0));
}

#[tokio::test]
async fn a_token_the_api_server_rejects_is_unauthorized() {
    let f = fixture(Ttls::default());
    let refusal = f.scrape(Some("Bearer forged")).await;
    assert_eq!(refusal, Err(Refusal::Unauthenticated));
    assert_eq!(
        Refusal::Unauthenticated.status(),
        StatusCode::UNAUTHORIZED,
        "401"
    );
    assert_eq!(f.calls(), (1, 0), "one TokenReview, no SubjectAccessReview");
}

#[tokio::test]
async fn a_user_without_the_right_is_forbidden_by_name() {
    let f = fixture(Ttls::default());
    let refusal = f.scrape(Some(&format!("Bearer {STRANGER_TOKEN}"))).await;
    assert_eq!(
        refusal,
        Err(Refusal::Forbidden {
            user: STRANGER.to_string()
        })
    );
    let refusal = refusal.expect_err("refused");
    assert_eq!(refusal.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        refusal.message(),
        format!("Authorization denied for user {STRANGER}\n")
    );
}

#[tokio::test]
async fn a_user_with_the_right_is_admitted_after_asking_get_on_the_path() {
    let f = fixture(Ttls::default());
    assert_eq!(
        f.scrape(Some(&format!("bearer {READER_TOKEN}"))).await,
        Ok(()),
        "the scheme is read in any case"
    );
    let asked = f.calls.asked.lock().expect("the fake's record").clone();
    assert_eq!(
        asked,
        vec![(
            READER.to_string(),
            "get".to_string(),
            "/metrics".to_string()
        )]
    );
}

#[tokio::test]
async fn the_verb_is_the_lowercase_method() {
    let f = fixture(Ttls::default());
    let mut headers = HeaderMap::new();
    headers.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Bearer reader-token"),
    );
    let refusal = f.gate.admit(&headers, &Method::POST, "/metrics").await;
    assert_eq!(
        refusal,
        Err(Refusal::Forbidden {
            user: READER.to_string()
        })
    );
    let asked = f.calls.asked.lock().expect("the fake's record").clone();
    assert_eq!(asked[0].1, "post");
}

#[tokio::test]
async fn a_cached_scrape_costs_no_review() {
    let f = fixture(Ttls::default());
    let bearer = format!("Bearer {READER_TOKEN}");
    assert_eq!(f.scrape(Some(&bearer)).await, Ok(()));
    assert_eq!(f.calls(), (1, 1));
    for _ in 0..10 {
        assert_eq!(f.scrape(Some(&bearer)).await, Ok(()));
    }
    assert_eq!(f.calls(), (1, 1), "ten more scrapes, no more reviews");
    assert_eq!((f.counter.get("token"), f.counter.get("access")), (1, 1));
}

#[tokio::test]
async fn refusals_are_cached_too() {
    let f = fixture(Ttls::default());
    for _ in 0..3 {
        assert!(f.scrape(Some("Bearer forged")).await.is_err());
        assert!(
            f.scrape(Some(&format!("Bearer {STRANGER_TOKEN}")))
                .await
                .is_err()
        );
    }
    assert_eq!(f.calls(), (2, 1));
}

#[tokio::test]
async fn denials_expire_before_allowances() {
    let f = fixture(Ttls {
        allowed: Duration::from_secs(60),
        denied: Duration::from_millis(50),
    });
    let reader = format!("Bearer {READER_TOKEN}");
    let stranger = format!("Bearer {STRANGER_TOKEN}");
    assert_eq!(f.scrape(Some(&reader)).await, Ok(()));
    assert!(f.scrape(Some(&stranger)).await.is_err());
    assert_eq!(f.calls(), (2, 2));
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(f.scrape(Some(&reader)).await, Ok(()));
    assert_eq!(f.calls(), (2, 2), "the reader's decisions are still cached");
    assert!(f.scrape(Some(&stranger)).await.is_err());
    assert_eq!(f.calls(), (2, 3), "the stranger's denial was asked again");
}

#[tokio::test]
async fn allowances_expire_too() {
    let f = fixture(Ttls {
        allowed: Duration::from_millis(50),
        denied: Duration::from_millis(50),
    });
    let reader = format!("Bearer {READER_TOKEN}");
    assert_eq!(f.scrape(Some(&reader)).await, Ok(()));
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(f.scrape(Some(&reader)).await, Ok(()));
    assert_eq!(f.calls(), (2, 2));
}

#[tokio::test]
async fn a_review_that_fails_is_a_server_error_and_is_not_cached() {
    let f = fixture(Ttls::default());
    let reader = format!("Bearer {READER_TOKEN}");
    f.calls.failing.store(true, Ordering::SeqCst);
    let refusal = f.scrape(Some(&reader)).await.expect_err("refused");
    assert_eq!(refusal, Refusal::AuthenticationFailed);
    assert_eq!(refusal.status(), StatusCode::INTERNAL_SERVER_ERROR);
    f.calls.failing.store(false, Ordering::SeqCst);
    assert_eq!(f.scrape(Some(&reader)).await, Ok(()));
    assert_eq!(f.calls(), (2, 1), "the failure was asked again");
}

#[tokio::test]
async fn an_authorization_that_fails_is_a_server_error_naming_the_user() {
    let f = fixture(Ttls::default());
    let reader = format!("Bearer {READER_TOKEN}");
    assert_eq!(f.scrape(Some(&reader)).await, Ok(()));
    // Another path: not cached, and the review fails.
    f.calls.failing.store(true, Ordering::SeqCst);
    let mut headers = HeaderMap::new();
    headers.insert(
        header::AUTHORIZATION,
        HeaderValue::from_str(&reader).expect("a header value"),
    );
    let refusal = f.gate.admit(&headers, &Method::GET, "/other").await;
    assert_eq!(
        refusal,
        Err(Refusal::AuthorizationFailed {
            user: READER.to_string()
        })
    );
}

#[tokio::test]
async fn concurrent_scrapes_with_one_new_token_share_one_review() {
    let f = Arc::new(fixture(Ttls::default()));
    let reader = format!("Bearer {READER_TOKEN}");
    let scrapes = (0..8).map(|_| {
        let f = f.clone();
        let reader = reader.clone();
        tokio::spawn(async move { f.scrape(Some(&reader)).await })
    });
    for scrape in futures::future::join_all(scrapes).await {
        assert_eq!(scrape.expect("the task ran"), Ok(()));
    }
    assert_eq!(f.calls(), (1, 1));
}
