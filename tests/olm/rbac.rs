//! RBAC as shipped: the operator works with only what the CSV grants (OLM made the
//! ServiceAccount, ClusterRole and bindings from it), and nothing in either replica's logs
//! says `forbidden`. The same check, run on an operator whose ClusterRole lacks one of the
//! CSV's rules, finds the refusals: the check can fail.

use std::sync::Arc;

use serde_json::{Value, json};
use testkit::control_plane::service_account_token;
use testkit::process::OperatorBinary;

use crate::cluster::{Env, OPERATOR, WAIT, eventually};
use crate::install::{csv, csv_service_account};

/// The log lines that report a refusal by the API server's authorizer.
fn forbidden_lines(logs: &str) -> Vec<&str> {
    logs.lines()
        .filter(|line| line.to_ascii_lowercase().contains("forbidden"))
        .collect()
}

/// The cluster-wide rules the CSV grants its ServiceAccount.
fn cluster_rules(csv: &Value) -> Vec<Value> {
    let account = csv_service_account(csv);
    csv["spec"]["install"]["spec"]["clusterPermissions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["serviceAccountName"] == account.as_str())
        .flat_map(|p| p["rules"].as_array().cloned().unwrap_or_default())
        .collect()
}

pub async fn with_one_rule_removed_the_check_finds_forbidden(env: Arc<Env>) {
    let namespace = env.create_namespace("olm-rbac").await;
    let mut rules = cluster_rules(&csv(&env));
    let before = rules.len();
    rules.retain(|rule| {
        !rule["resources"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r == "statefulsets"))
    });
    assert_eq!(
        rules.len() + 1,
        before,
        "the CSV grants statefulsets in one rule"
    );
    let account = "one-rule-short";
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": account},
        "rules": rules,
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": account},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": account},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    });
    for object in [role, binding] {
        let (ok, _, stderr) = env.kubectl(&["apply", "-f", "-"], Some(&object.to_string()));
        assert!(ok, "kubectl apply: {stderr}");
    }
    let token = service_account_token(&env.client, &namespace, account)
        .await
        .expect("a token for the service account");
    let dir = tempfile::tempdir().expect("a directory");
    let kubeconfig = env
        .plane
        .token_kubeconfig(&token, dir.path())
        .expect("a kubeconfig with the token");
    let mut operator = OperatorBinary::new(OPERATOR)
        .controller_only(&kubeconfig)
        .await;
    let found = eventually("the check finds a refusal in the logs", WAIT, || async {
        let logs = operator.last_logs(usize::MAX);
        let found: Vec<String> = forbidden_lines(&logs)
            .iter()
            .map(|l| l.to_string())
            .collect();
        (!found.is_empty()).then_some(found)
    })
    .await;
    operator.terminate();
    operator.exit_status(testkit::process::READY_WITHIN).await;
    assert!(
        found.iter().any(|line| line.contains("statefulsets")),
        "the refusal names the missing rule's resource: {found:?}"
    );
    eprintln!(
        "figures: without the statefulsets rule, {} forbidden log line(s), e.g. {}",
        found.len(),
        found[0]
    );
}

pub async fn the_operator_works_with_only_what_the_csv_grants(env: Arc<Env>) {
    let csv = csv(&env);
    let account = csv_service_account(&csv);
    let user = format!(
        "system:serviceaccount:{}:{account}",
        env.installed.namespace
    );
    // The ServiceAccount is not an administrator: what the CSV does not grant, it may not do.
    let (_, stdout, _) = env.kubectl(
        &["auth", "can-i", "--as", &user, "create", "clusterroles"],
        None,
    );
    assert_eq!(stdout.trim(), "no", "{user} may create clusterroles");
    let (_, stdout, _) = env.kubectl(
        &["auth", "can-i", "--as", &user, "create", "statefulsets"],
        None,
    );
    assert_eq!(
        stdout.trim(),
        "yes",
        "{user} may create statefulsets as the CSV grants"
    );

    // Everything the scenarios before this one made the operator do, it did without a refusal.
    let pods = env.operator_pods().await;
    assert_eq!(pods.len(), 2);
    let mut lines = 0;
    let mut written = 0;
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let logs = env.pod_logs(pod).await;
        assert!(!logs.is_empty(), "{name} has logs");
        lines += logs.lines().count();
        written += logs.lines().filter(|l| l.contains("child written")).count();
        let forbidden = forbidden_lines(&logs);
        assert!(
            forbidden.is_empty(),
            "{name} was refused:\n{}",
            forbidden.join("\n")
        );
    }
    assert!(
        written > 0,
        "the replicas' logs show children written: the logs read are the real ones"
    );
    eprintln!(
        "figures: {lines} log lines of both replicas, {written} children written, 0 forbidden, as {user}"
    );
}
