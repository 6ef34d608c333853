//! Tests every validation rule against its message, and that the CRD's CEL rules refuse
//! exactly what the webhook refuses.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::admission::defaults::{Defaults, default_spec};
use crate::api::v1beta1::{MemcachedConfig, PodDisruptionBudgetSpec, ServiceSpec};
use crate::fixtures::memcached;

/// [`super::validate_create`] under the default issuer policy.
fn validate_create(new: &Memcached) -> Result<Warnings, Denial> {
    super::validate_create(new, &AllowedIssuers::default())
}

/// [`super::validate_update`] under the default issuer policy.
fn validate_update(old: &Memcached, new: &Memcached) -> Result<Warnings, Denial> {
    super::validate_update(old, new, &AllowedIssuers::default())
}

/// A valid, fully defaulted object to break one field at a time.
fn valid() -> Memcached {
    memcached(
        "cache",
        default_spec(&MemcachedSpec::default(), &Defaults::default()),
    )
}

fn with(edit: impl FnOnce(&mut MemcachedSpec)) -> Memcached {
    let mut object = valid();
    edit(&mut object.spec);
    object
}

fn config(object: &mut MemcachedSpec) -> &mut MemcachedConfig {
    object.memcached.get_or_insert_with(Default::default)
}

fn memory_limit(spec: &mut MemcachedSpec, limit: &str) {
    spec.resources
        .get_or_insert_with(Default::default)
        .limits
        .get_or_insert_with(BTreeMap::new)
        .insert("memory".into(), Quantity(limit.into()));
}

fn args(list: &[&str]) -> Option<Vec<String>> {
    Some(list.iter().map(|a| a.to_string()).collect())
}

/// Whether the CRD's CEL rules admit the object, as the API server would evaluate them.
fn cel_admits(object: &Memcached) -> bool {
    object.validate_cel().is_ok()
}

