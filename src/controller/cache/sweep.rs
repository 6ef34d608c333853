//! Looks at every cached Memcached again once per resync period, a slice at a time, without
//! keeping anything per object.
//!
//! A clean reconcile is repeated every [`RESYNC`](super::RESYNC): it reads only the caches, so
//! it costs no request unless something differs, and it repairs what a lost watch event would
//! otherwise leave. Asking kube's controller to requeue each object would keep, per object, a
//! scheduler entry and a delay-queue entry, each with a copy of the object's reference (four
//! strings): close to 1 KiB per object, for a timer. The sweep keeps nothing per object. The
//! period is divided into ticks; an object's tick is a hash of its namespace and name, and at
//! each tick the Memcacheds whose tick it is are woken from the cache. Every object is looked
//! at once per period, and the looks are spread evenly over it rather than all at once.

use std::time::Duration;

use futures::stream::{self, Stream, StreamExt};
use kube::runtime::reflector::{ObjectRef, Store};

use super::compact::hash64;
use crate::api::v1beta1::Memcached;

/// How often the sweep wakes a slice of the Memcacheds.
pub const TICK: Duration = Duration::from_secs(1);

/// The tick (of `ticks` per period) at which the object `namespace/name` is looked at again.
pub fn tick_of(namespace: &str, name: &str, ticks: u64) -> u64 {
    hash64((namespace, name)) % ticks.max(1)
}

/// The Memcacheds of `cached` whose tick `tick` is, of `ticks` per period.
pub fn due(
    cached: &[std::sync::Arc<Memcached>],
    tick: u64,
    ticks: u64,
) -> Vec<ObjectRef<Memcached>> {
    cached
        .iter()
        .filter(|m| {
            let namespace = m.metadata.namespace.as_deref().unwrap_or_default();
            let name = m.metadata.name.as_deref().unwrap_or_default();
            tick_of(namespace, name, ticks) == tick
        })
        .map(|m| ObjectRef::from(m.as_ref()))
        .collect()
}

/// Wakes every Memcached in `store` once per `period`, one slice each [`TICK`].
pub fn sweep(
    store: Store<Memcached>,
    period: Duration,
) -> impl Stream<Item = ObjectRef<Memcached>> + Send + 'static {
    let ticks = (period.as_millis() / TICK.as_millis()).max(1) as u64;
    let start = tokio::time::Instant::now() + TICK;
    let mut interval = tokio::time::interval_at(start, TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    stream::unfold(
        (store, interval, 0u64),
        move |(store, mut interval, tick)| async move {
            interval.tick().await;
            let woken = due(&store.state(), tick, ticks);
            Some((stream::iter(woken), (store, interval, (tick + 1) % ticks)))
        },
    )
    .flatten()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kube::api::ObjectMeta;

    use super::*;

    fn memcached(namespace: &str, name: &str) -> Arc<Memcached> {
        Arc::new(Memcached {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                ..ObjectMeta::default()
            },
            spec: Default::default(),
            status: None,
        })
    }

    #[test]
    fn every_object_is_due_exactly_once_per_period_and_the_ticks_share_them() {
        let cached: Vec<_> = (0..3000)
            .map(|i| memcached(&format!("ns-{}", i % 7), &format!("cache-{i}")))
            .collect();
        let ticks = 300;
        let mut seen = std::collections::HashMap::new();
        let mut busiest = 0;
        for tick in 0..ticks {
            let slice = due(&cached, tick, ticks);
            busiest = busiest.max(slice.len());
            for object in slice {
                *seen.entry(object).or_insert(0) += 1;
            }
        }
        assert_eq!(seen.len(), cached.len(), "every object is due");
        assert!(seen.values().all(|&n| n == 1), "and only once");
        assert!(
            busiest < 40,
            "no tick takes many more than 10 of 3,000: {busiest}"
        );
    }

    #[test]
    fn a_period_shorter_than_a_tick_is_one_tick() {
        let cached = vec![memcached("shop", "cache")];
        assert_eq!(due(&cached, 0, 0).len(), 1);
        assert_eq!(tick_of("shop", "cache", 0), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_sweep_wakes_each_cached_object_once_per_period() {
        let (reader, mut writer) = kube::runtime::reflector::store::<Memcached>();
        for i in 0..20 {
            writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(
                memcached("shop", &format!("cache-{i}")).as_ref().clone(),
            ));
        }
        let period = Duration::from_secs(10);
        let woken: Vec<_> = sweep(reader, period)
            .take_until(tokio::time::sleep(period + TICK / 2))
            .collect()
            .await;
        let distinct: std::collections::HashSet<_> = woken.iter().collect();
        assert_eq!(woken.len(), 20, "{woken:?}");
        assert_eq!(distinct.len(), 20);
    }
}
