//! The objects the validation tests break, one field at a time: a valid object, the helpers
//! that change it, and every invalid case with the field it must be refused on.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::admission::defaults::{Defaults, default_spec};
use crate::api::v1beta1::{
    Memcached, MemcachedConfig, MemcachedSpec, PodDisruptionBudgetSpec, ServiceSpec,
};
use crate::fixtures::memcached;

/// A valid, fully defaulted object to break one field at a time.
pub fn valid() -> Memcached {
    memcached(
        "cache",
        default_spec(&MemcachedSpec::default(), &Defaults::default()),
    )
}

pub fn with(edit: impl FnOnce(&mut MemcachedSpec)) -> Memcached {
    let mut object = valid();
    edit(&mut object.spec);
    object
}

pub fn config(object: &mut MemcachedSpec) -> &mut MemcachedConfig {
    object.memcached.get_or_insert_with(Default::default)
}

pub fn memory_limit(spec: &mut MemcachedSpec, limit: &str) {
    spec.resources
        .get_or_insert_with(Default::default)
        .limits
        .get_or_insert_with(BTreeMap::new)
        .insert("memory".into(), Quantity(limit.into()));
}

pub fn args(list: &[&str]) -> Option<Vec<String>> {
    Some(list.iter().map(|a| a.to_string()).collect())
}