/// Invalid objects, the field each must be refused on, and whether CEL catches it too.
fn invalid_cases() -> Vec<(&'static str, Memcached, &'static str, bool)> {
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

#[test]
fn a_defaulted_object_is_valid_for_the_webhook_and_for_cel() {
    assert_eq!(validate_create(&valid()), Ok(vec![]));
    assert!(cel_admits(&valid()), "{:?}", valid().validate_cel());
}

#[test]
fn every_invalid_case_is_refused_naming_its_field() {
    for (case, object, field, _) in invalid_cases() {
        let denial = validate_create(&object).expect_err(case);
        assert!(
            denial.violations.iter().any(|v| v.field == field),
            "{case}: expected a violation on {field}, got {denial}"
        );
    }
}

#[test]
fn cel_refuses_what_it_can_express_exactly_like_the_webhook() {
    for (case, object, _, cel_catches) in invalid_cases() {
        assert_eq!(
            !cel_admits(&object),
            cel_catches,
            "{case}: CEL disagrees ({:?})",
            object.validate_cel()
        );
    }
}

#[test]
fn item_sizes_on_the_boundaries_are_admitted_by_both() {
    // memcached's own minimum is 1k, with a smaller slab_chunk_max than its 512 KiB default.
    let smaller_chunks = Some(vec!["-o".to_string(), "slab_chunk_max=1024".to_string()]);
    for (memory, size, extra_args) in [
        (64, "32m", None),
        (64, "512k", None),
        (64, "524288", None),
        (64, "1536k", None),
        (1, "512k", None),
        (2048, "1024m", None),
        (64, "1k", smaller_chunks.clone()),
        (64, "1024", smaller_chunks),
    ] {
        let object = with(|s| {
            config(s).memory_limit_mb = Some(memory);
            config(s).max_item_size = Some(size.into());
            config(s).extra_args = extra_args;
            s.resources = None;
        });
        assert!(
            validate_create(&object).is_ok(),
            "{memory} {size}: {:?}",
            validate_create(&object)
        );
        assert!(
            cel_admits(&object),
            "{memory} {size}: {:?}",
            object.validate_cel()
        );
    }
}

#[test]
fn a_memory_limit_that_fits_exactly_is_admitted_by_both() {
    let object = with(|s| {
        config(s).memory_limit_mb = Some(1024);
        memory_limit(s, "1Gi");
    });
    assert!(validate_create(&object).is_ok());
    assert!(cel_admits(&object), "{:?}", object.validate_cel());
}

#[test]
fn flags_the_operator_leaves_alone_are_admitted_by_both() {
    let object = with(|s| {
        config(s).extra_args = args(&[
            "-M",
            "-o",
            "hashpower=20,slab_chunk_max=512",
            "--listen-backlog=2048",
            "-B",
            "ascii",
        ])
    });
    assert!(
        validate_create(&object).is_ok(),
        "{:?}",
        validate_create(&object)
    );
    assert!(cel_admits(&object), "{:?}", object.validate_cel());
}

#[test]
fn a_reserved_sub_option_is_refused_saying_why() {
    let object = with(|s| config(s).extra_args = args(&["-o", "hashpower=20,ssl_verify_mode=0"]));
    let message = validate_create(&object).map_err(|d| d.message);
    assert_eq!(
        message,
        Err(
            "spec.memcached.extraArgs[1]: sets memcached's -o ssl_verify_mode, which extraArgs \
             may not set: TLS is spec.tls's: the operator sets the certificate, the key, the CA \
             and the verification mode, and the other ssl_ options would weaken or undo them"
                .to_string()
        )
    );
}

#[test]
fn an_issuer_outside_the_namespace_is_refused_unless_the_cluster_admin_allows_it() {
    use crate::api::v1beta1::{IssuerRef, TlsSpec};
    let object = with(|s| {
        s.tls = Some(TlsSpec {
            secret_name: Some("cache-tls".into()),
            issuer_ref: Some(IssuerRef {
                name: "shared-ca".into(),
                kind: Some("ClusterIssuer".into()),
                group: None,
            }),
            ..TlsSpec::default()
        });
    });
    let denial = validate_create(&object).expect_err("refused by default");
    assert_eq!(denial.violations.len(), 1, "{denial}");
    assert_eq!(denial.violations[0].field, "spec.tls.issuerRef");
    assert!(
        cel_admits(&object),
        "the CRD cannot know the operator's setting"
    );
    let allowed: AllowedIssuers = "ClusterIssuer.cert-manager.io/shared-ca"
        .parse()
        .expect("a setting");
    assert_eq!(super::validate_create(&object, &allowed), Ok(vec![]));
    assert_eq!(
        super::validate_update(&valid(), &object, &allowed),
        Ok(vec![])
    );
    assert!(super::validate_update(&valid(), &object, &AllowedIssuers::default()).is_err());
}

#[test]
fn messages_name_the_field_the_value_and_the_reason() {
    let object = with(|s| config(s).max_item_size = Some("33m".into()));
    assert_eq!(
        validate_create(&object).map_err(|d| d.message),
        Err(
            "spec.memcached.maxItemSize: 33m exceeds half of spec.memcached.memoryLimitMB \
             (64 MiB); memcached refuses items larger than half its memory"
                .to_string()
        )
    );
    let object = with(|s| config(s).extra_args = args(&["-dm64"]));
    let message = validate_create(&object).map_err(|d| d.message);
    assert_eq!(
        message,
        Err(
            "spec.memcached.extraArgs[0]: \"-dm64\" sets --memory-limit, which the operator \
             manages; set spec.memcached.memoryLimitMB instead"
                .to_string()
        )
    );
}

#[test]
fn every_broken_rule_is_reported_at_once() {
    let object = with(|s| {
        s.replicas = Some(100);
        config(s).threads = Some(0);
    });
    let denial = validate_create(&object).expect_err("two violations");
    assert_eq!(denial.violations.len(), 2, "{denial}");
    assert!(denial.message.contains("; "), "{denial}");
}

#[test]
fn names_that_cannot_name_a_service_are_refused() {
    for name in ["Cache", "1cache", "cache.example", &"c".repeat(53)] {
        let mut object = valid();
        object.metadata.name = Some(name.to_string());
        let denial = validate_create(&object).expect_err(name);
        assert_eq!(denial.violations[0].field, "metadata.name", "{name}");
    }
    let mut object = valid();
    object.metadata.name = Some("c".repeat(52));
    assert!(validate_create(&object).is_ok());
}

#[test]
fn the_conversion_stash_annotation_is_reserved() {
    let mut object = valid();
    object.metadata.annotations = Some(BTreeMap::from([(
        STASH_ANNOTATION.to_string(),
        "{}".to_string(),
    )]));
    let denial = validate_create(&object).expect_err("reserved");
    assert!(denial.message.contains(STASH_ANNOTATION), "{denial}");
}

#[test]
fn the_latest_tag_and_verbosity_2_warn_but_are_admitted() {
    for image in [
        "memcached",
        "memcached:latest",
        "registry.example.com:5000/cache/memcached",
    ] {
        let warnings = validate_create(&with(|s| s.image = Some(image.into()))).expect(image);
        assert!(
            warnings.iter().any(|w| w.contains("latest")),
            "{image}: {warnings:?}"
        );
    }
    for image in [
        "memcached:1.6",
        "registry.example.com:5000/memcached:1.6",
        "memcached@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ] {
        let warnings = validate_create(&with(|s| s.image = Some(image.into()))).expect(image);
        assert!(warnings.is_empty(), "{image}: {warnings:?}");
    }
    let warnings = validate_create(&with(|s| config(s).verbosity = Some(2))).expect("admitted");
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("spec.memcached.verbosity")),
        "{warnings:?}"
    );
}

