//! Shows who may use which certificate issuer, against the API server's own authentication
//! and RBAC: a ServiceAccount whose only right is Memcacheds in one namespace is refused a
//! ClusterIssuer by the webhook and, with the webhooks taken away, by the controller, each
//! with the message that says how to allow it; once the operator allows that ClusterIssuer
//! (its `ALLOWED_ISSUERS` environment variable, as a Subscription's `spec.config.env` sets
//! it), the same request is admitted and reconciled.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use memcached_operator::admission::issuers::ALLOWED_ISSUERS_ENV;
use memcached_operator::admission::{AllowedIssuers, Defaults, default_spec, validate_create};
use memcached_operator::api::v1beta1::{IssuerRef, Memcached, MemcachedSpec, TlsSpec};
use testkit::cases::DENIED_BY_VALIDATOR;
use testkit::process::RELATED_IMAGE;

use crate::cluster::{Env, eventually};
use crate::unwired;

const WAIT: Duration = Duration::from_secs(60);
/// The ServiceAccount that may manage Memcacheds in the scenario's namespace, and nothing else.
const DEVELOPER: &str = "developer";
/// The ClusterIssuer the developer asks for.
const CLUSTER_ISSUER: &str = "shared-ca";

fn naming(kind: Option<&str>, name: &str) -> MemcachedSpec {
    MemcachedSpec {
        tls: Some(TlsSpec {
            secret_name: Some("cache-tls".into()),
            issuer_ref: Some(IssuerRef {
                name: name.into(),
                kind: kind.map(str::to_string),
                group: None,
            }),
            ..TlsSpec::default()
        }),
        ..MemcachedSpec::default()
    }
}

/// The validator's message for `spec` once defaulted, under the default issuer policy.
fn refusal_of(name: &str, spec: &MemcachedSpec) -> String {
    let defaults = Defaults::with_related_image(Some(RELATED_IMAGE.to_string()));
    let mut object = Memcached::new(name, spec.clone());
    object.spec = default_spec(spec, &defaults);
    validate_create(&object, &AllowedIssuers::default())
        .expect_err("a ClusterIssuer is refused by default")
        .message
}

/// Grants `developer` every verb on Memcacheds in `namespace`, and nothing else.
async fn grant_memcacheds_only(env: &Env, namespace: &str) {
    let role = Role {
        metadata: ObjectMeta {
            name: Some("memcached-editor".into()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![memcached_operator::api::GROUP.to_string()]),
            resources: Some(vec!["memcacheds".to_string()]),
            verbs: vec!["*".to_string()],
            ..PolicyRule::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some("developer-edits-memcacheds".into()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: "memcached-editor".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: DEVELOPER.into(),
            namespace: Some(namespace.to_string()),
            ..Subject::default()
        }]),
    };
    Api::<Role>::namespaced(env.client.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await
        .expect("the Role is created");
    Api::<RoleBinding>::namespaced(env.client.clone(), namespace)
        .create(&PostParams::default(), &binding)
        .await
        .expect("the RoleBinding is created");
}

/// A client that authenticates as the developer's ServiceAccount, with a token the API server
/// issued.
async fn developer_client(env: &Env, namespace: &str, dir: &std::path::Path) -> Client {
    let token = env.token(namespace, DEVELOPER).await;
    let path = env
        .plane
        .token_kubeconfig(&token, dir)
        .expect("the developer's kubeconfig");
    let kubeconfig = Kubeconfig::read_from(&path).expect("the developer's kubeconfig reads");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("the developer's configuration");
    Client::try_from(config).expect("the developer's client")
}

