//! Registers the agent's Node and keeps it alive as the kubelet does: a Node with the
//! well-known labels, capacity, allocatable, addresses and node info of this machine, a
//! `Ready` condition, a Lease in `kube-node-lease` renewed every 10 s, and a status update
//! every minute (or when something changed).
//!
//! The Node object is created only when missing and never deleted: like a kubelet that stops,
//! the agent leaves it for the node lifecycle controller.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeStatus, NodeSystemInfo};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use kube::Client;
use kube::api::{Api, PostParams};

/// The namespace of node leases.
const LEASE_NAMESPACE: &str = "kube-node-lease";
/// The kubelet's lease duration.
const LEASE_SECONDS: i32 = 40;
/// How often the lease is renewed (a quarter of its duration, as the kubelet does).
pub const LEASE_RENEW: Duration = Duration::from_secs(10);
/// How often the status is written when nothing changed.
pub const STATUS_REPORT: Duration = Duration::from_secs(60);
/// Pods one node admits (the kubelet's default `maxPods`).
const MAX_PODS: &str = "110";

/// Why the Node or its Lease could not be written.
#[derive(Debug, thiserror::Error)]
#[error("node {node}: cannot {action}: {error}")]
pub struct NodeError {
    /// The node.
    pub node: String,
    /// What was being done.
    pub action: &'static str,
    /// What the API said.
    pub error: kube::Error,
}

/// What the agent knows of this machine.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    /// Logical CPUs.
    pub cpus: usize,
    /// Memory in KiB.
    pub memory_kib: u64,
    /// Node info as the kubelet reports it.
    pub info: NodeSystemInfo,
}

impl Machine {
    /// Reads this machine from `/proc` and `/etc`; `kubelet_version` is the version the agent
    /// reports (the API server's own).
    pub fn read(kubelet_version: &str) -> Machine {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        let memory_kib = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_default();
        let os_image = read("/etc/os-release")
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_else(|| "Linux".to_string());
        let machine_id = read("/etc/machine-id");
        Machine {
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            memory_kib,
            info: NodeSystemInfo {
                architecture: "amd64".to_string(),
                boot_id: read("/proc/sys/kernel/random/boot_id"),
                container_runtime_version: "node-agent://0.0.0".to_string(),
                kernel_version: read("/proc/sys/kernel/osrelease"),
                kube_proxy_version: String::new(),
                kubelet_version: kubelet_version.to_string(),
                machine_id: machine_id.clone(),
                operating_system: "linux".to_string(),
                os_image,
                system_uuid: machine_id,
                swap: None,
            },
        }
    }
}

impl Machine {
    /// Capacity and allocatable (the same: nothing is reserved), by resource name.
    pub fn allocatable(&self) -> BTreeMap<String, Quantity> {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(self.cpus.to_string())),
            (
                "memory".to_string(),
                Quantity(format!("{}Ki", self.memory_kib)),
            ),
            ("pods".to_string(), Quantity(MAX_PODS.to_string())),
            (
                "ephemeral-storage".to_string(),
                Quantity("10Gi".to_string()),
            ),
        ])
    }
}

/// The status the agent reports for its node.
pub fn node_status(
    machine: &Machine,
    host_ip: &str,
    name: &str,
    ready_since: Time,
    now: Time,
) -> NodeStatus {
    let resources = machine.allocatable();
    let condition = |type_: &str, status: &str, reason: &str, message: &str| NodeCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(ready_since.clone()),
    };
    NodeStatus {
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".to_string(),
                address: host_ip.to_string(),
            },
            NodeAddress {
                type_: "Hostname".to_string(),
                address: name.to_string(),
            },
        ]),
        allocatable: Some(resources.clone()),
        capacity: Some(resources),
        conditions: Some(vec![
            condition(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            condition(
                "DiskPressure",
                "False",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
            ),
            condition(
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            condition(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
            ),
        ]),
        node_info: Some(machine.info.clone()),
        ..NodeStatus::default()
    }
}

/// The Node object the agent registers.
pub fn node_object(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([
                ("kubernetes.io/os".to_string(), "linux".to_string()),
                ("kubernetes.io/arch".to_string(), "amd64".to_string()),
                ("kubernetes.io/hostname".to_string(), name.to_string()),
                ("beta.kubernetes.io/os".to_string(), "linux".to_string()),
                ("beta.kubernetes.io/arch".to_string(), "amd64".to_string()),
            ])),
            ..ObjectMeta::default()
        },
        ..Node::default()
    }
}