#[test]
fn scaling_down_by_more_than_half_warns() {
    let old = with(|s| s.replicas = Some(10));
    let warnings = validate_update(&old, &with(|s| s.replicas = Some(4))).expect("admitted");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("from 10 to 4"), "{warnings:?}");
    let warnings = validate_update(&old, &with(|s| s.replicas = Some(5))).expect("admitted");
    assert!(
        warnings.is_empty(),
        "exactly half is not more than half: {warnings:?}"
    );
    let warnings = validate_update(&old, &with(|s| s.replicas = Some(20))).expect("admitted");
    assert!(warnings.is_empty());
}

#[test]
fn updates_of_an_object_being_deleted_are_never_blocked() {
    let old = valid();
    let mut new = with(|s| s.replicas = Some(1000));
    new.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    assert_eq!(validate_update(&old, &new), Ok(vec![]));
}

#[test]
fn updates_are_held_to_the_create_rules() {
    let denial = validate_update(&valid(), &with(|s| s.replicas = Some(65))).expect_err("65");
    assert_eq!(denial.violations[0].field, "spec.replicas");
}

#[test]
fn deletion_protection_blocks_delete_and_says_how_to_lift_it() {
    let mut object = valid();
    object.metadata.annotations = Some(BTreeMap::from([(
        DELETION_PROTECTION_ANNOTATION.to_string(),
        "true".to_string(),
    )]));
    let denial = validate_delete(&object).expect_err("protected");
    assert!(
        denial.message.contains(
            "kubectl annotate memcacheds cache -n default cache.f2367556.dev/deletion-protection-"
        ),
        "{denial}"
    );
    object.metadata.annotations = Some(BTreeMap::from([(
        DELETION_PROTECTION_ANNOTATION.to_string(),
        "false".to_string(),
    )]));
    assert_eq!(validate_delete(&object), Ok(vec![]));
    assert_eq!(validate_delete(&valid()), Ok(vec![]));
}

#[test]
fn the_image_pattern_in_the_crd_agrees_with_the_webhook() {
    let pattern =
        regex::Regex::new(crate::api::cel::IMAGE_REFERENCE_PATTERN).expect("RE2-compatible");
    for image in [
        "memcached",
        "memcached:1.6",
        "docker.io/library/memcached:1.6.39-alpine",
        "localhost:5000/a/b_c__d-e:tag",
        "quay.io/org/memcached@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ] {
        assert!(pattern.is_match(image), "pattern refuses {image}");
        assert!(
            validate_create(&with(|s| s.image = Some(image.into()))).is_ok(),
            "webhook refuses {image}"
        );
    }
    for image in [
        "Memcached",
        "memcached:",
        "memcached:-x",
        "a//b",
        "memcached@sha256:12",
        " memcached",
        "-a",
        "[::1]:5000/memcached:1",
    ] {
        assert!(!pattern.is_match(image), "pattern accepts {image}");
        assert!(
            validate_create(&with(|s| s.image = Some(image.into()))).is_err(),
            "webhook accepts {image}"
        );
    }
}

#[test]
fn an_image_judged_again_gets_the_same_verdict() {
    for image in [
        "registry.example/memcached:1.6.39",
        "memcached",
        "memcached:latest",
        "Not A Reference",
        "registry.example/memcached:1.6.39",
        "memcached@sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
        "Not A Reference",
    ] {
        assert_eq!(judge_image_once(image), judge_image(image), "{image}");
        assert_eq!(judge_image_once(image), judge_image(image), "{image}");
    }
}

#[test]
fn image_references_follow_the_distribution_grammar() {
    let long_path = format!("registry.example/{}", "a".repeat(256));
    for (image, verdict) in [
        ("memcached", ImageVerdict::Unpinned),
        ("memcached:latest", ImageVerdict::Unpinned),
        ("docker.io/memcached", ImageVerdict::Unpinned),
        ("localhost:5000/memcached", ImageVerdict::Unpinned),
        ("localhost:5000/memcached:1.6", ImageVerdict::Pinned),
        (
            "registry.example/team/memcached:1.6.39",
            ImageVerdict::Pinned,
        ),
        (
            "memcached:latest@sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
            ImageVerdict::Pinned,
        ),
        // Go's `\w` is ASCII: a tag with other letters is no tag.
        ("memcached:1.6é", ImageVerdict::Invalid),
        ("memcached:版本", ImageVerdict::Invalid),
        // A digest has its algorithm's length, and only known algorithms.
        (
            "memcached@sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7a",
            ImageVerdict::Invalid,
        ),
        (
            "memcached@md5:0123456789abcdef0123456789abcdef",
            ImageVerdict::Invalid,
        ),
        (long_path.as_str(), ImageVerdict::Invalid),
    ] {
        assert_eq!(judge_image(image), verdict, "{image}");
    }
    let at_the_limit = format!("registry.example/{}:1", "a".repeat(255));
    assert_eq!(judge_image(&at_the_limit), ImageVerdict::Pinned);
}
