//! Bounds how many API requests the controller has in flight at once, yields to a client
//! that is creating Memcacheds in bulk, and sends what can wait (Events) only when nothing
//! else is waiting.
//!
//! On a small API server, every request the controller has in flight during a burst of
//! creates is CPU taken from the client doing the creating. Bounding the requests rather than
//! the reconciles keeps the bound exact (a reconcile writes its children at once, and a
//! reconcile that only reads its caches takes no slot) and keeps the slots busy: while one
//! reconcile computes, another's request uses the slot. Watches are not counted: they are
//! long-lived and carry no load once open.
//!
//! While new Memcacheds keep arriving at [`BURST`] a second or more (seen over the last
//! [`BURST_SEEN`] arrivals, so a bulk create is known after its first handful of objects),
//! someone is creating them in bulk, and that client is the one the API server should serve
//! first. Each write the controller makes then costs the API server more than the create it
//! follows: the cluster answers it too (the StatefulSet controller reports on a new
//! StatefulSet, the endpoint controllers write an Endpoints and an EndpointSlice for a new
//! Service). So an urgent request waits for the burst to end (at most [`WINDOW`] after the
//! last arrival), one that was waiting for a slot when the burst began as well, and they go
//! with the full budget then; one that has waited [`HOLD`] goes anyway, one at a time, each
//! followed by a pause as long as it took, so that a burst that lasts still sees progress and the
//! controller never keeps the API server busy more than half the time during it. The work it
//! defers is the new objects' own, which it catches up on once they exist.
//!
//! Requests are urgent ([`RequestBudget::spend`]: children, status) or can wait
//! ([`RequestBudget::spend_when_idle`]: Events). One that can wait takes a slot only while no
//! urgent request is waiting for one and no burst is under way, so the first pass over new
//! objects writes every workload and status before the Events that describe them.
//! docs/performance.md has the measurements behind each choice.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore, SemaphorePermit};
use tokio::time::Instant;

/// New Memcacheds per second from which a burst of creates is under way.
pub const BURST: u32 = 20;

/// How many of the most recent arrivals show the rate: a burst is under way once this many
/// came within [`WINDOW`]. Few, so that the first pass over a bulk create's first objects
/// does not compete with the rest of it (`kubectl create` sends one every 2 ms or so); a
/// handful of objects applied together is held for [`WINDOW`] at most.
pub const BURST_SEEN: usize = 5;

/// The span [`BURST_SEEN`] arrivals fit in at [`BURST`] a second. A burst is over when the
/// last of them no longer do: a client creating in bulk sends its next object well within it
/// (one every few milliseconds), and one that has stopped gets the whole budget back at most
/// this long after its last object.
pub const WINDOW: Duration = Duration::from_millis(1000 * (BURST_SEEN as u64 - 1) / BURST as u64);

/// How long an urgent request waits for a burst of creates to end before it goes anyway,
/// paced. A bulk create of a thousand objects is over well within it, so its objects are
/// written after it, all at once; a longer one still sees the controller make progress.
pub const HOLD: Duration = Duration::from_secs(5);

/// How often a request that can wait looks again whether a burst is over.
const BURST_POLL: Duration = Duration::from_millis(100);

/// The controller's budget of requests in flight.
#[derive(Debug)]
pub struct RequestBudget {
    slots: Option<Semaphore>,
    yielding: Semaphore,
    /// During a burst, when the next request may be sent (after the pause that follows the
    /// previous one).
    resume_at: Mutex<Instant>,
    arrivals: Arrivals,
    /// Urgent requests waiting for their turn or a slot.
    waiting: AtomicUsize,
    /// Woken when an urgent request completes or stops waiting.
    freed: Notify,
}

impl RequestBudget {
    /// A budget of `limit` requests in flight; 0 for no bound.
    pub fn new(limit: u16) -> Self {
        Self {
            slots: (limit > 0).then(|| Semaphore::new(usize::from(limit))),
            yielding: Semaphore::new(1),
            resume_at: Mutex::new(Instant::now()),
            arrivals: Arrivals::default(),
            waiting: AtomicUsize::new(0),
            freed: Notify::new(),
        }
    }

    /// Sends `request` once a slot is free (during a burst of creates: once it is over, or
    /// past [`HOLD`] one at a time, each followed by a pause as long as it took), and frees the
    /// slot when it completes.
    pub async fn spend<F: Future>(&self, request: F) -> F::Output {
        let waiting = Waiting::new(self);
        let give_up = Instant::now() + HOLD;
        // The semaphores are never closed, so acquiring never fails; if it did, the request
        // would go out unbounded rather than not at all.
        let (turn, slot) = loop {
            let turn = match self.held_through_burst(give_up).await {
                true => {
                    let turn = self.yielding.acquire().await.ok();
                    let resume_at = *self.resume_at.lock().unwrap_or_else(|e| e.into_inner());
                    tokio::time::sleep_until(resume_at).await;
                    turn
                }
                false => None,
            };
            let slot = match &self.slots {
                Some(slots) => slots.acquire().await.ok(),
                None => None,
            };
            // A burst that began while it waited for a slot: it waits for its end too.
            if turn.is_none() && self.arrivals.burst(Instant::now()) {
                continue;
            }
            break (turn, slot);
        };
        drop(waiting);
        let sent = Instant::now();
        let output = request.await;
        if turn.is_some() {
            let now = Instant::now();
            *self.resume_at.lock().unwrap_or_else(|e| e.into_inner()) = now + (now - sent);
        }
        drop((turn, slot));
        self.freed.notify_waiters();
        output
    }

