//! A real Prometheus scrapes memcached: the Prometheus Operator and the Prometheus it runs,
//! both rebuilt here from their pinned sources (`hack/images.sh`: prometheus,
//! prometheus-operator, prometheus-config-reloader), on the node, with the Prometheus
//! Operator's own CRDs and ClusterRoles. A Memcached whose servers serve TLS only, require
//! client certificates and authentication asks for a ServiceMonitor and its alerting rules;
//! Prometheus scrapes both servers' exporters through it, and their certificate refreshers,
//! stats relays and supervisors, reads what a client stored and the refreshers' view of the
//! certificate (the serial each server presents, its notAfter), loads the Memcached's
//! PrometheusRule, and fires `MemcachedDown` for the one server that is stopped (SIGSTOP: its
//! kernel still completes the kubelet's TCP probes, so only the metrics tell), and for no
//! other; the alert ends when the server goes on. An auth file memcached would refuse is never
//! sent to it, and `MemcachedAuthFileRefused` fires from the supervisors' metrics while the
//! servers keep the credentials they had.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::containers::memcached_pid;
use testkit::memcache::{Connection, Tls};
use testkit::pki::Ca;

use crate::cluster::{
    Env, WAIT, count_items, eventually, host, image_reference, pod_address, set_items,
};
use crate::secured::{client_data, create_auth_secret, create_secret, pod, tls_data};

/// Where the Prometheus Operator and Prometheus run.
const MONITORING: &str = "monitoring";
/// The label the Prometheus selects ServiceMonitors and PrometheusRules by.
const SELECTED: (&str, &str) = ("monitored-by", "node-prometheus");
const USER: &str = "prometheus-scenario";
const PASSWORD: &str = "scraped-5e1f";
/// Items a client stores on the first server.
const ITEMS: usize = 25;
/// How long the alert takes at most: a scrape (5 s), `for: 1m`, an evaluation (5 s), and the
/// rule's first evaluations after the stop.
const ALERT_WAIT: Duration = Duration::from_secs(240);

