//! Proves the operator as users get it: installed by the real OLM v0 from the shipped
//! catalog's image through a Subscription, on a local control plane with a real node
//! (kubelet, containerd, the images built from the shipped Dockerfiles). OLM's Deployment runs
//! two replicas in containers on OLM's certificates with the ServiceAccount and RBAC the CSV
//! grants; the API server calls their webhooks through the wiring OLM wrote; memcached runs
//! in containers too.
//!
//! One install serves every scenario (`testkit::scenarios`), started by the first that runs.
//! Scenarios run in the order listed: the local registry's catalogue once every image is built
//! (nothing built here under an upstream name), pinning through a registry that needs a
//! login, a cluster-wide proxy set through the
//! Subscription early
//! (the replicas OLM then rolls out are the ones the later scenarios use), the RBAC check of
//! the operator's logs after everything else made the operator work, then `check-bundle`'s
//! verdicts against OLM's on bundle variants, then OLM's certificate rotation and the upgrade,
//! the uninstall, and last a release pinned by digest installed through a mirror that serves
//! digests only. A plain `cargo test` lists them as ignored (they need .tools and
//! root); `make test` runs them with `--ignored`.

mod api;
mod cluster;
mod credentials;
mod install;
mod leader;
mod lifecycle;
mod operand;
mod pinned;
mod pod_security;
mod proxy;
mod rbac;
mod registry;
mod upgrade;
mod variants;
mod verdicts;

use crate::cluster::Env;

fn main() {
    let scenarios = testkit::scenarios![
        install::olm_runs_two_replicas_on_its_certificates_and_wires_every_webhook,
        install::olms_webhooks_are_the_ones_config_installs_without_olm,
        registry::the_local_registry_holds_no_rebuild_under_an_upstream_name,
        credentials::a_registry_that_needs_a_login_is_pinned_with_the_logins_credentials,
        api::both_api_versions_go_through_olms_wiring,
        proxy::a_proxy_set_in_the_subscription_is_never_asked_for_what_no_proxy_covers,
        operand::memcached_answers_on_every_server_and_follows_kubectl_scale,
        pod_security::restricted_pod_security_admits_the_operator_and_memcached,
        leader::killing_the_leaders_process_hands_the_lease_to_a_live_replica,
        rbac::with_one_rule_removed_the_check_finds_forbidden,
        rbac::the_operator_works_with_only_what_the_csv_grants,
        verdicts::check_bundle_and_olm_agree_on_every_bundle_variant,
        lifecycle::olm_rotates_the_certificate_under_continuous_writes,
        upgrade::upgrading_to_the_next_release_keeps_every_object_and_write,
        lifecycle::uninstalling_leaves_the_crd_and_memcacheds_with_conversion_turned_off,
        pinned::a_release_pinned_by_digest_installs_through_a_digest_only_mirror,
    ];
    testkit::scenarios::run(|| async { Env::start().await }, scenarios);
}