/// What the API server's authorizer says the client may do (`kubectl auth can-i`).
async fn can_i(client: &Client, verb: &str, group: &str, resource: &str, namespace: &str) -> bool {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: Some(namespace.into()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("a SelfSubjectAccessReview is answered")
        .status
        .is_some_and(|status| status.allowed)
}

/// The Degraded condition's reason and message once it is True.
async fn degraded(api: &Api<Memcached>, name: &str) -> (String, String) {
    eventually("Degraded=True", WAIT, || async {
        let status = api.get(name).await.ok()?.status?;
        let degraded = status
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Degraded")?;
        (degraded.status == "True").then_some((degraded.reason, degraded.message))
    })
    .await
}

pub async fn a_user_with_only_memcached_rights_is_refused_a_cluster_issuer(env: Arc<Env>) {
    let namespace = env.create_namespace("e2e-issuers").await;
    grant_memcacheds_only(&env, &namespace).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let developer = developer_client(&env, &namespace, dir.path()).await;
    eventually("the developer may create Memcacheds", WAIT, || async {
        can_i(
            &developer,
            "create",
            "cache.f2367556.dev",
            "memcacheds",
            &namespace,
        )
        .await
        .then_some(())
    })
    .await;
    assert!(
        !can_i(
            &developer,
            "create",
            "cert-manager.io",
            "certificates",
            &namespace
        )
        .await,
        "the developer may not create cert-manager Certificates"
    );

    // The webhook refuses the ClusterIssuer, saying how a cluster admin allows it.
    let api: Api<Memcached> = Api::namespaced(developer.clone(), &namespace);
    let cluster_issuer = naming(Some("ClusterIssuer"), CLUSTER_ISSUER);
    let refused = api
        .create(
            &PostParams::default(),
            &Memcached::new("shared", cluster_issuer.clone()),
        )
        .await
        .expect_err("a ClusterIssuer is refused");
    let kube::Error::Api(status) = refused else {
        panic!("not the API server's refusal: {refused}");
    };
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status.message.contains(DENIED_BY_VALIDATOR),
        "{}",
        status.message
    );
    let expected = refusal_of("shared", &cluster_issuer);
    assert!(
        status.message.ends_with(&expected),
        "{} does not end with {expected}",
        status.message
    );
    for part in [
        ALLOWED_ISSUERS_ENV,
        "ClusterIssuer.cert-manager.io/shared-ca",
    ] {
        assert!(status.message.contains(part), "{}", status.message);
    }
    assert!(api.get_opt("shared").await.expect("a read").is_none());
    // An Issuer of the developer's own namespace is admitted (a server-side dry run).
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(&dry_run, &Memcached::new("local", naming(None, "local-ca")))
        .await
        .expect("an Issuer of the Memcached's namespace is admitted");

    // Without the webhooks the API server admits it; the controller refuses it alike and
    // writes no child.
    let probe = Memcached::new("shared", cluster_issuer.clone());
    unwired::remove_admission_webhooks(&env, &api, &probe).await;
    let created = api
        .create(
            &PostParams::default(),
            &Memcached::new("shared", cluster_issuer.clone()),
        )
        .await;
    let restored = env.install_wiring().await;
    created.expect("without webhooks the API server admits it");
    restored.expect("the wiring is restored");
    unwired::until_the_validator_refuses(
        &api,
        &Memcached::new("shared-again", cluster_issuer.clone()),
    )
    .await;
    let (reason, message) = degraded(&api, "shared").await;
    assert_eq!(reason, "InvalidSpec");
    assert_eq!(message, expected);
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    assert!(
        statefulsets
            .get_opt("shared")
            .await
            .expect("a read")
            .is_none(),
        "no StatefulSet for a refused issuer"
    );

    // The cluster admin allows that ClusterIssuer through the operator's environment.
    let allowance = format!("ClusterIssuer.cert-manager.io/{CLUSTER_ISSUER}");
    env.restart_operator_with_env(&[], &[(ALLOWED_ISSUERS_ENV, &allowance)])
        .await;
    eventually("the allowed Memcached's StatefulSet", WAIT, || async {
        statefulsets.get_opt("shared").await.ok().flatten()
    })
    .await;
    api.create(
        &PostParams::default(),
        &Memcached::new("shared-too", cluster_issuer.clone()),
    )
    .await
    .expect("an allowed ClusterIssuer is admitted");
    // Another ClusterIssuer is still refused.
    let other = api
        .create(
            &dry_run,
            &Memcached::new("other", naming(Some("ClusterIssuer"), "other-ca")),
        )
        .await
        .expect_err("a ClusterIssuer not named in the setting is refused");
    assert!(
        other
            .to_string()
            .contains("ClusterIssuer.cert-manager.io/other-ca"),
        "{other}"
    );

    env.restart_operator(&[]).await;
}
