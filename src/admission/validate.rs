//! Decides whether a Memcached may be created, updated or deleted, and what to warn about.
//!
//! Every rule that CEL can express is also in the CRD (`api::cel`), so the API server holds
//! the line without the webhook; here the same rules get messages that name the field, the
//! value and the reason, and the rules CEL cannot express join them: metadata (deletion
//! protection, the reserved conversion annotation), cross-field requests against limits, and
//! warnings. Objects that are being deleted are never blocked, so finalizers can be removed.

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::issuers::AllowedIssuers;
use crate::api::convert::STASH_ANNOTATION;
use crate::api::memcached_flags::managed_flags;
use crate::api::memcached_suboptions::reserved_suboptions;
use crate::api::sizes::{MIB, parse_item_size, parse_quantity, parse_quantity_millis};
use crate::api::v1beta1::{
    DEFAULT_MEMORY_LIMIT_MB, DEFAULT_SLAB_CHUNK_MAX_BYTES, MAX_REPLICAS, MIN_ITEM_SIZE_BYTES,
    MIN_WARM_RESTART_MEMORY_MB, Memcached, MemcachedSpec,
};
use crate::api::{DELETION_PROTECTION_ANNOTATION, PLURAL};

mod image;
mod monitoring;
mod security;

use self::image::check_image;
pub use super::violation::{Denial, Violation, Warnings};

/// The longest name a Memcached may have: its StatefulSet's pods carry a
/// `controller-revision-hash` label of `<name>-<10 characters>`, and labels stop at 63.
pub const MAX_NAME_LENGTH: usize = 52;

/// Admits or refuses a new Memcached.
pub fn validate_create(new: &Memcached, issuers: &AllowedIssuers) -> Result<Warnings, Denial> {
    check_object(new, issuers)
}

/// Admits or refuses a change to a Memcached. A change to an object that is being deleted is
/// always admitted: blocking it would keep finalizers from being removed.
pub fn validate_update(
    old: &Memcached,
    new: &Memcached,
    issuers: &AllowedIssuers,
) -> Result<Warnings, Denial> {
    if new.metadata.deletion_timestamp.is_some() || old.metadata.deletion_timestamp.is_some() {
        return Ok(Warnings::new());
    }
    let mut warnings = check_object(new, issuers)?;
    let before = old.spec.replicas.unwrap_or(0);
    let after = new.spec.replicas.unwrap_or(0);
    if before - after > before / 2 {
        warnings.push(format!(
            "spec.replicas: scaling from {before} to {after} removes more than half of the \
             memcached servers; their cached items are lost and clients will see misses"
        ));
    }
    Ok(warnings)
}

/// Admits or refuses deleting a Memcached: refused while it carries
/// `cache.f2367556.dev/deletion-protection: "true"`.
pub fn validate_delete(old: &Memcached) -> Result<Warnings, Denial> {
    let protected = old
        .annotations()
        .get(DELETION_PROTECTION_ANNOTATION)
        .is_some_and(|value| value.trim().eq_ignore_ascii_case("true"));
    if !protected {
        return Ok(Warnings::new());
    }
    let name = old.name_any();
    let namespace = old.namespace().unwrap_or_default();
    Err(Denial::from_violations(vec![Violation::new(
        format!("metadata.annotations[{DELETION_PROTECTION_ANNOTATION}]"),
        format!(
            "Memcached {namespace}/{name} is protected from deletion; lift the protection \
             first with: kubectl annotate {PLURAL} {name} -n {namespace} \
             {DELETION_PROTECTION_ANNOTATION}-"
        ),
    )]))
}

/// Checks a whole object: its name, its metadata and its spec.
fn check_object(object: &Memcached, issuers: &AllowedIssuers) -> Result<Warnings, Denial> {
    let mut violations = Vec::new();
    let mut warnings = Warnings::new();
    check_name(&object.name_any(), &mut violations);
    if object.annotations().contains_key(STASH_ANNOTATION) {
        violations.push(Violation::new(
            format!("metadata.annotations[{STASH_ANNOTATION}]"),
            "is reserved for converting v1beta1 objects to v1alpha1; remove it",
        ));
    }
    check_spec(&object.spec, &mut violations, &mut warnings);
    issuers.check(&object.spec, &mut violations);
    if violations.is_empty() {
        Ok(warnings)
    } else {
        Err(Denial::from_violations(violations))
    }
}

