//! Measures `memcached-operator` on this machine: the webhooks under load against a TLS echo
//! of the same bytes, their memory and CPU time per request, start-up to ready, and
//! `generate`. Run by `make bench`; writes `target/bench/results.json` and
//! `target/bench/results.md` and prints the table.
//!
//! `BENCH_SECONDS` (default 1.5) sets the measured time of each load run, after
//! `BENCH_WARM_UP_SECONDS` (default 0.3) of unrecorded warm-up. `BENCH_ONLY=NAME` runs only
//! the payloads whose name starts with NAME (e.g. `validate`), and skips start-up and
//! `generate`, and writes `results-NAME.{json,md}`: handy while profiling. Invoked as
//! `load echo-server CERT_DIR RESPONSES`, the binary is the echo server instead.

mod echo;
mod generator;
mod report;
mod servers;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use memcached_operator::tls::certs::OLM_SERVING_CERTS_DIR;
use memcached_operator::webhook::{WebhookKind, webhook};
use serde_json::Value;
use testkit::cert_layout::{self, Layout};
use testkit::pki::{Ca, KeyForm};
use testkit::{procfs, reviews};

use crate::generator::{Client, Connections, Load, Outcome};
use crate::report::{LoadRow, Report, Spread};
use crate::servers::Process;

/// Concurrency and connection handling of every load run, in order.
const MODES: [(Connections, usize); 4] = [
    (Connections::KeepAlive, 1),
    (Connections::KeepAlive, 16),
    (Connections::KeepAlive, 64),
    (Connections::PerRequest, 16),
];
/// Object counts of the ConversionReviews.
const CONVERSION_SIZES: [usize; 3] = [1, 100, 500];
/// Start-ups measured.
const STARTS: usize = 20;
/// `generate` runs measured.
const GENERATES: usize = 10;

/// A request body and where it is sent.
struct Payload {
    /// Its name in tables, and its path on the echo server.
    name: String,
    /// The webhook path.
    path: &'static str,
    /// The review.
    body: Bytes,
}

fn payloads() -> Vec<Payload> {
    let mut payloads = vec![
        Payload {
            name: "validate".into(),
            path: webhook(WebhookKind::Validating).path,
            body: reviews::create_review().into(),
        },
        Payload {
            name: "mutate".into(),
            path: webhook(WebhookKind::Mutating).path,
            body: reviews::create_review().into(),
        },
    ];
    let convert = webhook(WebhookKind::Conversion).path;
    for count in CONVERSION_SIZES {
        payloads.push(Payload {
            name: format!("convert-down-{count}"),
            path: convert,
            body: reviews::down_review(count).into(),
        });
        payloads.push(Payload {
            name: format!("convert-up-{count}"),
            path: convert,
            body: reviews::up_review(count).into(),
        });
    }
    payloads
}

fn seconds_from_env(name: &str, default: f64) -> Duration {
    let seconds = std::env::var(name)
        .ok()
        .and_then(|value| value.parse::<f64>().ok())
        .filter(|seconds| *seconds > 0.0)
        .unwrap_or(default);
    Duration::from_secs_f64(seconds)
}

/// The directory results are written to: `target/bench`.
fn results_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("bench")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("echo-server") {
        let [_, _, cert_dir, responses] = &args[..] else {
            panic!("usage: load echo-server CERT_DIR RESPONSES");
        };
        echo::serve(Path::new(cert_dir), Path::new(responses));
        return;
    }
    let duration = seconds_from_env("BENCH_SECONDS", 1.5);
    let warm_up = seconds_from_env("BENCH_WARM_UP_SECONDS", 0.3);
    let started = Instant::now();
    let mut report = Report::new(duration, warm_up);

    let root = tempfile::TempDir::new().expect("a temporary OLM root");
    let ca = Ca::root();
    let leaf = ca.serving(KeyForm::EcPkcs8);
    cert_layout::write(
        root.path(),
        Layout::ServingCerts,
        &leaf.cert_pem,
        &leaf.key_pem,
    );

    let only = std::env::var("BENCH_ONLY")
        .ok()
        .filter(|only| !only.is_empty());
    if only.is_none() {
        eprintln!("start-up to ready, {STARTS} times");
        report.startup_ms = Some(Spread::of(
            (0..STARTS).map(|_| start_up_ms(root.path())).collect(),
        ));
        eprintln!("generate, {GENERATES} times");
        report.generate_ms = Some(Spread::of((0..GENERATES).map(|_| generate_ms()).collect()));
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let client = Client::new(&ca.pem);
    let operator = servers::start_operator(root.path());
    std::thread::sleep(Duration::from_millis(500));
    report.idle_memory_kib = Some(operator.memory_kib());
    eprintln!("webhooks: pid {}, {}", operator.pid(), operator.address);

    let mut payloads = payloads();
    if let Some(only) = &only {
        payloads.retain(|payload| payload.name.starts_with(only.as_str()));
    }
    let responses = tempfile::TempDir::new().expect("a responses directory");
    runtime.block_on(async {
        for payload in &payloads {
            let (request, response) = check_answer(&client, &operator, payload).await;
            report
                .sizes
                .push((payload.name.clone(), request, response.len()));
            std::fs::write(responses.path().join(&payload.name), &response)
                .expect("write a response");
        }
    });
    let echo = servers::start_echo(&root.path().join(OLM_SERVING_CERTS_DIR), responses.path());

    for payload in &payloads {
        for (connections, concurrency) in MODES {
            let mut row = LoadRow::new(&payload.name, connections, concurrency);
            for (target, process, path) in [
                ("webhooks", &operator, payload.path.to_string()),
                ("echo", &echo, format!("/{}", payload.name)),
            ] {
                let load = Load {
                    address: process.address,
                    path,
                    body: payload.body.clone(),
                    concurrency,
                    connections,
                    warm_up,
                    duration,
                };
                let measured = runtime.block_on(measure(&client, &load, process));
                eprintln!(
                    "{:<18} {:<10} c={:<3} {:<8} {:>9.0} req/s  p99 {:>7.2} ms  errors {}",
                    payload.name,
                    connections.label(),
                    concurrency,
                    target,
                    measured.outcome.rate(),
                    measured.outcome.quantile_ms(0.99),
                    measured.outcome.errors
                );
                row.record(target, &measured);
            }
            report.load.push(row);
        }
    }
    report.load_memory_kib = Some(operator.memory_kib());
    drop(echo);
    drop(operator);
    report.micro = report::criterion_estimates(&results_dir().join("../criterion"));
    report.total_seconds = started.elapsed().as_secs_f64();

    let dir = results_dir();
    std::fs::create_dir_all(&dir).expect("create target/bench");
    // A partial run keeps its results apart from the last full one.
    let stem = match &only {
        Some(only) => format!("results-{only}"),
        None => "results".to_string(),
    };
    let (json_path, markdown_path) = (
        dir.join(format!("{stem}.json")),
        dir.join(format!("{stem}.md")),
    );
    let markdown = report.markdown();
    std::fs::write(&json_path, report.json().to_string() + "\n").expect("write the JSON results");
    std::fs::write(&markdown_path, &markdown).expect("write the Markdown results");
    println!("{markdown}");
    println!(
        "wrote {} and {}",
        json_path.display(),
        markdown_path.display()
    );
}