    /// Waits while a burst of creates is under way, until `give_up`; returns whether it still
    /// is (the request then goes paced).
    async fn held_through_burst(&self, give_up: Instant) -> bool {
        loop {
            let now = Instant::now();
            let Some(over) = self.arrivals.over_at(now) else {
                return false;
            };
            if now >= give_up {
                return true;
            }
            tokio::time::sleep_until(over.min(give_up)).await;
        }
    }

    /// Sends `request` once no urgent request waits for a slot and no burst of creates is
    /// under way, and frees the slot when it completes.
    pub async fn spend_when_idle<F: Future>(&self, request: F) -> F::Output {
        let slot = self.idle_slot().await;
        let output = request.await;
        drop(slot);
        self.freed.notify_waiters();
        output
    }

    async fn idle_slot(&self) -> Option<SemaphorePermit<'_>> {
        loop {
            let freed = self.freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            if self.waiting.load(Ordering::SeqCst) == 0 && !self.arrivals.burst(Instant::now()) {
                match &self.slots {
                    None => return None,
                    Some(slots) => {
                        if let Ok(slot) = slots.try_acquire() {
                            return Some(slot);
                        }
                    }
                }
            }
            tokio::select! {
                () = freed => {}
                () = tokio::time::sleep(BURST_POLL) => {}
            }
        }
    }

    /// Counts a Memcached seen for the first time (created, not listed).
    pub fn arrived(&self) {
        self.arrivals.arrived(Instant::now());
    }
}

/// Counts an urgent request as waiting until it has its slot (or is dropped while waiting).
struct Waiting<'a>(&'a RequestBudget);

impl<'a> Waiting<'a> {
    fn new(budget: &'a RequestBudget) -> Self {
        budget.waiting.fetch_add(1, Ordering::SeqCst);
        Self(budget)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.0.waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.freed.notify_waiters();
        }
    }
}

/// The most recent arrivals, newest last: at most [`BURST_SEEN`] of them.
#[derive(Debug, Default)]
struct Arrivals(Mutex<VecDeque<Instant>>);

impl Arrivals {
    fn arrived(&self, now: Instant) {
        let mut recent = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() == BURST_SEEN {
            recent.pop_front();
        }
        recent.push_back(now);
    }

    /// Whether a burst is under way: the last [`BURST_SEEN`] arrivals came within [`WINDOW`]
    /// of now.
    fn burst(&self, now: Instant) -> bool {
        self.over_at(now).is_some()
    }

