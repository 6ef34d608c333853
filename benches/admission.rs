//! Times the admission rules alone and the admission reviews end to end (JSON in, decision,
//! JSON out), on the same fully specified Memcached the load harness sends.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use memcached_operator::admission::defaults::{Defaults, default_spec};
use memcached_operator::admission::validate::{validate_create, validate_update};
use memcached_operator::api::v1beta1::{Memcached, MemcachedSpec};
use memcached_operator::webhook::WebhookKind;
use memcached_operator::webhook::answer;
use testkit::process::RELATED_IMAGE;
use testkit::reviews;

fn defaults() -> Defaults {
    Defaults::with_related_image(Some(RELATED_IMAGE.into()))
}

fn object() -> Memcached {
    serde_json::from_value(reviews::stored_object(0)).expect("a v1beta1 Memcached")
}

fn defaulting(c: &mut Criterion) {
    let defaults = defaults();
    let sparse = MemcachedSpec {
        replicas: Some(3),
        ..MemcachedSpec::default()
    };
    let full: MemcachedSpec = serde_json::from_value(reviews::user_spec()).expect("a spec");
    let mut group = c.benchmark_group("defaulting");
    group.bench_function("sparse spec", |b| {
        b.iter(|| default_spec(black_box(&sparse), &defaults))
    });
    group.bench_function("full spec", |b| {
        b.iter(|| default_spec(black_box(&full), &defaults))
    });
    group.finish();
}

fn validation(c: &mut Criterion) {
    let old = object();
    let mut new = old.clone();
    new.spec.replicas = Some(5);
    let issuers = defaults().allowed_issuers;
    let mut group = c.benchmark_group("validation");
    group.bench_function("create", |b| {
        b.iter(|| validate_create(black_box(&new), &issuers))
    });
    group.bench_function("update", |b| {
        b.iter(|| validate_update(black_box(&old), black_box(&new), &issuers))
    });
    group.finish();
}

fn reviews_end_to_end(c: &mut Criterion) {
    let defaults = defaults();
    let create = reviews::create_review();
    let update = reviews::update_review();
    let mut group = c.benchmark_group("admission review");
    group.throughput(Throughput::Bytes(create.len() as u64));
    group.bench_function("mutate create (decode, patch, encode)", |b| {
        b.iter(|| answer(WebhookKind::Mutating, black_box(&create), &defaults))
    });
    group.bench_function("validate create", |b| {
        b.iter(|| answer(WebhookKind::Validating, black_box(&create), &defaults))
    });
    group.throughput(Throughput::Bytes(update.len() as u64));
    group.bench_function("validate update", |b| {
        b.iter(|| answer(WebhookKind::Validating, black_box(&update), &defaults))
    });
    group.finish();
}

criterion_group!(benches, defaulting, validation, reviews_end_to_end);
criterion_main!(benches);
