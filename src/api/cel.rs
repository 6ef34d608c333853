//! Builds the CRD's CEL rules and patterns from the same constants the webhook enforces.
//!
//! The API server evaluates these even when the webhook is down, so every invariant that CEL
//! can express within the API server's cost budget is here; the webhook repeats them with
//! messages that quote the values, and adds what CEL cannot do: metadata, warnings, and
//! quantities (`resources` values are unbounded int-or-strings, so any CEL over them, even
//! `string(...)`, is refused by the cost estimator). Messages are static for the same reason:
//! `string(int)` and `filter().join()` in a messageExpression exceed the budget. Tests in `admission::validate` run both over the
//! same cases to show they agree.

use kube::core::{Message, Reason, Rule};

use super::memcached_flags::managed_flag_pattern;
use super::memcached_suboptions::reserved_suboption_pattern;
use super::v1beta1::limits::{
    DEFAULT_MEMORY_LIMIT_MB, DEFAULT_METRICS_PORT, DEFAULT_PORT, DEFAULT_SLAB_CHUNK_MAX_BYTES,
    DEFAULT_TERMINATION_GRACE_SECONDS, MIN_ITEM_SIZE_BYTES, MIN_WARM_RESTART_MEMORY_MB,
};

/// A Prometheus duration, as the ServiceMonitor CRD's own pattern has it.
pub const PROMETHEUS_DURATION_PATTERN: &str =
    "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$";

/// memcached's item-size notation: digits, optionally followed by `k`/`K` or `m`/`M`.
pub const ITEM_SIZE_PATTERN: &str = "^[0-9]+[kKmM]?$";

/// An OCI image reference (`[registry[:port]/]path[:tag][@digest]`), the grammar of the
/// distribution reference library in RE2 syntax, less IPv6 registry hosts (which the
/// webhook's parser refuses too).
pub const IMAGE_REFERENCE_PATTERN: &str = concat!(
    "^",
    // optional registry: a domain with an optional port, then a slash
    r"(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?/)?",
    // path components: lowercase alphanumerics joined by separators
    r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*)*",
    // optional tag, optional digest
    r"(?::[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?",
    "$"
);

/// CEL for the byte size of `self.maxItemSize` (already known to match [`ITEM_SIZE_PATTERN`]).
fn item_size_bytes() -> &'static str {
    "(self.maxItemSize.endsWith('k') || self.maxItemSize.endsWith('K') ? \
     int(self.maxItemSize.substring(0, self.maxItemSize.size() - 1)) * 1024 : \
     (self.maxItemSize.endsWith('m') || self.maxItemSize.endsWith('M') ? \
     int(self.maxItemSize.substring(0, self.maxItemSize.size() - 1)) * 1048576 : \
     int(self.maxItemSize)))"
}

/// CEL for `memoryLimitMB` seen from `spec.memcached`, with its default.
fn memory_mb_here() -> String {
    format!("(has(self.memoryLimitMB) ? self.memoryLimitMB : {DEFAULT_MEMORY_LIMIT_MB})")
}

/// On `spec.memcached`: the item size is at least 1k and at most half the item memory, as
/// memcached itself requires.
pub fn max_item_size_in_range() -> Rule {
    let bytes = item_size_bytes();
    let memory = memory_mb_here();
    Rule::new(format!(
        "!has(self.maxItemSize) || !self.maxItemSize.matches('{ITEM_SIZE_PATTERN}') || \
         ({bytes} >= {MIN_ITEM_SIZE_BYTES} && {bytes} * 2 <= {memory} * 1048576)"
    ))
    .message(Message::Message(format!(
        "spec.memcached.maxItemSize must be at least 1k and at most half of memoryLimitMB \
         (default {DEFAULT_MEMORY_LIMIT_MB})"
    )))
    .field_path(".maxItemSize")
    .reason(Reason::FieldValueInvalid)
}

/// On `spec.memcached`: with memcached's default largest slab chunk (512 KiB), the item size is
/// a multiple of it, as memcached requires ("-I must be evenly divisible by slab_chunk_max");
/// an `extraArgs` that sets `slab_chunk_max` takes that check over.
pub fn max_item_size_fits_slab_chunks() -> Rule {
    let bytes = item_size_bytes();
    Rule::new(format!(
        "!has(self.maxItemSize) || !self.maxItemSize.matches('{ITEM_SIZE_PATTERN}') || \
         (has(self.extraArgs) && self.extraArgs.exists(a, a.contains('slab_chunk_max'))) || \
         ({bytes} >= {DEFAULT_SLAB_CHUNK_MAX_BYTES} && {bytes} % {DEFAULT_SLAB_CHUNK_MAX_BYTES} == 0)"
    ))
    .message(
        "spec.memcached.maxItemSize must be a multiple of 512k (512k, 1m, 1536k, 2m, ...): \
         memcached refuses other sizes with its default slab_chunk_max; set \
         -o slab_chunk_max=... in extraArgs for others",
    )
    .field_path(".maxItemSize")
    .reason(Reason::FieldValueInvalid)
}

