//! Times conversion of one object (its JSON in, converted JSON out, as the webhook converts
//! each object of a review), and of whole ConversionReviews of 1 and 500 stored objects end
//! to end (JSON in, converted, JSON out), in both directions.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use memcached_operator::admission::defaults::Defaults;
use memcached_operator::webhook::WebhookKind;
use memcached_operator::webhook::answer;
use memcached_operator::webhook::conversion::write_converted;
use memcached_operator::webhook::wire::conversion::ConversionObject;
use testkit::reviews;

/// Converts the JSON of one object as the webhook does: read lazily, converted, written.
fn convert_text(text: &str, desired: &str) -> Vec<u8> {
    let object: ConversionObject<'_> = serde_json::from_str(text).expect("an object");
    let mut out = Vec::with_capacity(text.len() + 1024);
    write_converted(object, desired, 0, &mut out).expect("converts");
    out
}

fn one_object(c: &mut Criterion) {
    let (v1alpha1, v1beta1) = (reviews::v1alpha1(), reviews::v1beta1());
    let beta = reviews::stored_object(0).to_string();
    let alpha = String::from_utf8(convert_text(&beta, &v1alpha1)).expect("UTF-8");
    let mut group = c.benchmark_group("convert object");
    group.bench_function("v1beta1 to v1alpha1", |b| {
        b.iter(|| convert_text(black_box(&beta), &v1alpha1))
    });
    group.bench_function("v1alpha1 to v1beta1", |b| {
        b.iter(|| convert_text(black_box(&alpha), &v1beta1))
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