/// The node's registration and heartbeats.
pub struct NodeHeartbeat {
    client: Client,
    name: String,
    host_ip: String,
    machine: Machine,
    ready_since: Time,
}

impl NodeHeartbeat {
    /// Registers the node (creating it when missing) and writes its first status and lease.
    pub async fn register(
        client: Client,
        name: &str,
        host_ip: &str,
        machine: Machine,
    ) -> Result<NodeHeartbeat, NodeError> {
        let error = |action| {
            let node = name.to_string();
            move |error| NodeError {
                node,
                action,
                error,
            }
        };
        let nodes: Api<Node> = Api::all(client.clone());
        if nodes
            .get_opt(name)
            .await
            .map_err(error("read the Node"))?
            .is_none()
        {
            match nodes
                .create(&PostParams::default(), &node_object(name))
                .await
            {
                Ok(_) => tracing::info!(node = name, "node registered"),
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(error("create the Node")(e)),
            }
        }
        let heartbeat = NodeHeartbeat {
            client,
            name: name.to_string(),
            host_ip: host_ip.to_string(),
            machine,
            ready_since: Time(jiff::Timestamp::now()),
        };
        heartbeat.update_status().await?;
        heartbeat.renew_lease().await?;
        Ok(heartbeat)
    }

    /// Writes the Node's status (status subresource, resourceVersion precondition).
    pub async fn update_status(&self) -> Result<(), NodeError> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let error = |action| {
            let node = self.name.clone();
            move |error| NodeError {
                node,
                action,
                error,
            }
        };
        for _ in 0..3 {
            let mut node = nodes
                .get(&self.name)
                .await
                .map_err(error("read the Node"))?;
            node.status = Some(node_status(
                &self.machine,
                &self.host_ip,
                &self.name,
                self.ready_since.clone(),
                Time(jiff::Timestamp::now()),
            ));
            match nodes
                .replace_status(&self.name, &PostParams::default(), &node)
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => return Err(error("write the Node's status")(e)),
            }
        }
        Ok(())
    }

    /// Creates or renews the node's Lease.
    pub async fn renew_lease(&self) -> Result<(), NodeError> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), LEASE_NAMESPACE);
        let error = |action| {
            let node = self.name.clone();
            move |error| NodeError {
                node,
                action,
                error,
            }
        };
        let now = MicroTime(jiff::Timestamp::now());
        match leases
            .get_opt(&self.name)
            .await
            .map_err(error("read the Lease"))?
        {
            Some(mut lease) => {
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                spec.renew_time = Some(now);
                spec.holder_identity = Some(self.name.clone());
                spec.lease_duration_seconds = Some(LEASE_SECONDS);
                leases
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
                    .map_err(error("renew the Lease"))?;
            }
            None => {
                let node: Node = Api::<Node>::all(self.client.clone())
                    .get(&self.name)
                    .await
                    .map_err(error("read the Node"))?;
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(LEASE_NAMESPACE.to_string()),
                        owner_references: Some(vec![OwnerReference {
                            api_version: "v1".to_string(),
                            kind: "Node".to_string(),
                            name: self.name.clone(),
                            uid: node.metadata.uid.unwrap_or_default(),
                            ..OwnerReference::default()
                        }]),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.name.clone()),
                        lease_duration_seconds: Some(LEASE_SECONDS),
                        renew_time: Some(now),
                        ..LeaseSpec::default()
                    }),
                };
                leases
                    .create(&PostParams::default(), &lease)
                    .await
                    .map_err(error("create the Lease"))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_is_ready_with_its_capacity_and_internal_ip() {
        let machine = Machine {
            cpus: 2,
            memory_kib: 1024,
            info: NodeSystemInfo::default(),
        };
        let t = Time(jiff::Timestamp::from_second(1_700_000_000).unwrap());
        let status = node_status(&machine, "127.0.0.1", "node-a", t.clone(), t);
        let capacity = status.capacity.unwrap();
        assert_eq!(capacity["cpu"].0, "2");
        assert_eq!(capacity["memory"].0, "1024Ki");
        assert_eq!(capacity["pods"].0, "110");
        let ready = status
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.status, "True");
        assert_eq!(status.addresses.unwrap()[0].address, "127.0.0.1");
    }

    #[test]
    fn the_node_carries_the_well_known_labels() {
        let labels = node_object("node-a").metadata.labels.unwrap();
        assert_eq!(labels["kubernetes.io/hostname"], "node-a");
        assert_eq!(labels["kubernetes.io/os"], "linux");
        assert_eq!(labels["kubernetes.io/arch"], "amd64");
    }
}
