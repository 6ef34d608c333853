//! Collects what the load harness measured, checks it against the performance targets, and
//! writes it as JSON (for machines) and as a Markdown table (for the README).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::Measured;
use crate::generator::Connections;

/// Minimum, median and maximum of some samples.
#[derive(Clone, Debug)]
pub struct Spread {
    /// Every sample, in the order taken.
    pub samples: Vec<f64>,
    /// The smallest.
    pub min: f64,
    /// The median.
    pub median: f64,
    /// The largest.
    pub max: f64,
}

impl Spread {
    /// The spread of `samples` (at least one).
    pub fn of(samples: Vec<f64>) -> Spread {
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Spread {
            min: sorted[0],
            median,
            max: sorted[n - 1],
            samples,
        }
    }

    fn json(&self) -> Value {
        json!({"min": self.min, "median": self.median, "max": self.max, "samples": self.samples})
    }
}

/// What one load run against one server measured.
#[derive(Clone, Debug)]
pub struct Stats {
    requests: u64,
    errors: u64,
    seconds: f64,
    rate: f64,
    p50_ms: f64,
    p90_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    cpu_us_per_request: f64,
    rss_kib: u64,
}

impl Stats {
    fn json(&self) -> Value {
        json!({
            "requests": self.requests,
            "errors": self.errors,
            "seconds": self.seconds,
            "requests_per_second": self.rate,
            "latency_ms": {"p50": self.p50_ms, "p90": self.p90_ms, "p99": self.p99_ms, "max": self.max_ms},
            "server_cpu_us_per_request": self.cpu_us_per_request,
            "server_rss_kib": self.rss_kib,
        })
    }
}

/// One payload at one concurrency: the webhook server and the echo floor.
#[derive(Clone, Debug)]
pub struct LoadRow {
    payload: String,
    connections: Connections,
    concurrency: usize,
    webhooks: Option<Stats>,
    echo: Option<Stats>,
}

impl LoadRow {
    /// A row to fill.
    pub fn new(payload: &str, connections: Connections, concurrency: usize) -> LoadRow {
        LoadRow {
            payload: payload.to_string(),
            connections,
            concurrency,
            webhooks: None,
            echo: None,
        }
    }

    /// Records the run against `server` (`webhooks` or `echo`).
    pub fn record(&mut self, server: &str, measured: &Measured) {
        let outcome = &measured.outcome;
        let stats = Stats {
            requests: outcome.requests,
            errors: outcome.errors,
            seconds: outcome.elapsed.as_secs_f64(),
            rate: outcome.rate(),
            p50_ms: outcome.quantile_ms(0.50),
            p90_ms: outcome.quantile_ms(0.90),
            p99_ms: outcome.quantile_ms(0.99),
            max_ms: outcome.max_ms(),
            cpu_us_per_request: measured.cpu_us_per_request,
            rss_kib: measured.rss_kib,
        };
        match server {
            "echo" => self.echo = Some(stats),
            _ => self.webhooks = Some(stats),
        }
    }

    /// The webhooks' throughput as a fraction of the echo's.
    fn ratio(&self) -> Option<f64> {
        let (ours, echo) = (self.webhooks.as_ref()?, self.echo.as_ref()?);
        (echo.rate > 0.0).then(|| ours.rate / echo.rate)
    }

    fn is(&self, payload: &str, connections: Connections, concurrency: usize) -> bool {
        self.payload == payload
            && self.connections == connections
            && self.concurrency == concurrency
    }
}

/// A criterion estimate: the median time of one iteration.
#[derive(Clone, Debug)]
pub struct MicroEstimate {
    name: String,
    median_ns: f64,
}

/// Everything one `make bench` measured.
pub struct Report {
    duration: Duration,
    warm_up: Duration,
    load_average_before: String,
    /// Request and response sizes of each payload, in bytes.
    pub sizes: Vec<(String, usize, usize)>,
    /// The load runs.
    pub load: Vec<LoadRow>,
    /// `VmRSS`/`VmHWM` of the idle webhooks, KiB.
    pub idle_memory_kib: Option<(u64, u64)>,
    /// `VmRSS`/`VmHWM` of the webhooks after every load run, KiB.
    pub load_memory_kib: Option<(u64, u64)>,
    /// Start-up to ready.
    pub startup_ms: Option<Spread>,
    /// `generate`.
    pub generate_ms: Option<Spread>,
    /// Criterion's micro-benchmarks, when they ran first.
    pub micro: Vec<MicroEstimate>,
    /// Wall time of the whole harness.
    pub total_seconds: f64,
}

