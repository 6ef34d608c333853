//! Proves what only a real node can: the local cluster's kubelet, containerd and runc run the
//! operator from the image built from the shipped Dockerfile, and enforce what the Deployment
//! asks of its containers; the node keeps pod traffic on this machine, lets pods reach no
//! listener of it but the API server and the kubelet, admits no pod beyond Pod Security's
//! `baseline` unless its namespace opts out, and pulls from no registry but the local one;
//! memcached's servers answer by the names `status.servers` gives, through the cluster's DNS,
//! and refuse the clients TLS, client certificates and credentials keep out, and a renewed
//! certificate and a CA rotation through cert-manager reach them with no client refused; their exporter
//! reports what the clients did, and a Prometheus run by the Prometheus Operator scrapes it
//! through the Memcached's ServiceMonitor and fires its alert for a stopped server; each of
//! their containers reaches only its own processes and files; and scorecard's six tests pass
//! on the shipped bundle, run in pods as certification runs them.
//!
//! One environment serves every scenario (`testkit::scenarios`): a control plane with a real
//! node (`NODE=kubelet hack/control-plane.sh start`) and `make deploy` on it
//! (`hack/deploy.sh`: images built and pushed to the local registry, cert-manager,
//! config/default through hack/node/deploy). A plain `cargo test` lists them as ignored (they
//! need .tools and root); `make test` runs them with `--ignored`.

mod ca_rotation;
mod cluster;
mod confinement;
mod controls;
mod credentials;
mod dns;
mod faults;
mod graceful;
mod identity;
mod isolation;
mod metrics;
mod network;
mod pod_reach;
mod prometheus;
mod rotation;
mod scorecard;
mod secured;
mod warm_restart;

use crate::cluster::Env;

fn main() {
    let scenarios = testkit::scenarios![
        network::the_node_keeps_pod_traffic_on_this_machine,
        pod_reach::pods_reach_only_the_api_server_and_the_kubelet_on_this_machine,
        pod_reach::pod_security_baseline_is_enforced_unless_a_namespace_opts_out,
        pod_reach::every_image_is_pulled_from_the_local_registry_alone,
        confinement::the_operator_runs_from_its_image_as_the_deployment_confines_it,
        controls::the_runtime_refuses_what_a_container_may_not_do,
        dns::memcached_answers_by_the_names_in_its_status_through_cluster_dns,
        secured::tls_client_certificates_and_credentials_are_required_of_every_client,
        secured::tls_alone_serves_tls_clients_and_refuses_plaintext,
        metrics::the_exporter_reports_what_clients_did_with_tls_and_authentication_on,
        prometheus::prometheus_scrapes_the_servers_and_fires_the_down_alert_for_a_stopped_one,
        isolation::each_container_reaches_only_its_own_processes_and_files,
        identity::a_client_certificate_for_servers_only_is_reported_on_the_memcached,
        rotation::a_renewed_certificate_is_served_without_a_restart_or_a_lost_item,
        ca_rotation::a_ca_rotation_through_cert_manager_refuses_no_client,
        credentials::changed_credentials_reach_the_server_without_a_restart_or_a_lost_item,
        warm_restart::a_graceful_restart_keeps_the_items_and_a_kill_loses_them,
        graceful::a_deleted_server_serves_through_its_pre_stop_delay_out_of_its_endpoints,
        scorecard::scorecard_passes_every_test_of_the_shipped_configuration,
        faults::containerd_restarted_memcached_serves_through_it,
        faults::kubelet_restarted_memcached_serves_through_it,
        faults::a_killed_memcached_is_restarted_and_the_status_and_events_follow,
        faults::memcached_out_of_memory_is_restarted_and_the_operator_stays_up,
        faults::the_partitioned_leader_steps_down_and_no_two_replicas_ever_write,
        faults::kube_apiserver_restarted_while_memcacheds_are_created_every_one_ends_available,
        faults::etcd_restarted_while_memcacheds_are_created_every_one_ends_available,
    ];
    testkit::scenarios::run(|| async { Env::start().await }, scenarios);
}
