//! Builds the Grafana dashboard of memcached servers run by the operator, over the metrics
//! their exporters, certificate refreshers, stats relays and supervisors serve
//! (`spec.monitoring`, scraped through the ServiceMonitor, whose targets carry `namespace`
//! and `service`, the Memcached's name): `config/grafana/memcached.json`,
//! and the same JSON in a ConfigMap labelled `grafana_dashboard: "1"`, the label Grafana's
//! dashboard sidecar (as kube-prometheus-stack runs it) loads dashboards from.
//!
//! The panels' queries are listed by [`queries`], so that `make validate` can have
//! Prometheus's own parser (`promtool check rules`) read every one of them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::files::{Files, FilesError};

/// The dashboard's JSON file.
pub const DASHBOARD_PATH: &str = "config/grafana/memcached.json";
/// The ConfigMap holding it.
pub const CONFIG_MAP_PATH: &str = "config/grafana/dashboard-configmap.yaml";
/// The label Grafana's dashboard sidecar looks for, and its value.
pub const SIDECAR_LABEL: (&str, &str) = ("grafana_dashboard", "1");
/// The dashboard's uid: stable, so that a newer one replaces it in Grafana.
pub const UID: &str = "memcached-operator";

/// The servers a panel shows: those of the Memcacheds chosen in the variables.
const SERVERS: &str = r#"namespace="$namespace",service=~"$memcached""#;

