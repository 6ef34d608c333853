//! The operator's leader cut off from the API server, by a firewall rule on its pod's traffic
//! alone, for longer than its Lease: it stops reconciling before the Lease expires, the other
//! replica takes the Lease over and reconciles, no write of either replica is ever made while
//! the other holds the Lease (every Memcached and child write in the API server's audit log,
//! by its source address and time, against the Lease's holder), and once the partition heals
//! the cut-off replica rejoins as a follower.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams};
use memcached_operator::manager::DEFAULT_LEASE_NAME;
use memcached_operator::operator;
use serde_json::Value;

use super::small_spec;
use crate::cluster::{Env, WAIT, eventually, host};

/// The node's own chain of the mangle table's INPUT (hack/lib/node-firewall.sh): a rule there
/// goes with the node, whatever happens to this test.
const NODE_INPUT_CHAIN: &str = "MEMCACHED-NODE-INPUT";

/// The node's address, where the API server listens.
const NODE_IP: &str = "10.244.0.1";

/// How long the partition lasts: well beyond the Lease's 15 s.
const PARTITION: Duration = Duration::from_secs(45);

/// The Lease's duration, as `config/` runs the operator.
const LEASE_SECONDS: i64 = 15;

/// The resources whose writes only the Lease's holder may make.
const RECONCILED: [&str; 8] = [
    "memcacheds",
    "statefulsets",
    "services",
    "poddisruptionbudgets",
    "networkpolicies",
    "certificates",
    "servicemonitors",
    "prometheusrules",
];

