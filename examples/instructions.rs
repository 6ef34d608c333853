//! Answers one of the benchmarks' review bodies with `webhook::answer`, for counting the
//! instructions a request costs under callgrind, which is steady where wall-clock timings on
//! a shared machine are not:
//!
//! ```text
//! cargo build --release --example instructions
//! valgrind --tool=callgrind --toggle-collect=instructions::measured \
//!     target/release/examples/instructions down500 2
//! ```
//!
//! and divide the instructions collected by the repeat count. One warm-up request (thread
//! locals, lazily compiled regexes) is answered first, outside `measured`. With
//! `INSTRUCTIONS_JSON_LOGS` set, logging is set up as `webhooks --log-format json` sets it up
//! (send stdout to /dev/null).
//!
//! Usage: `instructions validate|update|mutate|down500|up500 [REPEAT]`

use std::hint::black_box;
use std::process::ExitCode;

use memcached_operator::admission::defaults::Defaults;
use memcached_operator::telemetry::{LogArgs, LogFormat, init_logging};
use memcached_operator::webhook::WebhookKind;
use memcached_operator::webhook::answer;
use testkit::process::RELATED_IMAGE;
use testkit::reviews;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let payload = args.next().unwrap_or_else(|| "validate".into());
    let repeat: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(1).max(1);
    let (kind, body) = match payload.as_str() {
        "validate" => (WebhookKind::Validating, reviews::create_review()),
        "update" => (WebhookKind::Validating, reviews::update_review()),
        "mutate" => (WebhookKind::Mutating, reviews::create_review()),
        "down500" => (WebhookKind::Conversion, reviews::down_review(500)),
        "up500" => (WebhookKind::Conversion, reviews::up_review(500)),
        other => {
            eprintln!("unknown payload {other:?}: validate, update, mutate, down500 or up500");
            return ExitCode::FAILURE;
        }
    };
    if std::env::var_os("INSTRUCTIONS_JSON_LOGS").is_some() {
        let args = LogArgs {
            log_format: LogFormat::Json,
            log_level: None,
        };
        if let Err(error) = init_logging(&args) {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    }
    let defaults = Defaults::with_related_image(Some(RELATED_IMAGE.into()));
    let warm_up = answer(kind, black_box(&body), &defaults);
    if warm_up.status != 200 {
        eprintln!("{}", String::from_utf8_lossy(&warm_up.body));
        return ExitCode::FAILURE;
    }
    let written = measured(kind, &body, &defaults, repeat);
    println!(
        "{payload}: {} bytes in, {} bytes out per request, {repeat} requests",
        body.len(),
        written / repeat
    );
    ExitCode::SUCCESS
}

/// Answers `body` `repeat` times; returns the bytes written.
#[inline(never)]
fn measured(kind: WebhookKind, body: &[u8], defaults: &Defaults, repeat: usize) -> usize {
    (0..repeat)
        .map(|_| {
            black_box(answer(kind, black_box(body), defaults))
                .body
                .len()
        })
        .sum()
}