/// One performance target and whether it was met.
struct Target {
    name: &'static str,
    goal: String,
    measured: Option<f64>,
    unit: &'static str,
    met: bool,
}

impl Report {
    /// An empty report for runs of `duration` after `warm_up`.
    pub fn new(duration: Duration, warm_up: Duration) -> Report {
        Report {
            duration,
            warm_up,
            load_average_before: load_average(),
            sizes: Vec::new(),
            load: Vec::new(),
            idle_memory_kib: None,
            load_memory_kib: None,
            startup_ms: None,
            generate_ms: None,
            micro: Vec::new(),
            total_seconds: 0.0,
        }
    }

    fn row(&self, payload: &str, connections: Connections, concurrency: usize) -> Option<&LoadRow> {
        self.load
            .iter()
            .find(|row| row.is(payload, connections, concurrency))
    }

    fn targets(&self) -> Vec<Target> {
        let validate64 = self.row("validate", Connections::KeepAlive, 64);
        let ours64 = validate64.and_then(|row| row.webhooks.as_ref());
        let convert500 = ["convert-down-500", "convert-up-500"]
            .iter()
            .filter_map(|payload| self.row(payload, Connections::KeepAlive, 1))
            .filter_map(|row| row.webhooks.as_ref())
            .map(|stats| stats.p99_ms)
            .fold(None, |worst: Option<f64>, p99| {
                Some(worst.map_or(p99, |w| w.max(p99)))
            });
        let idle_mib = self.idle_memory_kib.map(|(rss, _)| rss as f64 / 1024.0);
        let startup = self.startup_ms.as_ref().map(|spread| spread.median);
        let at_most = |measured: Option<f64>, goal: f64| measured.is_some_and(|m| m <= goal);
        vec![
            Target {
                name: "validate, keep-alive, concurrency 64: throughput",
                goal: ">= 20000".into(),
                measured: ours64.map(|s| s.rate),
                unit: "req/s",
                met: ours64.is_some_and(|s| s.rate >= 20_000.0),
            },
            Target {
                name: "validate, keep-alive, concurrency 64: p99",
                goal: "<= 5".into(),
                measured: ours64.map(|s| s.p99_ms),
                unit: "ms",
                met: at_most(ours64.map(|s| s.p99_ms), 5.0),
            },
            Target {
                name: "validate, keep-alive, concurrency 64: errors",
                goal: "0".into(),
                measured: ours64.map(|s| s.errors as f64),
                unit: "",
                met: ours64.is_some_and(|s| s.errors == 0),
            },
            Target {
                name: "validate, keep-alive, concurrency 64: share of the TLS echo's throughput",
                goal: ">= 70".into(),
                measured: validate64.and_then(LoadRow::ratio).map(|r| r * 100.0),
                unit: "%",
                met: validate64
                    .and_then(LoadRow::ratio)
                    .is_some_and(|r| r >= 0.70),
            },
            Target {
                name: "convert 500 objects (worse direction), concurrency 1: p99",
                goal: "<= 10".into(),
                measured: convert500,
                unit: "ms",
                met: at_most(convert500, 10.0),
            },
            Target {
                name: "webhooks idle resident memory",
                goal: "<= 15".into(),
                measured: idle_mib,
                unit: "MiB",
                met: at_most(idle_mib, 15.0),
            },
            Target {
                name: "start-up to ready (median)",
                goal: "<= 50".into(),
                measured: startup,
                unit: "ms",
                met: at_most(startup, 50.0),
            },
        ]
    }

