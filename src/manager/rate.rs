//! Spaces the controller's requests as client-go spaces a client's: a token bucket that holds
//! up to `burst` tokens and gains `qps` of them a second, one taken by each request (a watch
//! included, when it is opened). A request that finds the bucket empty waits for its token;
//! the requests behind it wait in order.
//!
//! A tower layer on the controller's client, like its bound on requests in flight: tower's own
//! `RateLimit` counts requests in fixed windows, which lets a whole window's worth through at
//! its start, where a token bucket lets `burst` through once and then spaces the rest evenly.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

/// A rate of requests: `qps` a second, `burst` at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLayer {
    qps: f64,
    burst: u32,
}

impl RateLayer {
    /// `qps` requests a second on average, up to `burst` at once (at least one).
    pub fn new(qps: f64, burst: u32) -> Self {
        Self {
            qps,
            burst: burst.max(1),
        }
    }
}

impl<S> Layer<S> for RateLayer {
    type Service = Rate<S>;

    fn layer(&self, inner: S) -> Rate<S> {
        Rate {
            inner,
            bucket: Bucket::full(self.qps, self.burst, Instant::now()),
            wait: None,
            reserved: false,
        }
    }
}

/// The tokens a client has.
#[derive(Clone, Debug, PartialEq)]
struct Bucket {
    tokens: f64,
    capacity: f64,
    per_second: f64,
    at: Instant,
}

impl Bucket {
    fn full(per_second: f64, capacity: u32, now: Instant) -> Self {
        Self {
            tokens: f64::from(capacity),
            capacity: f64::from(capacity),
            per_second,
            at: now,
        }
    }

    /// Takes a token at `now`, or says how long until one is there.
    fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let gained = now.saturating_duration_since(self.at).as_secs_f64() * self.per_second;
        self.tokens = (self.tokens + gained).min(self.capacity);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            // Rounded up to the nanosecond: once it has passed, the token is there.
            let nanos = ((1.0 - self.tokens) / self.per_second * 1e9).ceil();
            Err(Duration::from_nanos(nanos as u64))
        }
    }
}

/// A service whose calls take a token each ([`RateLayer`]).
pub struct Rate<S> {
    inner: S,
    bucket: Bucket,
    wait: Option<Pin<Box<Sleep>>>,
    reserved: bool,
}

impl<S, Request> Service<Request> for Rate<S>
where
    S: Service<Request>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while !self.reserved {
            if let Some(wait) = &mut self.wait {
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
            }
            let now = Instant::now();
            match self.bucket.take(now) {
                Ok(()) => self.reserved = true,
                Err(until) => self.wait = Some(Box::pin(tokio::time::sleep_until(now + until))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        self.reserved = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;

    /// Answers every request at once with the time it was called.
    struct Clock;

    impl Service<()> for Clock {
        type Response = Instant;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Instant, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, (): ()) -> Self::Future {
            std::future::ready(Ok(Instant::now()))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_goes_at_once_then_requests_are_spaced_at_the_rate() {
        use tower::ServiceExt;
        let start = Instant::now();
        let mut service = RateLayer::new(10.0, 3).layer(Clock);
        let mut times = Vec::new();
        for _ in 0..6 {
            let at = service.ready().await.expect("ready").call(()).await;
            times.push(at.expect("answered").duration_since(start));
        }
        let millis: Vec<u128> = times.iter().map(Duration::as_millis).collect();
        assert_eq!(millis, [0, 0, 0, 100, 200, 300]);
        // Idle for a while, the bucket fills up to the burst again, not beyond.
        tokio::time::sleep(Duration::from_secs(10)).await;
        let idle = Instant::now();
        let mut after = Vec::new();
        for _ in 0..4 {
            let at = service.ready().await.expect("ready").call(()).await;
            after.push(at.expect("answered").duration_since(idle).as_millis());
        }
        assert_eq!(after, [0, 0, 0, 100]);
    }

    #[test]
    fn the_bucket_says_how_long_until_the_next_token() {
        let start = Instant::now();
        let mut bucket = Bucket::full(4.0, 1, start);
        assert_eq!(bucket.take(start), Ok(()));
        assert_eq!(bucket.take(start), Err(Duration::from_millis(250)));
        let later = start + Duration::from_millis(100);
        let wait = bucket.take(later).expect_err("not yet");
        assert!(
            wait >= Duration::from_millis(150) && wait < Duration::from_micros(150_001),
            "{wait:?}"
        );
        assert_eq!(bucket.take(later + wait), Ok(()));
    }
}