pub async fn prometheus_scrapes_the_servers_and_fires_the_down_alert_for_a_stopped_one(
    env: Arc<Env>,
) {
    let started = Instant::now();
    tokio::task::spawn_blocking(|| {
        testkit::images::build(&[
            "prometheus",
            "prometheus-operator",
            "prometheus-config-reloader",
        ])
    })
    .await
    .expect("the image build")
    .unwrap_or_else(|error| panic!("{error}"));
    let tools = testkit::repository::root().join(".tools/prometheus-operator");
    apply_established(&env, &tools.join("crds"));
    kubectl(
        &env,
        &["apply", "--server-side", "-f", &path(&tools.join("rbac"))],
        None,
    );
    env.create_namespace(MONITORING).await;
    kubectl(&env, &["apply", "-f", "-"], Some(&stack()));

    let namespace = env.create_namespace("scraped").await;
    let name = "cache";
    let ca = Ca::root();
    let server = ca.serving_for(&[&format!("*.{name}.{namespace}.svc")]);
    create_secret(&env, &namespace, "cache-tls", tls_data(&server, &ca)).await;
    create_auth_secret(&env, &namespace, "cache-auth", USER, PASSWORD).await;
    create_secret(
        &env,
        &namespace,
        "sidecars-tls",
        client_data(&ca.client("memcached-sidecars")),
    )
    .await;
    let selected = json!({ SELECTED.0: SELECTED.1 });
    let memcacheds = env
        .create_memcached(
            &namespace,
            name,
            json!({
                "replicas": 2,
                "memcached": { "memoryLimitMB": 16 },
                "resources": { "limits": { "memory": "64Mi" } },
                "tls": {
                    "secretName": "cache-tls",
                    "clientAuth": "Require",
                    "clientSecretName": "sidecars-tls",
                },
                "auth": { "secretName": "cache-auth" },
                "monitoring": {
                    "serviceMonitor": { "interval": "5s", "labels": selected },
                    "rules": { "labels": selected },
                },
            }),
        )
        .await;
    eventually(&format!("{name}'s two servers ready"), WAIT, || async {
        let status = memcacheds.get(name).await.ok()?.data["status"].clone();
        (status["readyReplicas"] == json!(2)).then_some(())
    })
    .await;

    // What a client stores on the first server, through TLS, its certificate and the
    // credentials.
    let first = pod(&env, &namespace, &format!("{name}-0")).await;
    let client = ca.serving_for(&["memcached-client"]);
    let tls = Tls::new(
        &ca.pem,
        &format!("{name}-0.{name}.{namespace}.svc"),
        Some(&client),
    );
    let mut connection = Connection::open(pod_address(&first, 11211), Some(&tls))
        .await
        .expect("a TLS connection with a client certificate");
    assert_eq!(
        connection.authenticate(USER, PASSWORD).await.as_deref(),
        Ok("STORED\r\n")
    );
    set_items(&mut connection, "key", ITEMS).await;

    let prometheus = eventually("Prometheus ready", WAIT, || async {
        let pod = env
            .pods(MONITORING, "app.kubernetes.io/name=prometheus")
            .await
            .into_iter()
            .next()?;
        let address = testkit::containers::pod_ip(&pod)?.parse().ok()?;
        let address = SocketAddr::new(address, 9090);
        let (status, _) = testkit::client::plain_get(address, "/-/ready").await.ok()?;
        (status == 200).then_some(address)
    })
    .await;
    eprintln!(
        "prometheus: the Prometheus Operator's Prometheus ready after {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let servers = |query: Value| -> Vec<(String, String)> {
        query["data"]["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|series| {
                series["metric"]["namespace"] == json!(namespace)
                    && series["metric"]["service"] == json!(name)
            })
            .map(|series| {
                (
                    series["metric"]["pod"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    series["value"][1].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    };
    let scraped = Instant::now();
    let up = eventually("both servers scraped and up", WAIT, || async {
        let mut up = servers(api(prometheus, "/api/v1/query?query=memcached_up").await?);
        up.sort();
        (up.len() == 2 && up.iter().all(|(_, value)| value == "1")).then_some(up)
    })
    .await;
    assert_eq!(
        up.iter().map(|(pod, _)| pod.as_str()).collect::<Vec<_>>(),
        [format!("{name}-0"), format!("{name}-1")],
        "one series a server, labelled with its pod"
    );
    // Each server's exporter, and its refresher and relay, which serve their own metrics.
    let targets = eventually("every target of both pods up", WAIT, || async {
        let targets = api(prometheus, "/api/v1/targets?state=active").await?;
        let mut ours: Vec<(String, String, String, String)> = targets["data"]["activeTargets"]
            .as_array()?
            .iter()
            .filter(|target| {
                target["labels"]["namespace"] == json!(namespace)
                    && target["labels"]["service"] == json!(name)
            })
            .map(|target| {
                let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
                (
                    text(&target["labels"]["pod"]),
                    text(&target["labels"]["endpoint"]),
                    text(&target["health"]),
                    text(&target["scrapePool"]),
                )
            })
            .collect();
        ours.sort();
        (ours.len() == 8 && ours.iter().all(|(_, _, health, _)| health == "up")).then_some(ours)
    })
    .await;
    let pool = |index: usize| format!("serviceMonitor/{namespace}/{name}/{index}");
    let expected: Vec<(String, String, String, String)> = [0, 1]
        .into_iter()
        .flat_map(|server| {
            [
                ("metrics", 0),
                ("refresh-health", 1),
                ("relay-health", 2),
                ("supervisor", 3),
            ]
            .map(|(endpoint, index)| {
                (
                    format!("{name}-{server}"),
                    endpoint.to_string(),
                    "up".to_string(),
                    pool(index),
                )
            })
        })
        .collect();
    assert_eq!(
        targets, expected,
        "the exporter, the refresher, the relay and the supervisor of each server, scraped \
         through the Memcached's ServiceMonitor"
    );
    let (_, _, not_after) = memcached_operator::tls::certs::parse_chain(
        Path::new("tls.crt"),
        server.cert_pem.as_bytes(),
    )
    .expect("the server's certificate");
    let refresher = eventually("the refreshers' metrics in Prometheus", WAIT, || async {
        let pending = servers(
            api(
                prometheus,
                "/api/v1/query?query=memcached_certificate_refresh_pending",
            )
            .await?,
        );
        let expiry = servers(
            api(
                prometheus,
                "/api/v1/query?query=memcached_certificate_expiry_timestamp_seconds",
            )
            .await?,
        );
        (pending.len() == 2 && pending.iter().all(|(_, value)| value == "0"))
            .then_some((pending, expiry))
    })
    .await;
    assert_eq!(
        refresher
            .1
            .iter()
            .map(|(_, value)| value.as_str())
            .collect::<Vec<_>>(),
        [not_after.to_string(), not_after.to_string()],
        "each refresher reports the mounted certificate's notAfter"
    );
    let items = eventually("the stored items in Prometheus", WAIT, || async {
        let items = servers(api(prometheus, "/api/v1/query?query=memcached_current_items").await?);
        let first = items
            .into_iter()
            .find(|(pod, _)| *pod == format!("{name}-0"))?;
        (first.1 == ITEMS.to_string()).then_some(first.1)
    })
    .await;
    eprintln!(
        "prometheus: both servers up in Prometheus {:.1} s after it was ready; \
         memcached_current_items of {name}-0 is {items} (stored {ITEMS})",
        scraped.elapsed().as_secs_f64()
    );

    let rules = eventually("the Memcached's alerting rules loaded", WAIT, || async {
        let rules = api(prometheus, "/api/v1/rules?type=alert").await?;
        let names: Vec<String> = rules["data"]["groups"]
            .as_array()?
            .iter()
            .filter(|group| group["name"] == json!(format!("memcached.{namespace}.{name}")))
            .flat_map(|group| group["rules"].as_array().cloned().unwrap_or_default())
            .filter_map(|rule| rule["name"].as_str().map(str::to_string))
            .collect();
        names
            .contains(&"MemcachedDown".to_string())
            .then_some(names)
    })
    .await;
    eprintln!("prometheus: the Memcached's PrometheusRule loaded: {rules:?}");

    // Stop the first server; its kernel still accepts connections, so the kubelet's TCP
    // probes pass and the pod stays in its Service: only its metrics say it does not answer.
    let first = pod(&env, &namespace, &format!("{name}-0")).await;
    let stopped = Stopped::new(memcached_pid(&first).expect("memcached's process"));
    let since = Instant::now();
    let firing = eventually("MemcachedDown firing", ALERT_WAIT, || async {
        let alerts = alerts(prometheus, "MemcachedDown", &namespace, name).await?;
        alerts
            .iter()
            .any(|(_, state)| state == "firing")
            .then_some(alerts)
    })
    .await;
    let fired_after = since.elapsed();
    assert_eq!(
        firing,
        [(format!("{name}-0"), "firing".to_string())],
        "the alert fires for the stopped server, and for it alone"
    );
    let restarts =
        crate::cluster::memcached_status(&pod(&env, &namespace, &format!("{name}-0")).await)
            .map(|status| status.restart_count);
    drop(stopped);
    let resumed = Instant::now();
    eventually("MemcachedDown ended", ALERT_WAIT, || async {
        let alerts = alerts(prometheus, "MemcachedDown", &namespace, name).await?;
        alerts.is_empty().then_some(())
    })
    .await;
    let up = servers(
        api(prometheus, "/api/v1/query?query=memcached_up")
            .await
            .expect("memcached_up"),
    );
    eprintln!(
        "prometheus: MemcachedDown fired {:.1} s after {name}-0's memcached was stopped \
         (memcached's restarts meanwhile: {restarts:?}), ended {:.1} s after it went on; \
         memcached_up {up:?}",
        fired_after.as_secs_f64(),
        resumed.elapsed().as_secs_f64()
    );
    assert_eq!(
        restarts,
        Some(0),
        "a stopped server is not restarted by its probes"
    );
    assert_eq!(
        count_items(&mut connection, "key", ITEMS).await,
        ITEMS,
        "the stopped server kept its items"
    );

    // An auth file memcached would refuse (a blank line): never sent, and said by the
    // supervisor's metrics, on which MemcachedAuthFileRefused fires for both servers.
    let accepted = servers(
        api(
            prometheus,
            "/api/v1/query?query=memcached_auth_file_refused",
        )
        .await
        .expect("memcached_auth_file_refused"),
    );
    assert_eq!(
        accepted
            .iter()
            .map(|(_, value)| value.as_str())
            .collect::<Vec<_>>(),
        ["0", "0"],
        "both supervisors find the auth file one memcached reads: {accepted:?}"
    );
    let changed = Instant::now();
    kubectl(
        &env,
        &[
            "patch",
            "secret",
            "cache-auth",
            "-n",
            &namespace,
            "--type=merge",
            "-p",
            &json!({ "stringData": { "authfile": format!("{USER}:{PASSWORD}\n\nother:secret\n") } })
                .to_string(),
        ],
        None,
    );
    let refused = eventually("MemcachedAuthFileRefused firing", ALERT_WAIT, || async {
        let alerts = alerts(prometheus, "MemcachedAuthFileRefused", &namespace, name).await?;
        (alerts.len() == 2 && alerts.iter().all(|(_, state)| state == "firing")).then_some(alerts)
    })
    .await;
    assert_eq!(
        refused,
        [
            (format!("{name}-0"), "firing".to_string()),
            (format!("{name}-1"), "firing".to_string())
        ]
    );
    let mut fresh = Connection::open(pod_address(&first, 11211), Some(&tls))
        .await
        .expect("a new connection");
    assert_eq!(
        fresh.authenticate(USER, PASSWORD).await.as_deref(),
        Ok("STORED\r\n"),
        "memcached keeps the credentials it had"
    );
    eprintln!(
        "prometheus: MemcachedAuthFileRefused fired for both servers {:.1} s after the auth \
         Secret changed to a file with a blank line; the credentials before still log in",
        changed.elapsed().as_secs_f64()
    );
    kubectl(
        &env,
        &["delete", "namespace", MONITORING, "--wait=false"],
        None,
    );
}

/// The Prometheus Operator (ServiceAccount, ClusterRoleBinding to its upstream ClusterRole,
/// Deployment as its release's bundle confines it) and a Prometheus with its ServiceAccount,
/// selecting the ServiceMonitors and PrometheusRules labelled [`SELECTED`] in every namespace,
/// scraping and evaluating every 5 s.
fn stack() -> String {
    let operator = image_reference("prometheus-operator");
    let reloader = image_reference("prometheus-config-reloader");
    let prometheus = image_reference("prometheus");
    let version = prometheus
        .rsplit_once(':')
        .map(|(_, tag)| tag)
        .unwrap_or_default();
    let (key, value) = SELECTED;
    format!(
        r#"apiVersion: v1
kind: ServiceAccount
metadata: {{ name: prometheus-operator, namespace: {MONITORING} }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{ name: node-scenario-prometheus-operator }}
roleRef: {{ apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: prometheus-operator }}
subjects: [{{ kind: ServiceAccount, name: prometheus-operator, namespace: {MONITORING} }}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{ name: prometheus-operator, namespace: {MONITORING} }}
spec:
  replicas: 1
  selector: {{ matchLabels: {{ app.kubernetes.io/name: prometheus-operator }} }}
  template:
    metadata: {{ labels: {{ app.kubernetes.io/name: prometheus-operator }} }}
    spec:
      serviceAccountName: prometheus-operator
      automountServiceAccountToken: true
      securityContext:
        runAsNonRoot: true
        runAsUser: 65534
        seccompProfile: {{ type: RuntimeDefault }}
      containers:
        - name: prometheus-operator
          image: {operator}
          args:
            - --prometheus-config-reloader={reloader}
            - --log-level=info
          ports: [{{ name: http, containerPort: 8080 }}]
          resources: {{ requests: {{ cpu: 50m, memory: 64Mi }}, limits: {{ memory: 256Mi }} }}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {{ drop: [ALL] }}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{ name: prometheus, namespace: {MONITORING} }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{ name: node-scenario-prometheus }}
roleRef: {{ apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: prometheus }}
subjects: [{{ kind: ServiceAccount, name: prometheus, namespace: {MONITORING} }}]
---
apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata: {{ name: prometheus, namespace: {MONITORING} }}
spec:
  image: {prometheus}
  version: {version}
  replicas: 1
  serviceAccountName: prometheus
  scrapeInterval: 5s
  evaluationInterval: 5s
  serviceMonitorSelector: {{ matchLabels: {{ {key}: {value} }} }}
  serviceMonitorNamespaceSelector: {{}}
  ruleSelector: {{ matchLabels: {{ {key}: {value} }} }}
  ruleNamespaceSelector: {{}}
  resources: {{ requests: {{ memory: 128Mi }} }}
"#
    )
}

/// The alerts `alertname` of Memcached `namespace/name`, as (pod, state), sorted; `None` while
/// Prometheus does not answer.
async fn alerts(
    prometheus: SocketAddr,
    alertname: &str,
    namespace: &str,
    name: &str,
) -> Option<Vec<(String, String)>> {
    let alerts = api(prometheus, "/api/v1/alerts").await?;
    let mut down: Vec<(String, String)> = alerts["data"]["alerts"]
        .as_array()?
        .iter()
        .filter(|alert| {
            alert["labels"]["alertname"] == json!(alertname)
                && alert["labels"]["namespace"] == json!(namespace)
                && alert["labels"]["service"] == json!(name)
        })
        .map(|alert| {
            (
                alert["labels"]["pod"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                alert["state"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    down.sort();
    Some(down)
}

/// `GET path` of Prometheus's HTTP API: its JSON when it answers 200 with `status: success`.
async fn api(prometheus: SocketAddr, path: &str) -> Option<Value> {
    let (status, body) = testkit::client::plain_get(prometheus, path).await.ok()?;
    let value: Value = serde_json::from_slice(&body).ok()?;
    (status == 200 && value["status"] == json!("success")).then_some(value)
}

/// A memcached process stopped with SIGSTOP, continued with SIGCONT when dropped (also when
/// the scenario fails).
struct Stopped(u32);

impl Stopped {
    fn new(pid: u32) -> Stopped {
        host("kill", &["-STOP", &pid.to_string()]);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

/// Applies the CRDs of `dir` and waits until the API server serves them.
fn apply_established(env: &Env, dir: &Path) {
    let dir = path(dir);
    kubectl(
        env,
        &["apply", "--server-side", "--force-conflicts", "-f", &dir],
        None,
    );
    kubectl(
        env,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=120s",
            "-f",
            &dir,
        ],
        None,
    );
}

fn path(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Runs kubectl against the cluster; panics with what it said when it fails.
fn kubectl(env: &Env, args: &[&str], stdin: Option<&str>) -> String {
    match env.plane.kubectl(args, stdin) {
        Ok(output) if output.success => output.stdout,
        Ok(output) => panic!("kubectl {}: {}", args.join(" "), output.stderr),
        Err(error) => panic!("kubectl {}: {error}", args.join(" ")),
    }
}
