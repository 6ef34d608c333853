//! memcached as users reach it: a Memcached of two servers, created through the webhooks, whose
//! pods run the Debian memcached stand-in in containers; each name in `status.servers`
//! (`pod.service.namespace.svc`) resolves through the cluster's DNS (CoreDNS) and the pod's
//! search domains from inside a pod, to that pod's address, and the server behind it answers
//! `set` and `get` through that name.

use std::sync::Arc;

use serde_json::json;

use crate::cluster::{Env, WAIT, busybox_pod, eventually};

pub async fn memcached_answers_by_the_names_in_its_status_through_cluster_dns(env: Arc<Env>) {
    let namespace = env.create_namespace("dns").await;
    let spec = json!({
        "replicas": 2,
        "memcached": { "memoryLimitMB": 16 },
        "resources": { "limits": { "memory": "64Mi" } },
    });
    let memcacheds = env.create_memcached(&namespace, "cache", spec).await;
    let servers: Vec<String> =
        eventually("both servers ready and in status.servers", WAIT, || async {
            let object = memcacheds.get("cache").await.ok()?;
            let servers: Vec<String> = object.data["status"]["servers"]
                .as_array()?
                .iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect();
            (servers.len() == 2).then_some(servers)
        })
        .await;
    eprintln!("status.servers: {servers:?}");

    let mut script = String::from("set -e\n");
    for (i, server) in servers.iter().enumerate() {
        let (host, port) = server.rsplit_once(':').expect("host:port");
        // nslookup asks for the name as written; a resolver (nc's) tries the pod's search
        // domains first, as every client does with a name of fewer than five dots. So the
        // address is looked up the resolver's way, then nc connects by the name itself.
        // A pod's record follows its Service's EndpointSlice (kube-controller-manager, then
        // CoreDNS's watch), which can trail the Ready condition the status is written from
        // on a busy node: the lookup is tried for up to 30 s before nc uses the name.
        script.push_str(&format!(
            "echo \"== {server}\"\n\
             for try in $(seq 30); do found=; \
             for domain in $(sed -n 's/^search //p' /etc/resolv.conf); do \
             nslookup {host}.$domain && {{ found=1; break; }}; done; \
             [ -n \"$found\" ] && break; echo \"try $try: not resolved yet\"; sleep 1; done\n\
             printf 'set key{i} 0 0 6\\r\\nvalue{i}\\r\\nget key{i}\\r\\nquit\\r\\n' | nc -w 5 {host} {port}\n"
        ));
    }
    let ended = env
        .run_to_end(
            &namespace,
            busybox_pod(
                "client",
                &script,
                json!({ "runAsNonRoot": true, "runAsUser": 65532 }),
                None,
            ),
        )
        .await;
    eprintln!("the client pod said:\n{}", ended.log);
    assert_eq!(ended.phase, "Succeeded", "{ended:?}");
    let pods = env
        .pods(&namespace, "app.kubernetes.io/instance=cache")
        .await;
    for (i, server) in servers.iter().enumerate() {
        let (host, _) = server.rsplit_once(':').expect("host:port");
        let section = ended
            .log
            .split("== ")
            .find(|part| part.starts_with(server.as_str()))
            .unwrap_or_else(|| panic!("no answer for {server}: {}", ended.log));
        // The address the name resolved to is the address of the pod it names.
        let pod = host.split('.').next().expect("a pod name");
        let ip = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(pod))
            .and_then(|p| p.status.as_ref()?.pod_ip.clone())
            .unwrap_or_else(|| panic!("no pod {pod} with an IP"));
        assert!(
            section.contains(&format!("Address: {ip}"))
                || section.contains(&format!("Address 1: {ip}")),
            "{host} resolves to {pod}'s address {ip}: {section}"
        );
        assert!(
            section.contains("STORED"),
            "{server} stored the value: {section}"
        );
        assert!(
            section.contains(&format!("VALUE key{i} 0 6"))
                && section.contains(&format!("value{i}")),
            "{server} gave the value back: {section}"
        );
    }
}
