//! Bounds how many API requests the controller has in flight at once.
//!
//! On a small API server, every request the controller has in flight during a burst of
//! creates is CPU taken from the client doing the creating: on a 2-core control plane,
//! `kubectl create` of 1,000 Memcacheds was not slowed next to the controller with two
//! requests in flight at most (0.94×), and took twice as long with four reconciles at a time
//! (docs/performance.md).
//! Bounding the requests rather than the reconciles keeps the bound exact (a reconcile writes
//! its children at once, and a reconcile that only reads its caches takes no slot) and keeps
//! the slots busy: while one reconcile computes, another's request uses the slot. Watches
//! are not counted: they are long-lived and carry no load once open.

use std::future::Future;

use tokio::sync::Semaphore;

/// The controller's budget of requests in flight.
#[derive(Debug)]
pub struct RequestBudget(Option<Semaphore>);

impl RequestBudget {
    /// A budget of `limit` requests in flight; 0 for no bound.
    pub fn new(limit: u16) -> Self {
        Self((limit > 0).then(|| Semaphore::new(usize::from(limit))))
    }

    /// Sends `request` once a slot is free, and frees the slot when it completes.
    pub async fn spend<F: Future>(&self, request: F) -> F::Output {
        let _slot = match &self.0 {
            // The semaphore is never closed, so acquiring fails never; if it did, the request
            // would go out unbounded rather than not at all.
            Some(slots) => slots.acquire().await.ok(),
            None => None,
        };
        request.await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    async fn most_in_flight(budget: RequestBudget, requests: usize) -> usize {
        let budget = Arc::new(budget);
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
        assert_eq!(most_in_flight(RequestBudget::new(2), 20).await, 2);
        assert_eq!(most_in_flight(RequestBudget::new(1), 5).await, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn zero_means_no_bound() {
        assert_eq!(most_in_flight(RequestBudget::new(0), 20).await, 20);
    }
}