pub async fn the_partitioned_leader_steps_down_and_no_two_replicas_ever_write(env: Arc<Env>) {
    let namespace = env.create_namespace("fault-partition").await;
    env.create_memcached(&namespace, "before", small_spec())
        .await;
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    eventually("the StatefulSet of `before`", WAIT, || async {
        statefulsets.get_opt("before").await.ok()?.map(|_| ())
    })
    .await;
    let (leader, follower) = replicas(&env).await;
    let leader_ip = ip(&leader);
    let follower_ip = ip(&follower);
    let port = api_server_port(&env);

    let rule = [
        "-w",
        "-t",
        "mangle",
        "-I",
        NODE_INPUT_CHAIN,
        "1",
        "-s",
        &leader_ip,
        "-d",
        NODE_IP,
        "-p",
        "tcp",
        "--dport",
        &port,
        "-j",
        "DROP",
    ];
    host("iptables", &rule);
    let cut = jiff::Timestamp::now();
    let started = Instant::now();
    let healed = Heal {
        rule: rule.iter().map(|a| a.to_string()).collect(),
    };
    // Work for whoever leads meanwhile.
    env.create_memcached(&namespace, "during", small_spec())
        .await;
    let taken = eventually("the other replica reconciles `during`", WAIT, || async {
        statefulsets
            .get_opt("during")
            .await
            .ok()?
            .map(|_| started.elapsed())
    })
    .await;
    let remaining = PARTITION.saturating_sub(started.elapsed());
    tokio::time::sleep(remaining).await;
    drop(healed);
    let healed_at = jiff::Timestamp::now();

    // Once healed, the cut-off replica sees the other's Lease and follows.
    let leader_name = leader.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.deployed.namespace);
    let rejoined = eventually(
        "the cut-off replica rejoins as a follower",
        WAIT,
        || async {
            let log = pods
                .logs(&leader_name, &LogParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let lines = json_lines(&log);
            let after_heal = |line: &&Value| timestamp(line).is_some_and(|t| t >= healed_at);
            let following = lines.iter().filter(after_heal).any(|l| {
                l["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("another replica holds"))
            });
            if following {
                Ok(lines)
            } else {
                Err("not yet following".to_string())
            }
        },
    )
    .await;
    env.create_memcached(&namespace, "after", small_spec())
        .await;
    eventually("`after` is reconciled", WAIT, || async {
        statefulsets.get_opt("after").await.ok()?.map(|_| ())
    })
    .await;

    let audit = audit_events(&env);
    let leases = lease_writes(&audit, &[&leader_ip, &follower_ip]);
    let writes = reconciling_writes(&audit, &[&leader_ip, &follower_ip]);
    let mut two_writers = Vec::new();
    let mut without_manager = Vec::new();
    for write in &writes {
        if !held_by(&leases, &write.source, write.at) {
            two_writers.push(write.describe());
        }
        if write.verb != "delete"
            && !write
                .uri
                .contains(&format!("fieldManager={}", operator::NAME))
        {
            without_manager.push(write.describe());
        }
    }
    let last_renewal = leases
        .iter()
        .rfind(|l| l.source == leader_ip && l.at <= cut)
        .map(|l| l.expires)
        .expect("the leader renewed its lease before the partition");
    let stopped = rejoined
        .iter()
        .filter(|l| l["message"] == "stopped reconciling: no longer the leader")
        .filter_map(timestamp)
        .find(|t| *t >= cut);
    let taken_over = leases
        .iter()
        .find(|l| l.source == follower_ip && l.at > cut)
        .map(|l| l.at);
    let became_leader_after_heal = rejoined
        .iter()
        .filter(|l| l["message"] == "became leader")
        .filter_map(timestamp)
        .any(|t| t >= healed_at);
    eprintln!(
        "figures: the leader {leader_name} cut off from the API server for {:.0} s: it stopped \
         reconciling {} (its lease expired at {last_renewal}), the other replica took the lease \
         at {} and reconciled new work {:.1} s after the cut; {} Memcached and child writes \
         audited from both replicas, {} made while the writer did not hold the lease, {} \
         without the operator's field manager; after the heal it follows (leads again: \
         {became_leader_after_heal})",
        PARTITION.as_secs_f64(),
        stopped.map_or("never".to_string(), |t| format!("at {t}")),
        taken_over.map_or("never".to_string(), |t| t.to_string()),
        taken.as_secs_f64(),
        writes.len(),
        two_writers.len(),
        without_manager.len(),
    );
    assert!(
        !writes.is_empty(),
        "no write audited: the audit log is not read right"
    );
    let stopped = stopped.expect("the cut-off leader logged that it stopped reconciling");
    assert!(
        stopped < last_renewal,
        "the cut-off leader stopped reconciling at {stopped}, after its lease expired at \
         {last_renewal}"
    );
    assert!(
        taken_over.is_some(),
        "the other replica never took the lease"
    );
    assert!(
        two_writers.is_empty(),
        "writes by a replica not holding the lease: {two_writers:?}"
    );
    assert!(
        without_manager.is_empty(),
        "writes without the operator's field manager: {without_manager:?}"
    );
    assert!(
        !became_leader_after_heal,
        "the healed replica took the lease back"
    );
}

/// Removes the partition's rule when dropped, however the drill ends.
struct Heal {
    rule: Vec<String>,
}

impl Drop for Heal {
    fn drop(&mut self) {
        let mut rule = self.rule.clone();
        // `-I CHAIN 1` becomes `-D CHAIN`.
        if let Some(at) = rule.iter().position(|a| a == "-I") {
            rule[at] = "-D".to_string();
            rule.remove(at + 2);
        }
        let removed = std::process::Command::new("iptables").args(&rule).status();
        if !removed.is_ok_and(|s| s.success()) {
            eprintln!(
                "could not remove the partition's rule: iptables {}",
                rule.join(" ")
            );
        }
    }
}

/// The operator's two pods: the Lease's holder first.
async fn replicas(env: &Env) -> (Pod, Pod) {
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.deployed.namespace);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.deployed.namespace);
    eventually("a leader and a follower, both running", WAIT, || async {
        let holder = leases
            .get(DEFAULT_LEASE_NAME)
            .await
            .map_err(|e| e.to_string())?
            .spec
            .and_then(|s| s.holder_identity)
            .unwrap_or_default();
        let listed = pods
            .list(&ListParams::default().labels("app.kubernetes.io/name=memcached-operator"))
            .await
            .map_err(|e| e.to_string())?;
        let running: Vec<Pod> = listed
            .items
            .into_iter()
            .filter(|p| testkit::containers::pod_ip(p).is_some())
            .collect();
        let (leading, following): (Vec<Pod>, Vec<Pod>) = running.into_iter().partition(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|name| holder.starts_with(&format!("{name}_")))
        });
        match (leading.as_slice(), following.as_slice()) {
            ([leader], [follower]) => Ok((leader.clone(), follower.clone())),
            _ => Err(format!(
                "holder {holder}; {} leading, {} following",
                leading.len(),
                following.len()
            )),
        }
    })
    .await
}

