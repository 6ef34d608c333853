//! memcached's metrics on real pods: the memcached_exporter sidecar, built from its pinned
//! release, reports what a client did to a server that serves TLS only and requires client
//! certificates, once with the auth file's credentials required and once without; in both the
//! exporter reads through the stats relay, which holds the credentials and the Secret's
//! certificate the exporter is never given. The metrics are read from this machine on the
//! pod's metrics port.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use testkit::memcache::{Connection, Tls};
use testkit::pki::Ca;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cluster::{Env, WAIT, count_items, eventually, pod_address, set_items};
use crate::secured::{
    client_data, create_and_wait, create_auth_secret, create_secret, pod, tls_data,
};

const USER: &str = "prometheus-reader";
const PASSWORD: &str = "scrape-9d2c";
/// Items the client sets, reads back, and misses.
const ITEMS: usize = 40;
const MISSES: usize = 7;

pub async fn the_exporter_reports_what_clients_did_with_tls_and_authentication_on(env: Arc<Env>) {
    let namespace = env.create_namespace("metrics").await;
    let ca = Ca::root();
    let server = ca.serving_for(&[
        &format!("*.authenticated.{namespace}.svc"),
        &format!("*.certificates.{namespace}.svc"),
    ]);
    create_secret(&env, &namespace, "cache-tls", tls_data(&server, &ca)).await;
    create_auth_secret(&env, &namespace, "cache-auth", USER, PASSWORD).await;
    create_secret(
        &env,
        &namespace,
        "sidecars-tls",
        client_data(&ca.client("memcached-sidecars")),
    )
    .await;
    let client = ca.serving_for(&["memcached-client"]);
    for (name, auth) in [("authenticated", true), ("certificates", false)] {
        let started = Instant::now();
        let mut spec = json!({
            "tls": {
                "secretName": "cache-tls",
                "clientAuth": "Require",
                "clientSecretName": "sidecars-tls",
            },
            "monitoring": {},
        });
        if auth {
            spec["auth"] = json!({ "secretName": "cache-auth" });
        }
        create_and_wait(&env, &namespace, name, spec).await;
        let pod = pod(&env, &namespace, &format!("{name}-0")).await;
        let sidecars: Vec<String> = pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.name)
            .collect();
        let tls = Tls::new(
            &ca.pem,
            &format!("{name}-0.{name}.{namespace}.svc"),
            Some(&client),
        );
        let mut connection = Connection::open(pod_address(&pod, 11211), Some(&tls))
            .await
            .expect("a TLS connection with a client certificate");
        if auth {
            assert_eq!(
                connection.authenticate(USER, PASSWORD).await.as_deref(),
                Ok("STORED\r\n")
            );
        }
        set_items(&mut connection, "key", ITEMS).await;
        assert_eq!(count_items(&mut connection, "key", ITEMS).await, ITEMS);
        for i in 0..MISSES {
            assert_eq!(connection.get(&format!("absent-{i}")).await, Ok(None));
        }
        let metrics_at = pod_address(&pod, 9150);
        let metrics = eventually(
            &format!("{name}'s exporter reports the server up"),
            WAIT,
            || async {
                let metrics = scrape(metrics_at).await.ok()?;
                (value(&metrics, "memcached_up") == Some(1.0)).then_some(metrics)
            },
        )
        .await;
        let items = value(&metrics, "memcached_current_items");
        let hits = value(
            &metrics,
            "memcached_commands_total{command=\"get\",status=\"hit\"}",
        );
        let misses = value(
            &metrics,
            "memcached_commands_total{command=\"get\",status=\"miss\"}",
        );
        eprintln!(
            "metrics ({name}: sidecars {sidecars:?}): memcached_up 1 after {:.1} s; \
             current_items {items:?} (set {ITEMS}), get hits {hits:?} (read {ITEMS}), \
             get misses {misses:?} (missed {MISSES})",
            started.elapsed().as_secs_f64()
        );
        // Under client certificates the exporter reads through the relay in both: it holds
        // neither the credentials nor the server's key.
        let expected: &[&str] = if auth {
            &[
                "install-supervisor",
                "cert-refresher",
                "stats-relay",
                "exporter",
            ]
        } else {
            &["cert-refresher", "stats-relay", "exporter"]
        };
        assert_eq!(sidecars, expected);
        assert_eq!(items, Some(ITEMS as f64), "current items");
        assert_eq!(hits, Some(ITEMS as f64), "get hits");
        assert_eq!(misses, Some(MISSES as f64), "get misses");
    }
}

/// `GET /metrics` over plain HTTP/1.0; the body.
pub async fn scrape(address: SocketAddr) -> Result<String, String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| format!("connect {address}: {e}"))?;
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: exporter\r\n\r\n")
            .await
            .map_err(|e| format!("send: {e}"))?;
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .await
            .map_err(|e| format!("read: {e}"))?;
        let (head, body) = response
            .split_once("\r\n\r\n")
            .ok_or_else(|| "no HTTP header".to_string())?;
        if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
            return Err(format!(
                "answered {}",
                head.lines().next().unwrap_or_default()
            ));
        }
        Ok(body.to_string())
    };
    tokio::time::timeout(Duration::from_secs(60), exchange)
        .await
        .map_err(|_| format!("{address}: no answer within 60 s"))?
}

/// The value of the sample named exactly `series` (name and labels as the exposition writes
/// them).
pub fn value(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok())?
    })
}
