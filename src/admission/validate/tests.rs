//! Tests every validation rule against its message, and that the CRD's CEL rules refuse
//! exactly what the webhook refuses.

mod cases;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use self::cases::{args, config, invalid_cases, memory_limit, valid, with};
use super::image::{ImageVerdict, judge_image, judge_image_once};
use super::*;

/// [`super::validate_create`] under the default issuer policy.
fn validate_create(new: &Memcached) -> Result<Warnings, Denial> {
    super::validate_create(new, &AllowedIssuers::default())
}

/// [`super::validate_update`] under the default issuer policy.
fn validate_update(old: &Memcached, new: &Memcached) -> Result<Warnings, Denial> {
    super::validate_update(old, new, &AllowedIssuers::default())
}

/// Whether the CRD's CEL rules admit the object, as the API server would evaluate them.
fn cel_admits(object: &Memcached) -> bool {
    object.validate_cel().is_ok()
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