/// On `spec.memcached`: a warm restart has the item memory memcached preallocates for it.
pub fn warm_restart_has_its_memory() -> Rule {
    let memory = memory_mb_here();
    Rule::new(format!(
        "!has(self.warmRestart) || !self.warmRestart || {memory} >= {MIN_WARM_RESTART_MEMORY_MB}"
    ))
    .message(Message::Message(format!(
        "spec.memcached.warmRestart needs memoryLimitMB of at least \
         {MIN_WARM_RESTART_MEMORY_MB}: memcached preallocates a page per slab class for its \
         memory file"
    )))
    .field_path(".memoryLimitMB")
    .reason(Reason::FieldValueInvalid)
}

/// On `spec.memcached.extraArgs`: no argument sets a flag the operator manages.
pub fn no_managed_flags() -> Rule {
    let pattern = managed_flag_pattern();
    Rule::new(format!("self.all(arg, !arg.matches('{pattern}'))"))
        .message(
            "spec.memcached.extraArgs may not set flags the operator manages (memory, \
             connections, threads, ports, listen address, item size, verbosity, TLS, auth file, \
             memory file); use the matching spec field instead",
        )
        .reason(Reason::FieldValueForbidden)
}

/// On `spec.memcached.extraArgs`: no argument sets a `-o` sub-option the operator keeps for
/// itself.
pub fn no_reserved_suboptions() -> Rule {
    let pattern = reserved_suboption_pattern();
    Rule::new(format!("self.all(arg, !arg.matches('{pattern}'))"))
        .message(
            "spec.memcached.extraArgs may not set memcached -o sub-options that the operator \
             sets or that would weaken the spec: ssl_* (use spec.tls), ext_*, no_*, proxy_*, \
             modern, relaxed_privileges, sock_cookie_id",
        )
        .reason(Reason::FieldValueForbidden)
}

/// A DNS-1123 subdomain, the grammar of a Secret's name.
pub const DNS_SUBDOMAIN_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// On `spec.tls`: the Secret the certificate comes from is named.
pub fn tls_secret_is_named() -> Rule {
    Rule::new("has(self.secretName)")
        .message("spec.tls.secretName is required: the Secret that holds tls.crt and tls.key")
        .field_path(".secretName")
        .reason(Reason::FieldValueRequired)
}

/// On `spec.tls`: at most one issuer of the certificate.
pub fn one_certificate_source() -> Rule {
    Rule::new("!has(self.issuerRef) || !has(self.openShiftServiceCA) || !self.openShiftServiceCA")
        .message(
            "spec.tls.issuerRef and spec.tls.openShiftServiceCA both issue the certificate; \
             choose one",
        )
        .field_path(".openShiftServiceCA")
        .reason(Reason::FieldValueForbidden)
}

/// A ConfigMap key's grammar.
pub const CONFIG_MAP_KEY_PATTERN: &str = r"^[-._a-zA-Z0-9]+$";

/// On `spec.tls`: the OpenShift service CA writes no `ca.crt`, so client certificates are
/// verified only against a `clientCA`.
pub fn service_ca_has_no_client_ca() -> Rule {
    Rule::new(
        "!has(self.openShiftServiceCA) || !self.openShiftServiceCA || !has(self.clientAuth) || \
         self.clientAuth == 'None' || has(self.clientCA)",
    )
    .message(
        "spec.tls.clientAuth must be None with openShiftServiceCA unless spec.tls.clientCA \
         names the CAs: the service CA writes no ca.crt to verify client certificates against",
    )
    .field_path(".clientAuth")
    .reason(Reason::FieldValueForbidden)
}

/// On `spec.tls`: under `clientAuth: Require` the sidecars need a client certificate of
/// their own, issued by the operator (`issuerRef`) or named (`clientSecretName`).
pub fn required_client_identity() -> Rule {
    Rule::new(
        "!has(self.clientAuth) || self.clientAuth != 'Require' || has(self.issuerRef) || \
         has(self.clientSecretName)",
    )
    .message(
        "spec.tls.clientSecretName is required with clientAuth Require and no issuerRef: the \
         Secret with the client certificate the pod's sidecars present (they never use the \
         server's key)",
    )
    .field_path(".clientSecretName")
    .reason(Reason::FieldValueRequired)
}

/// On `spec.tls`: a client Secret is for sidecars that present a client certificate.
pub fn client_secret_only_with_client_auth() -> Rule {
    Rule::new("!has(self.clientSecretName) || (has(self.clientAuth) && self.clientAuth != 'None')")
        .message(
            "spec.tls.clientSecretName is used only with clientAuth Request or Require: with None \
         no client certificate is asked for",
        )
        .field_path(".clientSecretName")
        .reason(Reason::FieldValueForbidden)
}

/// On `spec.tls`: client CAs are for servers that ask for client certificates.
pub fn client_ca_only_with_client_auth() -> Rule {
    Rule::new("!has(self.clientCA) || (has(self.clientAuth) && self.clientAuth != 'None')")
        .message(
            "spec.tls.clientCA is used only with clientAuth Request or Require: with None no \
             client certificate is verified",
        )
        .field_path(".clientCA")
        .reason(Reason::FieldValueForbidden)
}