fn check_name(name: &str, violations: &mut Vec<Violation>) {
    // generateName objects have no name yet when the webhook sees them.
    if name.is_empty() {
        return;
    }
    let label_like = name.len() <= MAX_NAME_LENGTH
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !label_like {
        violations.push(Violation::new(
            "metadata.name",
            format!(
                "{name:?} must be a DNS-1035 label of at most {MAX_NAME_LENGTH} characters \
                 (lowercase letters, digits and '-', starting with a letter), because it names \
                 the Service and the StatefulSet's pods"
            ),
        ));
    }
}

fn check_spec(spec: &MemcachedSpec, violations: &mut Vec<Violation>, warnings: &mut Warnings) {
    if let Some(replicas) = spec.replicas
        && !(0..=MAX_REPLICAS).contains(&replicas)
    {
        violations.push(Violation::new(
            "spec.replicas",
            format!("{replicas} is outside 0 to {MAX_REPLICAS}"),
        ));
    }
    if let Some(image) = &spec.image {
        check_image("spec.image", image, violations, warnings);
    }
    check_memcached(spec, violations, warnings);
    if let Some(resources) = &spec.resources {
        check_resources(resources, violations);
    }
    if let Some(port) = spec.service.as_ref().and_then(|s| s.port)
        && !(1..=65535).contains(&port)
    {
        violations.push(Violation::new(
            "spec.service.port",
            format!("{port} is not a port (1 to 65535)"),
        ));
    }
    if let Some(max) = spec
        .pod_disruption_budget
        .as_ref()
        .and_then(|p| p.max_unavailable.as_ref())
    {
        check_max_unavailable(max, violations);
    }
    security::check(spec, violations, warnings);
    monitoring::check(spec, violations, warnings);
}

fn check_memcached(spec: &MemcachedSpec, violations: &mut Vec<Violation>, warnings: &mut Warnings) {
    let Some(memcached) = &spec.memcached else {
        return;
    };
    let memory_mb = memcached.memory_limit_mb.unwrap_or(DEFAULT_MEMORY_LIMIT_MB);
    if !(1..=1_048_576).contains(&memory_mb) {
        violations.push(Violation::new(
            "spec.memcached.memoryLimitMB",
            format!("{memory_mb} is outside 1 to 1048576"),
        ));
    }
    if let Some(limit) = spec
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("memory"))
        && let Some(limit_bytes) = parse_quantity(&limit.0)
    {
        let needed = u128::try_from(memory_mb.max(0)).unwrap_or(0) * u128::from(MIB);
        if needed > limit_bytes {
            violations.push(Violation::new(
                "spec.memcached.memoryLimitMB",
                format!(
                    "{memory_mb} MiB does not fit inside resources.limits.memory ({}); raise \
                     the limit or lower the item memory",
                    limit.0
                ),
            ));
        }
    }
    if memcached.warm_restart == Some(true) && memory_mb < MIN_WARM_RESTART_MEMORY_MB {
        violations.push(Violation::new(
            "spec.memcached.memoryLimitMB",
            format!(
                "{memory_mb} MiB is too little for warmRestart, which needs at least \
                 {MIN_WARM_RESTART_MEMORY_MB}: memcached preallocates a 1 MiB page per slab \
                 class for its memory file, and refuses to start with less"
            ),
        ));
    }
    if let Some(connections) = memcached.max_connections
        && !(1..=1_048_576).contains(&connections)
    {
        violations.push(Violation::new(
            "spec.memcached.maxConnections",
            format!("{connections} is outside 1 to 1048576"),
        ));
    }
    if let Some(threads) = memcached.threads
        && !(1..=256).contains(&threads)
    {
        violations.push(Violation::new(
            "spec.memcached.threads",
            format!("{threads} is outside 1 to 256"),
        ));
    }
    if let Some(size) = &memcached.max_item_size {
        let chunk_set = memcached
            .extra_args
            .iter()
            .flatten()
            .any(|arg| arg.contains("slab_chunk_max"));
        check_item_size(size, memory_mb, chunk_set, violations);
    }
    match memcached.verbosity {
        Some(2) => warnings.push(
            "spec.memcached.verbosity: 2 logs every client command and response; expect heavy \
             logs and slower servers"
                .to_string(),
        ),
        Some(verbosity) if !(0..=2).contains(&verbosity) => violations.push(Violation::new(
            "spec.memcached.verbosity",
            format!("{verbosity} is outside 0 to 2"),
        )),
        _ => {}
    }
    if let Some(args) = &memcached.extra_args {
        check_extra_args(args, violations);
    }
}

