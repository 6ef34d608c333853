//! Proves the operator as users install it without OLM: `make deploy` of `config/default` on
//! a local control plane with a real node (kubelet, containerd, the images built from the
//! shipped Dockerfiles), with the real cert-manager (controller and cainjector, v1.11.5)
//! issuing the webhooks' certificate from a CA chain and writing every caBundle. The Deployment runs two replicas on cert-manager's
//! Secret; the API server calls their webhooks through the wiring `config/default` declares.
//!
//! One deploy serves every scenario (`testkit::scenarios`), started by the first that runs, in
//! the order listed: the install, the leaf renewal under a stable CA, the leader's pod deleted
//! during another such renewal, the self-signed renewal
//! where the CA changes with the certificate (with the operator's default of waiting for the
//! caBundles, then without it), and `make undeploy` last. A plain `cargo test` lists them as
//! ignored (they need .tools and root); `make test` runs them with
//! `--ignored`.

mod cluster;
mod install;
mod leader;
mod renewal;
mod undeploy;

use crate::cluster::Env;

fn main() {
    let scenarios = testkit::scenarios![
        install::make_deploy_issues_the_certificate_and_wires_every_webhook,
        renewal::renewing_the_leaf_under_a_stable_ca_loses_no_write_and_restarts_nothing,
        leader::deleting_the_leaders_pod_during_a_renewal_fails_no_write,
        renewal::a_self_signed_renewal_is_served_once_the_ca_bundles_trust_it,
        renewal::without_waiting_for_the_ca_bundles_a_self_signed_renewal_fails_writes,
        undeploy::make_undeploy_removes_everything_it_made,
    ];
    testkit::scenarios::run(|| async { Env::start().await }, scenarios);
}