    /// The report as JSON.
    pub fn json(&self) -> Value {
        let load: Vec<Value> = self
            .load
            .iter()
            .map(|row| {
                json!({
                    "payload": row.payload,
                    "connections": row.connections.label(),
                    "concurrency": row.concurrency,
                    "webhooks": row.webhooks.as_ref().map(Stats::json),
                    "echo": row.echo.as_ref().map(Stats::json),
                    "throughput_ratio_to_echo": row.ratio(),
                })
            })
            .collect();
        let memory = |kib: Option<(u64, u64)>| {
            kib.map(|(rss, hwm)| json!({"vm_rss_kib": rss, "vm_hwm_kib": hwm}))
        };
        json!({
            "machine": machine(&self.load_average_before),
            "settings": {
                "measured_seconds_per_run": self.duration.as_secs_f64(),
                "warm_up_seconds_per_run": self.warm_up.as_secs_f64(),
                "server": "memcached-operator webhooks (release build), JSON logs at info",
                "client": "hyper HTTP/1.1 over tokio-rustls (ring), TLS 1.3, no session resumption",
            },
            "payloads": self.sizes.iter().map(|(name, request, response)| json!({
                "name": name, "request_bytes": request, "response_bytes": response
            })).collect::<Vec<_>>(),
            "load": load,
            "memory": {"idle": memory(self.idle_memory_kib), "after_load": memory(self.load_memory_kib)},
            "startup_to_ready_ms": self.startup_ms.as_ref().map(Spread::json),
            "generate_ms": self.generate_ms.as_ref().map(Spread::json),
            "micro_benchmarks_median_ns": self.micro.iter().map(|m| json!({"name": m.name, "median_ns": m.median_ns})).collect::<Vec<_>>(),
            "targets": self.targets().iter().map(|t| json!({
                "name": t.name, "goal": format!("{} {}", t.goal, t.unit).trim().to_string(),
                "measured": t.measured, "unit": t.unit, "met": t.met
            })).collect::<Vec<_>>(),
            "total_seconds": self.total_seconds,
        })
    }