fn check_item_size(size: &str, memory_mb: i32, chunk_set: bool, violations: &mut Vec<Violation>) {
    const FIELD: &str = "spec.memcached.maxItemSize";
    let Some(bytes) = (size.len() <= 10).then(|| parse_item_size(size)).flatten() else {
        violations.push(Violation::new(
            FIELD,
            format!("{size:?} is not a size in memcached's notation (bytes, or a number followed by k or m)"),
        ));
        return;
    };
    let half_memory = u64::try_from(memory_mb.max(0)).unwrap_or(0) * MIB / 2;
    if bytes < MIN_ITEM_SIZE_BYTES {
        violations.push(Violation::new(
            FIELD,
            format!("{size} is below memcached's minimum item size (1k)"),
        ));
    } else if bytes > half_memory {
        violations.push(Violation::new(
            FIELD,
            format!(
                "{size} exceeds half of spec.memcached.memoryLimitMB ({memory_mb} MiB); \
                 memcached refuses items larger than half its memory"
            ),
        ));
    } else if !chunk_set && bytes % DEFAULT_SLAB_CHUNK_MAX_BYTES != 0 {
        violations.push(Violation::new(
            FIELD,
            format!(
                "{size} is not a multiple of 512k (512k, 1m, 1536k, 2m, ...): memcached refuses \
                 it with its default slab_chunk_max of 512 KiB (\"-I must be evenly divisible by \
                 slab_chunk_max\"); set -o slab_chunk_max=... in extraArgs for other sizes"
            ),
        ));
    }
}

fn check_extra_args(args: &[String], violations: &mut Vec<Violation>) {
    const FIELD: &str = "spec.memcached.extraArgs";
    if args.len() > 64 {
        violations.push(Violation::new(
            FIELD,
            format!("{} arguments exceed the limit of 64", args.len()),
        ));
    }
    for (index, arg) in args.iter().enumerate().filter(|(_, a)| a.len() > 256) {
        violations.push(Violation::new(
            format!("{FIELD}[{index}]"),
            format!("{} characters exceed the limit of 256", arg.len()),
        ));
    }
    for flag in managed_flags(args) {
        violations.push(Violation::new(
            format!("{FIELD}[{}]", flag.index),
            format!(
                "{:?} sets {}, which the operator manages; set {} instead",
                flag.arg, flag.option, flag.managed_by
            ),
        ));
    }
    for suboption in reserved_suboptions(args) {
        violations.push(Violation::new(
            format!("{FIELD}[{}]", suboption.index),
            format!(
                "sets memcached's -o {}, which extraArgs may not set: {}",
                suboption.name, suboption.why
            ),
        ));
    }
}

fn check_resources(resources: &ResourceRequirements, violations: &mut Vec<Violation>) {
    let mut parsed = |kind: &str, name: &str, value: &str| {
        let millis = parse_quantity_millis(value);
        if millis.is_none() {
            violations.push(Violation::new(
                format!("spec.resources.{kind}.{name}"),
                format!("{value:?} is not a quantity"),
            ));
        }
        millis
    };
    let requests: Vec<_> = resources
        .requests
        .iter()
        .flatten()
        .map(|(name, q)| (name.clone(), q.0.clone(), parsed("requests", name, &q.0)))
        .collect();
    let limits: Vec<_> = resources
        .limits
        .iter()
        .flatten()
        .map(|(name, q)| (name.clone(), q.0.clone(), parsed("limits", name, &q.0)))
        .collect();
    for (name, request, request_millis) in &requests {
        let limit = limits.iter().find(|(limit_name, _, _)| limit_name == name);
        if let (Some(request_millis), Some((_, limit, Some(limit_millis)))) =
            (request_millis, limit)
            && request_millis > limit_millis
        {
            violations.push(Violation::new(
                format!("spec.resources.requests.{name}"),
                format!("{request} exceeds resources.limits.{name} ({limit})"),
            ));
        }
    }
}

fn check_max_unavailable(max: &IntOrString, violations: &mut Vec<Violation>) {
    const FIELD: &str = "spec.podDisruptionBudget.maxUnavailable";
    match max {
        IntOrString::Int(count) if *count < 0 => violations.push(Violation::new(
            FIELD,
            format!("{count} is negative; give a number of pods (0 or more) or a percentage"),
        )),
        IntOrString::String(text) => {
            let percent = text
                .strip_suffix('%')
                .filter(|digits| !digits.is_empty() && digits.len() <= 3)
                .filter(|digits| digits.len() == 1 || !digits.starts_with('0'))
                .filter(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|digits| digits.parse::<u32>().ok())
                .filter(|percent| *percent <= 100);
            if percent.is_none() {
                violations.push(Violation::new(
                    FIELD,
                    format!("{text:?} is neither a number of pods nor a percentage (0% to 100%)"),
                ));
            }
        }
        IntOrString::Int(_) => {}
    }
}

#[cfg(test)]
mod tests;
