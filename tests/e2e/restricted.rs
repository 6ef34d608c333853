//! An operator whose rights a scenario chooses: the operator's own ClusterRole from
//! `config/rbac` less some of its rules, bound to a ServiceAccount, running the controller only,
//! while the suite's operator keeps serving the webhooks but no longer reconciles (a scenario
//! holds its Lease). [`Restricted::stop`] gives everything back.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use memcached_operator::manager::DEFAULT_LEASE_NAME;
use serde_json::json;
use testkit::process::Server;
use testkit::repository;

use crate::cluster::{Env, OPERATOR, OPERATOR_NAMESPACE, eventually};

const WAIT: Duration = Duration::from_secs(60);

/// A running operator without some of its rights.
pub struct Restricted {
    /// Its process.
    pub server: Server,
    role: String,
    rules: Vec<PolicyRule>,
    _kubeconfig: tempfile::TempDir,
}

/// The operator's ClusterRole, as `config/rbac` has it.
fn operators_role() -> ClusterRole {
    let path = repository::root().join("config/rbac/role.yaml");
    let text = std::fs::read_to_string(&path).expect("the operator's ClusterRole");
    let document = memcached_packager::yaml::documents(&text)
        .expect("YAML")
        .into_iter()
        .next()
        .expect("a ClusterRole");
    serde_json::from_value(document).expect("a ClusterRole")
}

/// The sum of the metric `name` (with `labels`, as written between the braces) on `server`.
pub async fn metric(server: &Server, name: &str, labels: &str) -> f64 {
    let text = server.metrics().await;
    let prefix = if labels.is_empty() {
        format!("{name} ")
    } else {
        format!("{name}{{{labels}}} ")
    };
    text.lines()
        .filter(|line| line.starts_with(&prefix))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Whether the suite's operator leads, as its metrics say.
async fn suite_operator_leads(env: &Env) -> Option<bool> {
    let guard = env.operator.lock().await;
    let server = guard.as_ref()?;
    Some(metric(server, "memcached_operator_controller_leader", "").await == 1.0)
}

impl Restricted {
    /// Starts the controller of an operator whose ClusterRole (`name`) is the operator's less
    /// the rules `removed` picks, as a ServiceAccount of `namespace`, once the suite's operator
    /// has stepped down.
    pub async fn start(
        env: &Env,
        namespace: &str,
        name: &str,
        removed: impl Fn(&PolicyRule) -> bool,
    ) -> Restricted {
        let full = operators_role();
        let rules = full.rules.clone().unwrap_or_default();
        let kept: Vec<PolicyRule> = rules.iter().filter(|r| !removed(r)).cloned().collect();
        assert!(kept.len() < rules.len(), "some rule is removed");
        let role = ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            rules: Some(kept),
            ..ClusterRole::default()
        };
        let roles: Api<ClusterRole> = Api::all(env.client.clone());
        roles
            .create(&PostParams::default(), &role)
            .await
            .expect("the ClusterRole is created");
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: name.into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: "operator".into(),
                namespace: Some(namespace.into()),
                ..Subject::default()
            }]),
        };
        let bindings: Api<ClusterRoleBinding> = Api::all(env.client.clone());
        bindings
            .create(&PostParams::default(), &binding)
            .await
            .expect("the ClusterRoleBinding is created");
        let token =
            testkit::control_plane::service_account_token(&env.client, namespace, "operator")
                .await
                .expect("a token");
        let dir = tempfile::tempdir().expect("a directory");
        let kubeconfig = env
            .plane
            .token_kubeconfig(&token, dir.path())
            .expect("a kubeconfig with the token");
        hold_the_lease(env).await;
        let mut server = OPERATOR.controller_only(&kubeconfig).await;
        server.set_metrics_token(&env.metrics_token);
        Restricted {
            server,
            role: name.into(),
            rules,
            _kubeconfig: dir,
        }
    }

    /// Gives the operator back the rules it was started without.
    pub async fn restore_rights(&self, env: &Env) {
        let roles: Api<ClusterRole> = Api::all(env.client.clone());
        let patch = json!({ "rules": self.rules });
        roles
            .patch(&self.role, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the rules are given back");
    }

    /// Stops it, removes its ClusterRole and binding, and gives the suite's operator its Lease
    /// back.
    pub async fn stop(mut self, env: &Env) {
        self.server.terminate();
        self.server.exit_status(Duration::from_secs(20)).await;
        let bindings: Api<ClusterRoleBinding> = Api::all(env.client.clone());
        let _ = bindings.delete(&self.role, &DeleteParams::default()).await;
        let roles: Api<ClusterRole> = Api::all(env.client.clone());
        let _ = roles.delete(&self.role, &DeleteParams::default()).await;
        let leases: Api<Lease> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
        leases
            .delete(DEFAULT_LEASE_NAME, &DeleteParams::default())
            .await
            .expect("the Lease is given back");
        eventually("the suite's operator leads again", WAIT, || async {
            suite_operator_leads(env).await?.then_some(())
        })
        .await;
    }
}

/// Has the suite's operator step down: its Lease held by another holder for an hour.
async fn hold_the_lease(env: &Env) {
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), OPERATOR_NAMESPACE);
    let now = MicroTime(jiff::Timestamp::now());
    leases
        .patch(
            DEFAULT_LEASE_NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": {
                "holderIdentity": "e2e-restricted-operator",
                "leaseDurationSeconds": 3600,
                "acquireTime": now,
                "renewTime": now,
            }})),
        )
        .await
        .expect("the Lease is taken");
    eventually("the suite's operator steps down", WAIT, || async {
        (!suite_operator_leads(env).await?).then_some(())
    })
    .await;
}