    /// The report as Markdown: the machine, the load table, memory, start-up, `generate`,
    /// micro-benchmarks and targets.
    pub fn markdown(&self) -> String {
        let machine = machine(&self.load_average_before);
        let text = |key: &str| machine[key].as_str().unwrap_or("?").to_string();
        let mut out = String::new();
        out.push_str(&format!(
            "Machine: {} ({} cores), {} MiB memory, Linux {}, {}; load average before: {}.\n\
             Each run: {:.1} s measured after {:.1} s of warm-up; the load generator shares the machine.\n\n",
            text("cpu_model"),
            machine["cores"],
            machine["memory_mib"],
            text("kernel"),
            text("rustc"),
            self.load_average_before.trim(),
            self.duration.as_secs_f64(),
            self.warm_up.as_secs_f64(),
        ));
        out.push_str("| payload (request → response bytes) | connections | c | req/s | p50 ms | p90 ms | p99 ms | max ms | errors | CPU µs/req | echo req/s | echo p99 ms | vs echo |\n");
        out.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
        for row in &self.load {
            let size = self
                .sizes
                .iter()
                .find(|(name, _, _)| *name == row.payload)
                .map(|(_, request, response)| {
                    format!(" ({} → {})", human(*request), human(*response))
                })
                .unwrap_or_default();
            let ours = row.webhooks.as_ref();
            let echo = row.echo.as_ref();
            let f = |v: Option<f64>, digits: usize| {
                v.map_or("–".to_string(), |v| format!("{v:.digits$}"))
            };
            out.push_str(&format!(
                "| {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                row.payload,
                size,
                row.connections.label(),
                row.concurrency,
                f(ours.map(|s| s.rate), 0),
                f(ours.map(|s| s.p50_ms), 2),
                f(ours.map(|s| s.p90_ms), 2),
                f(ours.map(|s| s.p99_ms), 2),
                f(ours.map(|s| s.max_ms), 2),
                ours.map_or("–".into(), |s| s.errors.to_string()),
                f(ours.map(|s| s.cpu_us_per_request), 0),
                f(echo.map(|s| s.rate), 0),
                f(echo.map(|s| s.p99_ms), 2),
                row.ratio()
                    .map_or("–".into(), |r| format!("{:.0} %", r * 100.0)),
            ));
        }
        out.push('\n');
        if let (Some((rss, hwm)), Some((load_rss, load_hwm))) =
            (self.idle_memory_kib, self.load_memory_kib)
        {
            let peak = self
                .load
                .iter()
                .filter_map(|row| row.webhooks.as_ref())
                .map(|s| s.rss_kib)
                .max()
                .unwrap_or(0);
            out.push_str(&format!(
                "Resident memory of `webhooks`: idle {:.1} MiB (VmRSS; VmHWM {:.1} MiB); under load up to {:.1} MiB (VmRSS sampled mid-run); after every run VmRSS {:.1} MiB, VmHWM {:.1} MiB.\n\n",
                mib(rss), mib(hwm), mib(peak), mib(load_rss), mib(load_hwm)
            ));
        }
        if let Some(spread) = &self.startup_ms {
            out.push_str(&format!(
                "Start-up, process start to `/readyz` 200 with certificates present ({} runs): min {:.1} ms, median {:.1} ms, max {:.1} ms.\n\n",
                spread.samples.len(), spread.min, spread.median, spread.max
            ));
        }
        if let Some(spread) = &self.generate_ms {
            out.push_str(&format!(
                "`generate --output-dir TMP` ({} runs): min {:.1} ms, median {:.1} ms, max {:.1} ms.\n\n",
                spread.samples.len(), spread.min, spread.median, spread.max
            ));
        }
        if !self.micro.is_empty() {
            out.push_str("| micro-benchmark (criterion) | median |\n|---|--:|\n");
            for estimate in &self.micro {
                out.push_str(&format!(
                    "| {} | {} |\n",
                    estimate.name,
                    nanos(estimate.median_ns)
                ));
            }
            out.push('\n');
        }
        out.push_str("| target | goal | measured | met |\n|---|--:|--:|:-:|\n");
        for target in self.targets() {
            out.push_str(&format!(
                "| {} | {} {} | {} | {} |\n",
                target.name,
                target.goal,
                target.unit,
                target
                    .measured
                    .map_or("–".into(), |m| format!("{m:.1} {}", target.unit)),
                if target.met { "yes" } else { "**no**" }
            ));
        }
        out
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn human(bytes: usize) -> String {
    if bytes >= 10 * 1024 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

fn nanos(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The machine: CPU model and cores, memory, kernel, rustc, load averages.
fn machine(load_average_before: &str) -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name"))
        .and_then(|rest| rest.split_once(':'))
        .map(|(_, model)| model.trim().to_string());
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let memory_mib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|value| {
                    value
                        .trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
        })
        .map(|kib| kib / 1024);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|text| text.trim().to_string())
        .ok();
    let rustc =
        std::process::Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
            .arg("-V")
            .output()
            .ok()
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string());
    json!({
        "cpu_model": cpu_model,
        "cores": cores,
        "memory_mib": memory_mib,
        "kernel": kernel,
        "rustc": rustc,
        "load_average_before": load_average_before,
        "load_average_after": load_average(),
    })
}

/// Reads the median of every criterion benchmark under `dir` (`*/new/estimates.json`).
pub fn criterion_estimates(dir: &Path) -> Vec<MicroEstimate> {
    let mut found = Vec::new();
    collect_estimates(dir, dir, &mut found);
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

fn collect_estimates(root: &Path, dir: &Path, found: &mut Vec<MicroEstimate>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|name| name == "new") {
            let estimates = std::fs::read(path.join("estimates.json"))
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
            let benchmark = std::fs::read(path.join("benchmark.json"))
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
            if let (Some(estimates), Some(median)) = (
                &estimates,
                estimates
                    .as_ref()
                    .and_then(|e| e["median"]["point_estimate"].as_f64()),
            ) {
                let _ = estimates;
                let name = benchmark
                    .as_ref()
                    .and_then(|b| b["full_id"].as_str().map(str::to_string))
                    .unwrap_or_else(|| {
                        path.parent()
                            .and_then(|p| p.strip_prefix(root).ok())
                            .map(|p| p.display().to_string())
                            .unwrap_or_default()
                    });
                found.push(MicroEstimate {
                    name,
                    median_ns: median,
                });
            }
        } else {
            collect_estimates(root, &path, found);
        }
    }
}
