//! Times conversion of one object, and of whole ConversionReviews of 1 and 500 stored
//! objects end to end (JSON in, converted, JSON out), in both directions.

#[path = "load/reviews.rs"]
mod reviews;

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use memcached_operator::admission::defaults::Defaults;
use memcached_operator::api::convert::convert_object;
use memcached_operator::webhook::WebhookKind;
use memcached_operator::webhook::review::answer;

fn one_object(c: &mut Criterion) {
    let beta = reviews::stored_object(0);
    let alpha = convert_object(beta.clone(), reviews::V1ALPHA1).expect("converts down");
    let mut group = c.benchmark_group("convert object");
    group.bench_function("v1beta1 to v1alpha1", |b| {
        b.iter_batched(
            || beta.clone(),
            |object| convert_object(object, reviews::V1ALPHA1),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("v1alpha1 to v1beta1", |b| {
        b.iter_batched(
            || alpha.clone(),
            |object| convert_object(object, reviews::V1BETA1),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

fn reviews_end_to_end(c: &mut Criterion) {
    let defaults = Defaults::default();
    let mut group = c.benchmark_group("conversion review");
    for count in [1, 500] {
        for (direction, body) in [
            ("down", reviews::down_review(count)),
            ("up", reviews::up_review(count)),
        ] {
            group.throughput(Throughput::Bytes(body.len() as u64));
            group.bench_function(format!("{count} objects {direction}"), |b| {
                b.iter(|| answer(WebhookKind::Conversion, black_box(&body), &defaults))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, one_object, reviews_end_to_end);
criterion_main!(benches);