/// Sends a payload once and checks the server admits or converts it; returns the request size
/// and the response body.
async fn check_answer(client: &Client, operator: &Process, payload: &Payload) -> (usize, Bytes) {
    let mut sender = client
        .connect(operator.address)
        .await
        .expect("a connection");
    let (status, body) = generator::post(&mut sender, payload.path, payload.body.clone())
        .await
        .expect("an answer");
    assert_eq!(
        status,
        200,
        "{}: {}",
        payload.name,
        String::from_utf8_lossy(&body)
    );
    let review: Value = serde_json::from_slice(&body).expect("a JSON review");
    let response = &review["response"];
    let accepted = response["allowed"] == Value::Bool(true)
        || response["result"]["status"] == Value::String("Success".into());
    assert!(accepted, "{} was not accepted: {response}", payload.name);
    (payload.body.len(), body)
}

/// What one load run against one process measured.
pub struct Measured {
    /// Throughput and latency.
    pub outcome: Outcome,
    /// Server CPU time (user + system) per answered request, in microseconds.
    pub cpu_us_per_request: f64,
    /// `VmRSS` of the server half-way through, in KiB.
    pub rss_kib: u64,
}

async fn measure(client: &Client, load: &Load, process: &Process) -> Measured {
    let pid = process.pid();
    let (warm_up, duration) = (load.warm_up, load.duration);
    let probe = tokio::spawn(async move {
        tokio::time::sleep(warm_up).await;
        let before = cpu_time(pid);
        tokio::time::sleep(duration / 2).await;
        let memory = procfs::memory(pid).unwrap_or_else(|error| panic!("{error}"));
        (before, memory.rss_kib)
    });
    let outcome = generator::run(client, load).await;
    let after = cpu_time(pid);
    let (before, rss_kib) = probe.await.expect("the probe");
    let answered = (outcome.requests + outcome.errors).max(1);
    Measured {
        cpu_us_per_request: after.saturating_sub(before).as_secs_f64() * 1e6 / answered as f64,
        outcome,
        rss_kib,
    }
}

/// User plus system CPU time of process `pid`.
fn cpu_time(pid: u32) -> Duration {
    procfs::cpu_time(pid).unwrap_or_else(|error| panic!("{error}"))
}

/// Time from spawning `webhooks` to `/readyz` answering 200, in milliseconds.
fn start_up_ms(cert_root: &Path) -> f64 {
    let started = Instant::now();
    let mut spawned = servers::spawn_operator(cert_root);
    let ready = servers::wait_ready(spawned.probe, Duration::from_secs(120));
    let elapsed = started.elapsed();
    let _ = spawned.child.kill();
    let _ = spawned.child.wait();
    ready.expect("the webhooks become ready");
    elapsed.as_secs_f64() * 1000.0
}

/// Wall time of `memcached-packager generate --output-dir TMP`, in milliseconds.
fn generate_ms() -> f64 {
    let packager = servers::packager();
    let output = tempfile::TempDir::new().expect("a temporary output directory");
    let started = Instant::now();
    let status = std::process::Command::new(&packager)
        .arg("generate")
        .arg("--output-dir")
        .arg(output.path())
        .env_remove("SOURCE_DATE_EPOCH")
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run generate");
    let elapsed = started.elapsed();
    assert!(status.success(), "generate failed: {status}");
    elapsed.as_secs_f64() * 1000.0
}
