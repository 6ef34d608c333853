//! Leader election across OLM's two replicas: SIGKILL the leader's process (no release of
//! the lease, as in a crash); a live replica takes the lease once it expires unrenewed, and
//! reconciling continues. The kubelet restarts the killed container (`restartPolicy:
//! Always`) and reports the restart. Which replica takes the lease is a race both may win:
//! the other pod's, or the process the kubelet started in the killed one's place, which is a
//! replica of its own (a new identity, `POD_PID_RANDOM`) and waits out the lease the same way.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::{Api, PostParams};
use memcached_operator::api::v1beta1::{Memcached, MemcachedSpec};

use crate::cluster::{Env, WAIT, eventually, operator_process};

/// The restart count of the pod's first container.
fn restarts(pod: &k8s_openapi::api::core::v1::Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map(|c| c.restart_count)
        .unwrap_or_default()
}

pub async fn killing_the_leaders_process_hands_the_lease_to_a_live_replica(env: Arc<Env>) {
    let holder = || testkit::lease::holder(&env.client, &env.installed.namespace);
    let leading_holder = eventually("a replica holds the lease", WAIT, || async {
        let holder = holder().await?;
        match holder.pod() {
            Some(_) => Ok(holder),
            None => Err("nobody holds it".to_string()),
        }
    })
    .await;
    let leader = leading_holder.pod().unwrap_or_default().to_string();
    let killed_identity = leading_holder.identity;
    let pods = env.operator_pods().await;
    assert_eq!(pods.len(), 2, "two replicas");
    let (leading, other): (Vec<_>, Vec<_>) = pods
        .into_iter()
        .partition(|p| p.metadata.name.as_deref() == Some(leader.as_str()));
    let (leading, other) = (&leading[0], &other[0]);
    let other_name = other.metadata.name.clone().unwrap_or_default();
    let pid = operator_process(leading)
        .unwrap_or_else(|| panic!("{leader} runs the operator in a container"));
    let restarts_before = restarts(leading);

    let killed = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -KILL {pid}");

    let successor = eventually(
        &format!("a live replica takes the lease over from {killed_identity}"),
        WAIT,
        || async {
            let holder = holder().await?;
            if holder.pod().is_none() || holder.identity == killed_identity {
                return Err(format!("the lease is held by '{}'", holder.identity));
            }
            Ok::<_, String>(holder)
        },
    )
    .await;
    let takeover = killed.elapsed();
    let successor_pod = successor.pod().unwrap_or_default().to_string();
    let successor = successor.identity;
    let taker = if successor_pod == other_name {
        "the other replica".to_string()
    } else {
        format!("the process the kubelet restarted in {successor_pod}")
    };

    // Reconciling continues under the new leader.
    let namespace = env.create_namespace("olm-leader").await;
    let api: Api<Memcached> = Api::namespaced(env.client.clone(), &namespace);
    let mut object = Memcached::new(
        "after-takeover",
        MemcachedSpec {
            replicas: Some(1),
            ..MemcachedSpec::default()
        },
    );
    object.metadata.namespace = Some(namespace.clone());
    let created = Instant::now();
    api.create(&PostParams::default(), &object)
        .await
        .expect("create");
    let statefulsets: Api<StatefulSet> = Api::namespaced(env.client.clone(), &namespace);
    eventually("the new leader creates the StatefulSet", WAIT, || async {
        statefulsets.get_opt("after-takeover").await.ok().flatten()
    })
    .await;
    let reconciled = created.elapsed();

    // The kubelet restarted the killed container and says so.
    let name = leader.clone();
    let restarted = eventually(
        &format!("{leader} restarted and Ready again"),
        WAIT,
        || async {
            let pods = env.operator_pods().await;
            let pod = pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name.as_str()))?;
            let ready = pod
                .status
                .as_ref()?
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            (ready && restarts(pod) > restarts_before).then_some(restarts(pod))
        },
    )
    .await;
    let (ok, _, stderr) = env.kubectl(
        &["delete", "memcached", "after-takeover", "-n", &namespace],
        None,
    );
    assert!(ok, "kubectl delete: {stderr}");
    eprintln!(
        "figures: leader {leader} killed (SIGKILL); {taker}, {successor}, took the lease after {:.1} s; \
         the new leader created a StatefulSet {:.2} s after a Memcached was created; \
         the killed container restarted (restartCount {restarted})",
        takeover.as_secs_f64(),
        reconciled.as_secs_f64()
    );
}
