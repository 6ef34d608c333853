//! Proves the operator as Helm users install it: the chart the packager writes
//! (`charts/memcached-operator`), pushed to the local registry as an OCI artifact and
//! `helm install`ed from there into a fresh cluster, on a local control plane with a real node
//! (kubelet, containerd, the images built from the shipped Dockerfiles) and the real
//! cert-manager (controller and cainjector, v1.11.5) issuing the webhooks' certificate, as the
//! chart requires.
//!
//! One install serves every scenario (`testkit::scenarios`), started by the first that runs,
//! in the order listed: the install (a sample Available, an invalid object and a wrong value
//! refused), a cluster-wide proxy set through the values, the upgrade to the next chart
//! version with a client writing throughout, `helm uninstall` then a new `helm install`, and
//! last an install without cert-manager (`certificates.source=operator`), whose own
//! self-signed certificate the operator renews under a client writing throughout. A plain `cargo test` lists them as ignored (they need .tools and root); `make test`
//! runs them with `--ignored`.

mod cluster;
mod install;
mod proxy;
mod self_signed;
mod uninstall;
mod upgrade;

use crate::cluster::Env;

fn main() {
    let scenarios = testkit::scenarios![
        install::installed_from_the_registry_serves_a_sample_and_refuses_what_is_invalid,
        proxy::a_proxy_set_in_the_values_is_never_asked_for_what_no_proxy_covers,
        upgrade::upgrading_to_the_next_chart_fails_no_write,
        uninstall::uninstalling_keeps_the_crd_and_the_memcacheds_which_a_new_install_serves,
        self_signed::the_operators_own_certificate_serves_and_renews_without_a_failed_write,
    ];
    testkit::scenarios::run(|| async { Env::start().await }, scenarios);
}