/// A panel's query (PromQL over [`SERVERS`]) and its legend.
type Query = (String, &'static str);

/// Each panel: title, unit, queries.
fn panels() -> Vec<(&'static str, &'static str, Vec<Query>)> {
    let s = SERVERS;
    vec![
        (
            "Servers up",
            "none",
            vec![(format!("sum by (service) (memcached_up{{{s}}})"), "{{service}}")],
        ),
        (
            "Hit ratio",
            "percentunit",
            vec![(
                format!(
                    "sum by (service) (rate(memcached_commands_total{{{s},command=\"get\",status=\"hit\"}}[5m])) \
                     / sum by (service) (rate(memcached_commands_total{{{s},command=\"get\"}}[5m]))"
                ),
                "{{service}}",
            )],
        ),
        (
            "Commands",
            "ops",
            vec![(
                format!("sum by (command, status) (rate(memcached_commands_total{{{s}}}[5m]))"),
                "{{command}} {{status}}",
            )],
        ),
        (
            "Item memory used",
            "percentunit",
            vec![(
                format!("memcached_current_bytes{{{s}}} / memcached_limit_bytes{{{s}}}"),
                "{{pod}}",
            )],
        ),
        (
            "Items",
            "short",
            vec![(format!("memcached_current_items{{{s}}}"), "{{pod}}")],
        ),
        (
            "Connections of the limit",
            "percentunit",
            vec![(
                format!(
                    "memcached_current_connections{{{s}}} / memcached_max_connections{{{s}}}"
                ),
                "{{pod}}",
            )],
        ),
        (
            "Evictions and items refused for lack of memory",
            "ops",
            vec![
                (
                    format!("rate(memcached_items_evicted_total{{{s}}}[5m])"),
                    "evicted {{pod}}",
                ),
                (
                    format!("rate(memcached_item_no_memory_total{{{s}}}[5m])"),
                    "no memory {{pod}}",
                ),
            ],
        ),
        (
            "Network",
            "Bps",
            vec![
                (
                    format!("sum by (pod) (rate(memcached_read_bytes_total{{{s}}}[5m]))"),
                    "read {{pod}}",
                ),
                (
                    format!("sum by (pod) (rate(memcached_written_bytes_total{{{s}}}[5m]))"),
                    "written {{pod}}",
                ),
            ],
        ),
        (
            "Certificate and auth file not in use",
            "none",
            vec![
                (
                    format!("memcached_certificate_refresh_pending{{{s}}}"),
                    "certificate refresh pending {{pod}}",
                ),
                (
                    format!("memcached_auth_file_refused{{{s}}}"),
                    "auth file refused {{pod}}",
                ),
            ],
        ),
        (
            "Mounted certificate expires in",
            "s",
            vec![(
                format!("memcached_certificate_expiry_timestamp_seconds{{{s}}} - time()"),
                "{{pod}}",
            )],
        ),
        (
            "Refreshes, rereads and relayed scrapes failed",
            "ops",
            vec![
                (
                    format!(
                        "rate(memcached_certificate_refreshes_total{{{s},result=\"failed\"}}[5m])"
                    ),
                    "refresh_certs {{pod}}",
                ),
                (
                    format!("rate(memcached_auth_reloads_total{{{s},result=\"failed\"}}[5m])"),
                    "auth file {{pod}}",
                ),
                (
                    format!(
                        "rate(memcached_stats_relay_connections_total{{{s},result=\"failed\"}}[5m])"
                    ),
                    "stats relay {{pod}}",
                ),
            ],
        ),
        (
            "Alerts firing",
            "none",
            vec![(
                "sum by (alertname) (ALERTS{namespace=\"$namespace\",alertname=~\"Memcached.*\",alertstate=\"firing\"})"
                    .to_string(),
                "{{alertname}}",
            )],
        ),
    ]
}

/// Every query of the dashboard, as Grafana sends it (with its variables).
pub fn queries() -> Vec<String> {
    panels()
        .into_iter()
        .flat_map(|(_, _, targets)| targets.into_iter().map(|(expr, _)| expr))
        .collect()
}

/// The dashboard's JSON model.
pub fn dashboard() -> Value {
    let panels: Vec<Value> = panels()
        .into_iter()
        .enumerate()
        .map(|(index, (title, unit, targets))| {
            let targets: Vec<Value> = targets
                .into_iter()
                .enumerate()
                .map(|(i, (expr, legend))| {
                    json!({
                        "datasource": {"type": "prometheus", "uid": "${datasource}"},
                        "expr": expr,
                        "legendFormat": legend,
                        "refId": char::from(b'A' + u8::try_from(i).unwrap_or(0)).to_string(),
                    })
                })
                .collect();
            json!({
                "id": index + 1,
                "type": "timeseries",
                "title": title,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": (index % 2) * 12, "y": (index / 2) * 8},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": targets,
            })
        })
        .collect();
    json!({
        "uid": UID,
        "title": "Memcached",
        "description": "memcached servers run by memcached-operator, from their exporters' metrics",
        "tags": ["memcached", "memcached-operator"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": true,
        "refresh": "30s",
        "time": {"from": "now-3h", "to": "now"},
        "templating": {"list": [
            {
                "name": "datasource",
                "label": "Data source",
                "type": "datasource",
                "query": "prometheus",
            },
            {
                "name": "namespace",
                "label": "Namespace",
                "type": "query",
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "query": {"query": "label_values(memcached_up, namespace)", "refId": "namespace"},
                "refresh": 2,
                "sort": 1,
            },
            {
                "name": "memcached",
                "label": "Memcached",
                "type": "query",
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "query": {
                    "query": "label_values(memcached_up{namespace=\"$namespace\"}, service)",
                    "refId": "memcached",
                },
                "refresh": 2,
                "sort": 1,
                "multi": true,
                "includeAll": true,
            },
        ]},
        "panels": panels,
    })
}

/// The dashboard's files: the JSON, and the ConfigMap for Grafana's sidecar.
pub fn files() -> Result<Files, FilesError> {
    let mut files = Files::new();
    let text = serde_json::to_string_pretty(&dashboard()).unwrap_or_default() + "\n";
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some("memcached-operator-dashboard".into()),
            labels: Some(BTreeMap::from([
                (SIDECAR_LABEL.0.to_string(), SIDECAR_LABEL.1.to_string()),
                (
                    "app.kubernetes.io/name".to_string(),
                    "memcached-operator".to_string(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "memcached.json".to_string(),
            text.clone(),
        )])),
        ..ConfigMap::default()
    };
    files.text(DASHBOARD_PATH, text)?;
    files.yaml(CONFIG_MAP_PATH, &config_map)?;
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_map_holds_the_dashboard_and_the_sidecars_label() {
        let files = files().expect("renders");
        let json = files.get(DASHBOARD_PATH).expect("the JSON");
        let map = files.get(CONFIG_MAP_PATH).expect("the ConfigMap");
        let map: ConfigMap = serde_json::from_value(
            crate::yaml::documents(map)
                .expect("YAML")
                .into_iter()
                .next()
                .expect("one object"),
        )
        .expect("a ConfigMap");
        assert_eq!(
            map.metadata
                .labels
                .and_then(|l| l.get("grafana_dashboard").cloned()),
            Some("1".to_string())
        );
        assert_eq!(
            map.data
                .and_then(|d| d.get("memcached.json").cloned())
                .as_deref(),
            Some(json)
        );
    }

    #[test]
    fn every_panel_has_queries_over_the_chosen_servers_and_a_unique_place() {
        let model = dashboard();
        let shown = model["panels"].as_array().expect("panels");
        assert_eq!(shown.len(), panels().len());
        let mut places: Vec<(u64, u64)> = Vec::new();
        for panel in shown {
            let place = (
                panel["gridPos"]["x"].as_u64().expect("x"),
                panel["gridPos"]["y"].as_u64().expect("y"),
            );
            assert!(!places.contains(&place), "{panel}");
            places.push(place);
            let targets = panel["targets"].as_array().expect("targets");
            assert!(!targets.is_empty(), "{panel}");
            for target in targets {
                let expr = target["expr"].as_str().expect("expr");
                assert!(expr.contains("namespace=\"$namespace\""), "{expr}");
            }
        }
        assert_eq!(model["uid"], UID);
    }
}