    /// When the burst under way at `now` is over unless more arrive; `None` if none is.
    fn over_at(&self, now: Instant) -> Option<Instant> {
        let recent = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = recent.front().filter(|_| recent.len() == BURST_SEEN)?;
        let over = *oldest + WINDOW;
        (over > now).then_some(over)
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

    /// A budget of `limit` that has just seen a burst of creates begin.
    fn bursting(limit: u16) -> Arc<RequestBudget> {
        let budget = Arc::new(RequestBudget::new(limit));
        for _ in 0..BURST_SEEN {
            budget.arrived();
        }
        budget
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

    /// A budget of `limit` that sees new Memcacheds arrive, 50 a second, for `lasting`.
    fn bursting_for(limit: u16, lasting: Duration) -> Arc<RequestBudget> {
        let budget = bursting(limit);
        let arriving = budget.clone();
        tokio::spawn(async move {
            let end = Instant::now() + lasting;
            while Instant::now() < end {
                tokio::time::sleep(Duration::from_millis(20)).await;
                arriving.arrived();
            }
        });
        budget
    }

    #[tokio::test(start_paused = true)]
    async fn during_a_burst_of_creates_urgent_requests_wait_for_its_end() {
        let start = Instant::now();
        let budget = bursting_for(4, Duration::from_secs(1));
        assert_eq!(
            most_in_flight(budget, 8).await,
            4,
            "all at once after it, up to the limit"
        );
        // Eight requests of 10 ms, two rounds of four, sent once the last five arrivals (20 ms
        // apart) no longer fit in WINDOW.
        let elapsed = start.elapsed();
        let over = Duration::from_secs(1) + WINDOW - Duration::from_millis(80);
        assert!(
            elapsed >= over + Duration::from_millis(20)
                && elapsed <= over + Duration::from_millis(60),
            "{elapsed:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_hold_one_request_at_a_time_each_followed_by_a_pause_as_long_as_it_took() {
        let start = Instant::now();
        let budget = bursting_for(4, Duration::from_secs(20));
        assert_eq!(most_in_flight(budget, 4).await, 1);
        // Four requests of 10 ms after the hold, with a pause of 10 ms between each and the
        // next, long before the burst ends.
        let elapsed = start.elapsed();
        assert!(
            elapsed >= HOLD + Duration::from_millis(70) && elapsed < HOLD + Duration::from_secs(1),
            "{elapsed:?}"
        );
        let unbounded = bursting_for(0, Duration::from_secs(20));
        assert_eq!(most_in_flight(unbounded, 8).await, 1, "even with no bound");
        let calm = Arc::new(RequestBudget::new(4));
        let start = Instant::now();
        most_in_flight(calm, 4).await;
        assert!(
            start.elapsed() < Duration::from_millis(20),
            "no wait and no pause without a burst"
        );
    }

    /// Runs `urgent` requests and one that can wait, all sent while an urgent request holds
    /// the only slot; returns the order in which they were sent.
    async fn order_sent(budget: Arc<RequestBudget>, urgent: usize) -> Vec<String> {
        let order = Arc::new(Mutex::new(Vec::new()));
        let send = |label: String, idle: bool| {
            let (budget, order) = (budget.clone(), order.clone());
            tokio::spawn(async move {
                let request = async {
                    order.lock().expect("order").push(label);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                };
                match idle {
                    true => budget.spend_when_idle(request).await,
                    false => budget.spend(request).await,
                }
            })
        };
        let mut tasks = vec![send("first".into(), false)];
        tokio::task::yield_now().await;
        tasks.push(send("event".into(), true));
        tokio::task::yield_now().await;
        tasks.extend((0..urgent).map(|i| send(format!("urgent {i}"), false)));
        for task in tasks {
            task.await.expect("the request ran");
        }
        order.lock().expect("order").clone()
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_can_wait_goes_after_every_urgent_one_waiting() {
        let order = order_sent(Arc::new(RequestBudget::new(1)), 3).await;
        assert_eq!(
            order,
            ["first", "urgent 0", "urgent 1", "urgent 2", "event"]
        );
        let order = order_sent(Arc::new(RequestBudget::new(1)), 0).await;
        assert_eq!(order, ["first", "event"], "and goes when none is");
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_can_wait_waits_for_the_end_of_a_burst() {
        let budget = bursting(0);
        let start = Instant::now();
        budget.spend_when_idle(async {}).await;
        let waited = start.elapsed();
        assert!(
            waited >= WINDOW && waited <= WINDOW + BURST_POLL,
            "sent {waited:?} after the last arrival"
        );
        let start = Instant::now();
        budget.spend_when_idle(async {}).await;
        assert_eq!(start.elapsed(), Duration::ZERO, "at once when calm");
    }

    #[test]
    fn a_burst_is_five_arrivals_at_twenty_a_second_and_ends_when_they_stop() {
        assert_eq!(WINDOW, Duration::from_millis(200));
        let arrivals = Arrivals::default();
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        for i in 0..4 {
            arrivals.arrived(at(i * 10));
        }
        assert!(!arrivals.burst(at(30)), "4 is no burst");
        arrivals.arrived(at(40));
        assert!(arrivals.burst(at(100)), "5 within 40 ms is");
        assert!(
            arrivals.burst(at(199)),
            "until the oldest of the five is 200 ms old"
        );
        assert!(!arrivals.burst(at(200)), "over once they stop");
        // Arrivals that go on at the rate start it again at once and keep it going.
        for i in 0..100u64 {
            arrivals.arrived(at(500 + i * 30));
            let now = at(500 + i * 30 + 1);
            assert_eq!(
                arrivals.burst(now),
                i >= 4,
                "33 a second, {} arrivals",
                i + 1
            );
        }
        // A steady trickle below the rate never is one, however long it lasts.
        let trickle = Arrivals::default();
        for i in 0..100u64 {
            trickle.arrived(at(i * 60));
            assert!(!trickle.burst(at(i * 60)), "about 17 a second at {i}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_waiting_for_a_slot_when_a_burst_begins_waits_for_its_end() {
        let budget = Arc::new(RequestBudget::new(1));
        let first = budget.clone();
        let holding = tokio::spawn(async move {
            first
                .spend(tokio::time::sleep(Duration::from_millis(50)))
                .await;
        });
        tokio::task::yield_now().await;
        let start = Instant::now();
        let second = budget.clone();
        let waiting = tokio::spawn(async move { second.spend(async { Instant::now() }).await });
        tokio::task::yield_now().await;
        for _ in 0..BURST_SEEN {
            budget.arrived();
        }
        holding.await.expect("the first request ran");
        let sent = waiting.await.expect("the second request ran");
        assert_eq!(
            sent - start,
            WINDOW,
            "sent when the burst that began while it waited was over, not when the slot freed"
        );
    }
}