/// On `spec.tls`: the sidecars' client Secret is not the server's.
pub fn client_secret_is_not_the_servers() -> Rule {
    Rule::new(
        "!has(self.clientSecretName) || !has(self.secretName) || \
         self.clientSecretName != self.secretName",
    )
    .message(
        "spec.tls.clientSecretName must not be spec.tls.secretName: the sidecars never hold \
         the server's key",
    )
    .field_path(".clientSecretName")
    .reason(Reason::FieldValueInvalid)
}

/// On `spec.auth`: the Secret the credentials come from is named.
pub fn auth_secret_is_named() -> Rule {
    Rule::new("has(self.secretName)")
        .message(
            "spec.auth.secretName is required: the Secret whose authfile key holds the credentials",
        )
        .field_path(".secretName")
        .reason(Reason::FieldValueRequired)
}

/// On `spec`: the plaintext port beside TLS is not the client port.
pub fn plaintext_port_is_not_the_client_port() -> Rule {
    Rule::new(format!(
        "!has(self.tls) || !has(self.tls.plaintextPort) || self.tls.plaintextPort != \
         (has(self.service) && has(self.service.port) ? self.service.port : {DEFAULT_PORT})"
    ))
    .message(Message::Message(format!(
        "spec.tls.plaintextPort must differ from the client port, spec.service.port (default \
         {DEFAULT_PORT})"
    )))
    .field_path(".tls.plaintextPort")
    .reason(Reason::FieldValueInvalid)
}

/// On `spec`: the exporter's port is none of memcached's ports.
pub fn metrics_port_is_its_own() -> Rule {
    Rule::new(format!(
        "!has(self.monitoring) || ((has(self.monitoring.port) ? self.monitoring.port : \
         {DEFAULT_METRICS_PORT}) != (has(self.service) && has(self.service.port) ? \
         self.service.port : {DEFAULT_PORT}) && (!has(self.tls) || !has(self.tls.plaintextPort) \
         || (has(self.monitoring.port) ? self.monitoring.port : {DEFAULT_METRICS_PORT}) != \
         self.tls.plaintextPort))"
    ))
    .message(Message::Message(format!(
        "spec.monitoring.port (default {DEFAULT_METRICS_PORT}) must differ from memcached's \
         ports: spec.service.port (default {DEFAULT_PORT}) and spec.tls.plaintextPort"
    )))
    .field_path(".monitoring.port")
    .reason(Reason::FieldValueInvalid)
}

/// On `spec`: with monitoring and a NetworkPolicy, the NetworkPolicy says who may scrape.
pub fn metrics_sources_are_listed() -> Rule {
    Rule::new(
        "!has(self.monitoring) || !has(self.networkPolicy) || \
         (has(self.networkPolicy.metricsSources) && size(self.networkPolicy.metricsSources) > 0)",
    )
    .message(
        "spec.networkPolicy.metricsSources must list who may scrape the exporter (such as the \
         monitoring namespace) when spec.monitoring is on; without one no scraper could reach it",
    )
    .field_path(".networkPolicy.metricsSources")
    .reason(Reason::FieldValueRequired)
}

/// On `spec.gracefulShutdown`: the grace period outlasts the preStop delay, so the kubelet
/// signals memcached before it kills it.
pub fn grace_period_outlasts_the_delay() -> Rule {
    Rule::new(format!(
        "(has(self.terminationGracePeriodSeconds) ? self.terminationGracePeriodSeconds : \
         {DEFAULT_TERMINATION_GRACE_SECONDS}) > \
         (has(self.preStopDelaySeconds) ? self.preStopDelaySeconds : 0)"
    ))
    .message(Message::Message(format!(
        "spec.gracefulShutdown.terminationGracePeriodSeconds (default \
         {DEFAULT_TERMINATION_GRACE_SECONDS}) must be longer than preStopDelaySeconds"
    )))
    .field_path(".terminationGracePeriodSeconds")
    .reason(Reason::FieldValueInvalid)
}

/// On `spec.networkPolicy`: the sources that may connect are listed.
pub fn allowed_sources_are_listed() -> Rule {
    Rule::new("has(self.allowedSources) && size(self.allowedSources) > 0")
        .message(
            "spec.networkPolicy.allowedSources must list at least one source (pods, namespaces \
             or address blocks); without one no client could connect",
        )
        .field_path(".allowedSources")
        .reason(Reason::FieldValueRequired)
}

/// On `spec.podDisruptionBudget.maxUnavailable`: a count of zero or more, or a percentage.
pub fn max_unavailable_is_count_or_percent() -> Rule {
    Rule::new("string(self).matches('^([0-9]+|(100|[1-9]?[0-9])%)$')")
        .message("spec.podDisruptionBudget.maxUnavailable must be a number of pods (0 or more) or a percentage (0% to 100%)")
        .reason(Reason::FieldValueInvalid)
}