/// Invalid objects, the field each must be refused on, and whether CEL catches it too.
pub fn invalid_cases() -> Vec<(&'static str, Memcached, &'static str, bool)> {
    vec![
        (
            "warm restart with too little item memory",
            with(|s| {
                config(s).memory_limit_mb = Some(32);
                config(s).warm_restart = Some(true);
            }),
            "spec.memcached.memoryLimitMB",
            true,
        ),
        (
            "network policy without sources",
            with(|s| s.network_policy = Some(crate::api::v1beta1::NetworkPolicySpec::default())),
            "spec.networkPolicy.allowedSources",
            true,
        ),
        (
            "TLS without its Secret",
            with(|s| s.tls = Some(crate::api::v1beta1::TlsSpec::default())),
            "spec.tls.secretName",
            true,
        ),
        (
            "authentication without its Secret",
            with(|s| s.auth = Some(crate::api::v1beta1::AuthSpec::default())),
            "spec.auth.secretName",
            true,
        ),
        (
            "plaintext port on the client port",
            with(|s| {
                s.tls = Some(crate::api::v1beta1::TlsSpec {
                    secret_name: Some("cache-tls".into()),
                    plaintext_port: Some(11211),
                    ..Default::default()
                });
            }),
            "spec.tls.plaintextPort",
            true,
        ),
        (
            "two issuers of the certificate",
            with(|s| {
                s.tls = Some(crate::api::v1beta1::TlsSpec {
                    secret_name: Some("cache-tls".into()),
                    issuer_ref: Some(crate::api::v1beta1::IssuerRef {
                        name: "ca".into(),
                        kind: None,
                        group: None,
                    }),
                    openshift_service_ca: Some(true),
                    ..Default::default()
                });
            }),
            "spec.tls.openShiftServiceCA",
            true,
        ),
        (
            "client certificates without a CA from the service CA",
            with(|s| {
                s.tls = Some(crate::api::v1beta1::TlsSpec {
                    secret_name: Some("cache-tls".into()),
                    openshift_service_ca: Some(true),
                    client_auth: Some(crate::api::v1beta1::ClientAuth::Require),
                    ..Default::default()
                });
            }),
            "spec.tls.clientAuth",
            true,
        ),
        (
            "client CAs where no client certificate is verified",
            with(|s| {
                s.tls = Some(crate::api::v1beta1::TlsSpec {
                    secret_name: Some("cache-tls".into()),
                    client_ca: Some(crate::api::v1beta1::ClientCaSource {
                        config_map_name: "cache-trust".into(),
                        key: None,
                    }),
                    ..Default::default()
                });
            }),
            "spec.tls.clientCA",
            true,
        ),
        (
            "a scrape interval that is no duration",
            with(|s| {
                s.monitoring = Some(crate::api::v1beta1::MonitoringSpec {
                    service_monitor: Some(crate::api::v1beta1::ServiceMonitorSpec {
                        interval: Some("30 seconds".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }),
            "spec.monitoring.serviceMonitor.interval",
            false,
        ),
        (
            "metrics port on the client port",
            with(|s| {
                s.monitoring = Some(crate::api::v1beta1::MonitoringSpec {
                    port: Some(11211),
                    ..Default::default()
                });
            }),
            "spec.monitoring.port",
            true,
        ),
        (
            "metrics port on the plaintext port",
            with(|s| {
                s.tls = Some(crate::api::v1beta1::TlsSpec {
                    secret_name: Some("cache-tls".into()),
                    plaintext_port: Some(9150),
                    ..Default::default()
                });
                s.monitoring = Some(crate::api::v1beta1::MonitoringSpec::default());
            }),
            "spec.monitoring.port",
            true,
        ),
        (
            "monitoring behind a network policy that names no scraper",
            with(|s| {
                s.network_policy = Some(crate::api::v1beta1::NetworkPolicySpec {
                    allowed_sources: Some(vec![Default::default()]),
                    metrics_sources: None,
                });
                s.monitoring = Some(crate::api::v1beta1::MonitoringSpec::default());
            }),
            "spec.networkPolicy.metricsSources",
            true,
        ),
        (
            "grace period within the preStop delay",
            with(|s| {
                s.graceful_shutdown = Some(crate::api::v1beta1::GracefulShutdownSpec {
                    pre_stop_delay_seconds: Some(45),
                    termination_grace_period_seconds: None,
                });
            }),
            "spec.gracefulShutdown.terminationGracePeriodSeconds",
            true,
        ),
        (
            "item size above half the memory",
            with(|s| config(s).max_item_size = Some("33m".into())),
            "spec.memcached.maxItemSize",
            true,
        ),
        (
            "item size that is no multiple of memcached's largest slab chunk",
            with(|s| config(s).max_item_size = Some("100k".into())),
            "spec.memcached.maxItemSize",
            true,
        ),
        (
            "item size below 1k",
            with(|s| config(s).max_item_size = Some("1000".into())),
            "spec.memcached.maxItemSize",
            true,
        ),
        (
            "item size in kilobytes above half",
            with(|s| {
                config(s).memory_limit_mb = Some(1);
                config(s).max_item_size = Some("513k".into());
            }),
            "spec.memcached.maxItemSize",
            true,
        ),
        (
            "item size not memcached notation",
            with(|s| config(s).max_item_size = Some("1mb".into())),
            "spec.memcached.maxItemSize",
            false,
        ),
        (
            "memory above the container limit",
            with(|s| {
                config(s).memory_limit_mb = Some(1024);
                memory_limit(s, "512Mi");
            }),
            "spec.memcached.memoryLimitMB",
            false,
        ),
        (
            "memory above a decimal limit",
            with(|s| {
                config(s).memory_limit_mb = Some(1000);
                memory_limit(s, "1G");
            }),
            "spec.memcached.memoryLimitMB",
            false,
        ),
        (
            "managed flag -m",
            with(|s| config(s).extra_args = args(&["-m", "128"])),
            "spec.memcached.extraArgs[0]",
            true,
        ),
        (
            "managed flag bundled",
            with(|s| config(s).extra_args = args(&["-M", "-dvm64"])),
            "spec.memcached.extraArgs[1]",
            true,
        ),
        (
            "managed flag abbreviated",
            with(|s| config(s).extra_args = args(&["--conn=10"])),
            "spec.memcached.extraArgs[0]",
            true,
        ),
        (
            "managed flag --port",
            with(|s| config(s).extra_args = args(&["--port=1"])),
            "spec.memcached.extraArgs[0]",
            true,
        ),
        (
            "managed flag udp",
            with(|s| config(s).extra_args = args(&["-U", "11211"])),
            "spec.memcached.extraArgs[0]",
            true,
        ),
        (
            "managed flag listen",
            with(|s| config(s).extra_args = args(&["--listen", "127.0.0.1"])),
            "spec.memcached.extraArgs[0]",
            true,
        ),
        (
            "managed flag item size",
            with(|s| config(s).extra_args = args(&["-I2m"])),
            "spec.memcached.extraArgs[0]",
            true,
        ),
        (
            "managed flag threads",
            with(|s| config(s).extra_args = args(&["--threads=8"])),
            "spec.memcached.extraArgs[0]",
            true,
        ),
        (
            "managed flag verbosity",
            with(|s| config(s).extra_args = args(&["-vv"])),
            "spec.memcached.extraArgs[0]",
            true,
        ),
        (
            "sub-option ssl_verify_mode",
            with(|s| config(s).extra_args = args(&["-o", "ssl_verify_mode=0"])),
            "spec.memcached.extraArgs[1]",
            true,
        ),
        (
            "sub-options ssl_ca_cert and ssl_verify_mode in one list",
            with(|s| {
                config(s).extra_args = args(&["-o", "ssl_ca_cert=/etc/passwd,ssl_verify_mode=0"])
            }),
            "spec.memcached.extraArgs[1]",
            true,
        ),
        (
            "sub-option attached to -o in a bundle",
            with(|s| config(s).extra_args = args(&["-Mossl_ciphers=NULL"])),
            "spec.memcached.extraArgs[0]",
            true,
        ),
        (
            "sub-option ext_path",
            with(|s| config(s).extra_args = args(&["--extended=ext_path=/tmp/items:1G"])),
            "spec.memcached.extraArgs[0]",
            true,
        ),
        (
            "sub-option modern",
            with(|s| config(s).extra_args = args(&["--ext", "hashpower=20,modern"])),
            "spec.memcached.extraArgs[1]",
            true,
        ),
        (
            "sub-option no_drop_privileges",
            with(|s| config(s).extra_args = args(&["-o", "no_drop_privileges"])),
            "spec.memcached.extraArgs[1]",
            true,
        ),
        (
            "sub-option proxy_config",
            with(|s| config(s).extra_args = args(&["-oproxy_config=/tmp/routes.lua"])),
            "spec.memcached.extraArgs[0]",
            true,
        ),
        (
            "sub-option sock_cookie_id",
            with(|s| config(s).extra_args = args(&["-o", "sock_cookie_id=1"])),
            "spec.memcached.extraArgs[1]",
            true,
        ),
        (
            "bad image",
            with(|s| s.image = Some("Memcached:1.6".into())),
            "spec.image",
            false,
        ),
        (
            "image with spaces",
            with(|s| s.image = Some("memcached :1.6".into())),
            "spec.image",
            false,
        ),
        (
            "negative max unavailable",
            with(|s| {
                s.pod_disruption_budget = Some(PodDisruptionBudgetSpec {
                    max_unavailable: Some(IntOrString::Int(-1)),
                })
            }),
            "spec.podDisruptionBudget.maxUnavailable",
            true,
        ),
        (
            "max unavailable above 100%",
            with(|s| {
                s.pod_disruption_budget = Some(PodDisruptionBudgetSpec {
                    max_unavailable: Some(IntOrString::String("101%".into())),
                })
            }),
            "spec.podDisruptionBudget.maxUnavailable",
            true,
        ),
        (
            "max unavailable a word",
            with(|s| {
                s.pod_disruption_budget = Some(PodDisruptionBudgetSpec {
                    max_unavailable: Some(IntOrString::String("one".into())),
                })
            }),
            "spec.podDisruptionBudget.maxUnavailable",
            true,
        ),
        (
            "too many replicas",
            with(|s| s.replicas = Some(65)),
            "spec.replicas",
            false,
        ),
        (
            "port zero",
            with(|s| s.service = Some(ServiceSpec { port: Some(0) })),
            "spec.service.port",
            false,
        ),
        (
            "verbosity 3",
            with(|s| config(s).verbosity = Some(3)),
            "spec.memcached.verbosity",
            false,
        ),
        (
            "request above limit",
            with(|s| {
                s.resources.get_or_insert_with(Default::default).requests =
                    Some(BTreeMap::from([("cpu".into(), Quantity("2".into()))]));
                s.resources.get_or_insert_with(Default::default).limits =
                    Some(BTreeMap::from([("cpu".into(), Quantity("500m".into()))]));
            }),
            "spec.resources.requests.cpu",
            false,
        ),
        (
            "unparsable quantity",
            with(|s| memory_limit(s, "lots")),
            "spec.resources.limits.memory",
            false,
        ),
    ]
}