fn ip(pod: &Pod) -> String {
    testkit::containers::pod_ip(pod).expect("the pod's address")
}

/// The API server's port, from the control plane's state directory.
fn api_server_port(env: &Env) -> String {
    let path = env.plane.state_dir().join("apiserver-url");
    let url =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    url.trim()
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The JSON lines of a log.
fn json_lines(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// A log line's or audit event's time.
fn timestamp(line: &Value) -> Option<jiff::Timestamp> {
    line["timestamp"].as_str()?.parse().ok()
}

/// The API server's audit events so far, of their last stage.
fn audit_events(env: &Env) -> Vec<Value> {
    let path = env.plane.audit_log();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read the audit log {}: {e}", path.display()));
    json_lines(&text)
        .into_iter()
        .filter(|event| event["stage"] == "ResponseComplete")
        .collect()
}

/// A successful write of the operator's Lease.
struct LeaseWrite {
    at: jiff::Timestamp,
    source: String,
    expires: jiff::Timestamp,
}

/// A successful write of a Memcached or a child.
struct Write {
    at: jiff::Timestamp,
    source: String,
    verb: String,
    uri: String,
}

impl Write {
    fn describe(&self) -> String {
        format!(
            "{} {} {} from {}",
            self.at, self.verb, self.uri, self.source
        )
    }
}

fn source(event: &Value) -> String {
    event["sourceIPs"][0]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn succeeded(event: &Value) -> bool {
    event["responseStatus"]["code"]
        .as_i64()
        .is_some_and(|code| (200..300).contains(&code))
}

fn received(event: &Value) -> Option<jiff::Timestamp> {
    event["requestReceivedTimestamp"].as_str()?.parse().ok()
}

/// The Lease writes from `sources`, in the order the API server answered them.
fn lease_writes(audit: &[Value], sources: &[&str]) -> Vec<LeaseWrite> {
    let mut writes: Vec<LeaseWrite> = audit
        .iter()
        .filter(|e| e["objectRef"]["resource"] == "leases")
        .filter(|e| e["objectRef"]["name"] == DEFAULT_LEASE_NAME)
        .filter(|e| sources.contains(&source(e).as_str()) && succeeded(e))
        .filter_map(|e| {
            let spec = &e["responseObject"]["spec"];
            let renewed: jiff::Timestamp = spec["renewTime"].as_str()?.parse().ok()?;
            let seconds = spec["leaseDurationSeconds"]
                .as_i64()
                .unwrap_or(LEASE_SECONDS);
            Some(LeaseWrite {
                at: e["stageTimestamp"].as_str()?.parse().ok()?,
                source: source(e),
                expires: renewed + jiff::SignedDuration::from_secs(seconds),
            })
        })
        .collect();
    writes.sort_by_key(|w| w.at);
    writes
}

/// The writes of Memcacheds and children from `sources` that the API server carried out.
fn reconciling_writes(audit: &[Value], sources: &[&str]) -> Vec<Write> {
    audit
        .iter()
        .filter(|e| {
            let resource = e["objectRef"]["resource"].as_str().unwrap_or_default();
            RECONCILED.contains(&resource)
        })
        .filter(|e| {
            ["create", "update", "patch", "delete"]
                .contains(&e["verb"].as_str().unwrap_or_default())
        })
        .filter(|e| sources.contains(&source(e).as_str()) && succeeded(e))
        .filter_map(|e| {
            Some(Write {
                at: received(e)?,
                source: source(e),
                verb: e["verb"].as_str()?.to_string(),
                uri: e["requestURI"].as_str()?.to_string(),
            })
        })
        .collect()
}

/// Whether `source` held the Lease at `at`: the last Lease write before was its own, and had
/// not expired.
fn held_by(leases: &[LeaseWrite], source: &str, at: jiff::Timestamp) -> bool {
    leases
        .iter()
        .rfind(|l| l.at <= at)
        .is_some_and(|l| l.source == source && at < l.expires)
}
