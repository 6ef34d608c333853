//! Bounds how many API requests the controller has in flight at once, and yields to a client
//! that is creating Memcacheds in bulk.
//!
//! On a small API server, every request the controller has in flight during a burst of
//! creates is CPU taken from the client doing the creating. Bounding the requests rather than
//! the reconciles keeps the bound exact (a reconcile writes its children at once, and a
//! reconcile that only reads its caches takes no slot) and keeps the slots busy: while one
//! reconcile computes, another's request uses the slot. Watches are not counted: they are
//! long-lived and carry no load once open.
//!
//! While new Memcacheds keep arriving at [`BURST`] a second or more, someone is creating them
//! in bulk, and that client is the one the API server should serve first: the controller
//! then sends one request at a time, and takes its full budget back a second after the
//! arrivals slow down. The work it defers is the new objects' own, which it catches up on
//! once they exist. On a 2-core control plane, `kubectl create` of 3,000 Memcacheds took 1.16
//! times as long next to the controller as alone, and every object was reconciled in 30.4 s;
//! with two requests in flight and no yielding, 1.74 times and 28.6 s; yielding with a budget
//! of two after the burst, 1.48 times and 40.8 s (docs/performance.md).

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

/// New Memcacheds per second from which a burst of creates is under way.
pub const BURST: u32 = 20;

/// The controller's budget of requests in flight.
#[derive(Debug)]
pub struct RequestBudget {
    slots: Option<Semaphore>,
    yielding: Semaphore,
    arrivals: Arrivals,
}

impl RequestBudget {
    /// A budget of `limit` requests in flight; 0 for no bound.
    pub fn new(limit: u16) -> Self {
        Self {
            slots: (limit > 0).then(|| Semaphore::new(usize::from(limit))),
            yielding: Semaphore::new(1),
            arrivals: Arrivals::default(),
        }
    }

    /// Sends `request` once a slot is free (one at a time during a burst of creates), and
    /// frees the slot when it completes.
    pub async fn spend<F: Future>(&self, request: F) -> F::Output {
        // The semaphores are never closed, so acquiring never fails; if it did, the request
        // would go out unbounded rather than not at all.
        let _turn = match self.arrivals.burst(Instant::now()) {
            true => self.yielding.acquire().await.ok(),
            false => None,
        };
        let _slot = match &self.slots {
            Some(slots) => slots.acquire().await.ok(),
            None => None,
        };
        request.await
    }

    /// Counts a Memcached seen for the first time (created, not listed).
    pub fn arrived(&self) {
        self.arrivals.arrived(Instant::now());
    }
}

/// New Memcacheds seen in the current and the previous second.
#[derive(Debug)]
struct Arrivals(Mutex<Window>);

#[derive(Debug)]
struct Window {
    start: Instant,
    current: u32,
    previous: u32,
}

impl Default for Arrivals {
    fn default() -> Self {
        Self(Mutex::new(Window {
            start: Instant::now(),
            current: 0,
            previous: 0,
        }))
    }
}

impl Arrivals {
    /// Moves the window to the second holding `now`.
    fn window(&self, now: Instant) -> std::sync::MutexGuard<'_, Window> {
        let mut window = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = now.saturating_duration_since(window.start);
        if elapsed >= Duration::from_secs(2) {
            *window = Window {
                start: now,
                current: 0,
                previous: 0,
            };
        } else if elapsed >= Duration::from_secs(1) {
            let start = window.start + Duration::from_secs(1);
            *window = Window {
                start,
                current: 0,
                previous: window.current,
            };
        }
        window
    }

    fn arrived(&self, now: Instant) {
        let mut window = self.window(now);
        window.current = window.current.saturating_add(1);
    }

    /// Whether [`BURST`] or more arrived within the current or the previous second.
    fn burst(&self, now: Instant) -> bool {
        let window = self.window(now);
        window.current.max(window.previous) >= BURST
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    async fn most_in_flight(budget: Arc<RequestBudget>, requests: usize) -> usize {
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let tasks: Vec<_> = (0..requests)
            .map(|_| {
                let (budget, now, most) = (budget.clone(), now.clone(), most.clone());
                tokio::spawn(async move {
                    budget
                        .spend(async {
                            let in_flight = now.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(in_flight, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            now.fetch_sub(1, Ordering::SeqCst);
                        })
                        .await
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("the request ran");
        }
        most.load(Ordering::SeqCst)
    }

    #[tokio::test(start_paused = true)]
    async fn no_more_than_the_limit_is_in_flight_and_every_request_is_sent() {
        assert_eq!(most_in_flight(Arc::new(RequestBudget::new(2)), 20).await, 2);
        assert_eq!(most_in_flight(Arc::new(RequestBudget::new(1)), 5).await, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn zero_means_no_bound() {
        assert_eq!(
            most_in_flight(Arc::new(RequestBudget::new(0)), 20).await,
            20
        );
    }

    #[tokio::test(start_paused = true)]
    async fn during_a_burst_of_creates_one_request_at_a_time() {
        let budget = Arc::new(RequestBudget::new(4));
        for _ in 0..BURST {
            budget.arrived();
        }
        assert_eq!(most_in_flight(budget.clone(), 8).await, 1);
        let unbounded = Arc::new(RequestBudget::new(0));
        for _ in 0..BURST {
            unbounded.arrived();
        }
        assert_eq!(most_in_flight(unbounded, 8).await, 1, "even with no bound");
    }

    #[test]
    fn a_burst_is_twenty_arrivals_within_a_second_and_ends_a_second_after_them() {
        let arrivals = Arrivals::default();
        let start = Instant::now();
        for i in 0..BURST - 1 {
            arrivals.arrived(start + Duration::from_millis(u64::from(i)));
        }
        assert!(
            !arrivals.burst(start + Duration::from_millis(100)),
            "19 is no burst"
        );
        arrivals.arrived(start + Duration::from_millis(200));
        assert!(arrivals.burst(start + Duration::from_millis(300)));
        assert!(
            arrivals.burst(start + Duration::from_millis(1500)),
            "still, the second after"
        );
        assert!(!arrivals.burst(start + Duration::from_millis(2500)), "over");
        // A steady trickle below the rate never is one.
        let trickle = Arrivals::default();
        for i in 0..100u64 {
            let now = start + Duration::from_millis(i * 100);
            trickle.arrived(now);
            assert!(!trickle.burst(now), "10 a second at {i}");
        }
    }
}
