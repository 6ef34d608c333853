//! Proves the operator against a real kube-apiserver, etcd and kube-controller-manager:
//! the API server calls the webhooks through OLM-style wiring, and the controller manager
//! runs the StatefulSet controller and the garbage collector.
//!
//! Every scenario needs the pinned tools in `.tools/bin`, so a plain `cargo test` lists them
//! as ignored (needs .tools: make test); `make test` runs them with `-- --include-ignored`,
//! and `cargo test --test e2e -- --ignored NAME` runs one.
//!
//! One control plane and one operator serve every scenario (`testkit::scenarios`): they start
//! when the first scenario runs, never for a listing or a run that ignores them all. Scenarios
//! run one at a time because some stop the operator or remove the webhook wiring. A control
//! plane that cannot start fails every scenario with the reason; nothing is skipped. After a
//! scenario fails, the certificates, the wiring and the operator are put back as the suite
//! started them ([`Env::restore`]), so that the scenarios after it start from there.

mod admission;
mod auth_file;
mod ca_change;
mod ca_restart;
mod churn;
mod client_auth_request;
mod cluster;
mod controller;
mod drills;
mod issuers;
mod metrics;
mod network_policy;
mod optional_children;
mod proxy;
mod renewal;
mod resilience;
mod restricted;
mod status;
mod supervisor;
mod tls_profile;
mod unwired;

use crate::cluster::Env;

fn main() {
    let scenarios = testkit::scenarios![
        admission::a_minimal_v1beta1_object_is_stored_with_every_default,
        admission::invalid_objects_are_refused_with_the_validators_message,
        admission::invalid_objects_are_refused_through_kubectl_apply,
        admission::deletion_protection_blocks_delete_until_the_annotation_is_removed,
        admission::a_v1alpha1_round_trip_through_v1beta1_loses_nothing,
        admission::a_server_side_dry_run_returns_the_defaulted_object_and_stores_nothing,
        admission::config_default_applies_with_a_server_side_dry_run,
        auth_file::memcached_reads_auth_files_as_the_operator_says,
        ca_change::a_new_ca_is_trusted_before_certificates_it_signs_are_presented,
        client_auth_request::under_request_a_client_without_a_certificate_is_served_and_a_strangers_is_refused,
        supervisor::the_supervisor_reloads_a_changed_auth_file_and_refuses_one_memcached_would_refuse,
        ca_restart::the_supervisor_restarts_memcached_warm_once_per_request_for_a_withdrawn_ca,
        controller::children_appear_owned_by_the_memcached,
        controller::kubectl_scale_works_through_the_scale_subresource,
        controller::a_configuration_change_rolls_the_statefulset,
        controller::hand_made_changes_to_children_are_put_back,
        controller::children_are_written_by_server_side_apply_only,
        controller::a_child_created_by_release_0_1_0_is_taken_over_and_loses_a_field_no_longer_asked_for,
        controller::reconciling_an_unchanged_memcached_writes_nothing,
        controller::deleting_the_memcached_removes_its_children,
        controller::without_webhooks_an_invalid_spec_is_reported_and_changes_nothing,
        controller::the_controllers_caches_hold_no_write_history,
        status::each_status_field_follows_the_features_turned_on_and_off,
        status::a_failed_status_write_still_reports_the_changes_made,
        issuers::a_user_with_only_memcached_rights_is_refused_a_cluster_issuer,
        network_policy::a_network_policy_follows_the_sources_asked_for_and_goes_when_no_longer_asked_for,
        optional_children::certificates_and_service_monitors_are_written_once_their_apis_are_installed,
        optional_children::a_certificate_api_that_cannot_be_listed_holds_up_no_other_memcached,
        metrics::metrics_answer_401_without_a_token_403_without_the_right_and_200_with_metrics_reader,
        metrics::a_scrape_with_a_cached_authorization_makes_no_api_call,
        tls_profile::the_cluster_tls_profile_reaches_new_connections_without_a_failed_request,
        proxy::a_cluster_proxy_is_used_where_client_go_would_use_it,
        resilience::certificate_rotation_under_continuous_writes_loses_none,
        resilience::the_fallback_certificate_layout_works_end_to_end,
        renewal::a_renewal_under_a_new_ca_is_served_once_the_api_server_trusts_it,
        resilience::leadership_passes_to_the_other_replica_on_sigterm,
        resilience::a_lost_lease_stops_reconciling_within_the_lease_duration,
        drills::drill_operator_down_refuses_writes_and_v1alpha1_reads,
        drills::drill_an_expired_certificate_fails_the_tls_handshake,
        drills::drill_a_certificate_from_another_ca_is_an_unknown_authority,
        drills::drill_a_certificate_without_the_dialed_address_fails_verification,
        drills::drill_missing_certificates_keep_the_operator_unready,
        drills::drill_a_webhook_slower_than_its_timeout_fails_writes,
        drills::drill_a_finalizer_held_object_deleted_while_the_webhook_is_down,
        drills::drill_a_lease_held_by_a_dead_replica_is_taken_over_after_expiry,
        drills::drill_an_operator_forbidden_to_list_memcacheds_says_so_and_still_stops,
        // Last: the garbage collector works through the thousand deleted owners for minutes
        // (20 requests a second), which would hold up the deletions of the scenarios after it.
        churn::a_thousand_memcacheds_created_and_deleted_leave_no_record_behind,
    ];
    testkit::scenarios::run_restoring(
        || async { Env::start().await },
        |env| Box::pin(env.restore()),
        scenarios,
    );
}
