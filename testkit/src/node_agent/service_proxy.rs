//! Plays kube-proxy for TCP: listens on every Service's `ClusterIP:port` and forwards each
//! connection to a ready endpoint, taken round-robin from the Service's EndpointSlices,
//! following changes to both.
//!
//! Endpoint validation refuses loopback addresses, and every address is a loopback one here,
//! so two kinds of Service have no usable EndpointSlice on the local control plane:
//! - `default/kubernetes` (the API server runs with `--endpoint-reconciler-type=none`, since
//!   it would publish 127.0.0.1): its endpoint is the API server address the agent talks to;
//! - Services with a selector, whose pods have loopback IPs: their endpoints are read from the
//!   ready pods the selector matches, with the Service's `targetPort`, as the endpointslice
//!   controller would compute them.
//!
//! UDP and SCTP ports, NodePorts and session affinity are not served.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Client;
use kube::api::{Api, ListParams};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How often Services and EndpointSlices are listed.
const RESYNC: Duration = Duration::from_millis(500);

/// A Service port the proxy serves: `ClusterIP:port`, identified by namespace, name and port
/// name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServicePortKey {
    /// Namespace of the Service.
    pub namespace: String,
    /// Name of the Service.
    pub name: String,
    /// Name of the port (empty for a single unnamed port).
    pub port_name: String,
    /// `ClusterIP:port`.
    pub listen: SocketAddr,
}

/// Ready endpoints of one Service port and the round-robin cursor over them.
#[derive(Debug, Default)]
pub struct Endpoints {
    addresses: Vec<SocketAddr>,
    next: usize,
}

impl Endpoints {
    /// Replaces the addresses, keeping the cursor where it was when possible.
    pub fn set(&mut self, addresses: Vec<SocketAddr>) {
        self.addresses = addresses;
    }

    /// The next endpoint, round-robin, or `None` when there is no ready one.
    pub fn choose(&mut self) -> Option<SocketAddr> {
        if self.addresses.is_empty() {
            return None;
        }
        let chosen = self.addresses[self.next % self.addresses.len()];
        self.next = (self.next + 1) % self.addresses.len();
        Some(chosen)
    }
}

/// The ready endpoint addresses of each port of `service`, from `slices` (those labelled
/// `kubernetes.io/service-name` with its name): an endpoint counts unless its `ready`
/// condition is false; an endpoint port is matched by name.
pub fn ready_endpoints(
    service: &Service,
    slices: &[EndpointSlice],
) -> BTreeMap<String, Vec<SocketAddr>> {
    let name = service.metadata.name.as_deref().unwrap_or_default();
    let mut out: BTreeMap<String, Vec<SocketAddr>> = BTreeMap::new();
    for slice in slices {
        let owner = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("kubernetes.io/service-name"));
        if owner.map(String::as_str) != Some(name) || slice.address_type != "IPv4" {
            continue;
        }
        for port in slice.ports.iter().flatten() {
            let Some(number) = port.port.and_then(|p| u16::try_from(p).ok()) else {
                continue;
            };
            let port_name = port.name.clone().unwrap_or_default();
            for endpoint in &slice.endpoints {
                let ready = endpoint
                    .conditions
                    .as_ref()
                    .and_then(|c| c.ready)
                    .unwrap_or(true);
                if !ready {
                    continue;
                }
                for address in &endpoint.addresses {
                    if let Ok(ip) = address.parse() {
                        out.entry(port_name.clone())
                            .or_default()
                            .push(SocketAddr::new(ip, number));
                    }
                }
            }
        }
    }
    for addresses in out.values_mut() {
        addresses.sort();
        addresses.dedup();
    }
    out
}

/// The endpoints of each port of a Service with a selector, from the pods it selects: pods of
/// its namespace whose labels match, that are not being deleted, have an IP and a `Ready`
/// condition that is true; the port is the Service port's `targetPort` (a number, or a
/// container port's name), its `port` when unset.
pub fn pod_endpoints(service: &Service, pods: &[Pod]) -> BTreeMap<String, Vec<SocketAddr>> {
    let mut out: BTreeMap<String, Vec<SocketAddr>> = BTreeMap::new();
    let Some(spec) = &service.spec else {
        return out;
    };
    let Some(selector) = spec.selector.as_ref().filter(|s| !s.is_empty()) else {
        return out;
    };
    let namespace = service.metadata.namespace.as_deref();
    for pod in pods {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let selected = pod.metadata.namespace.as_deref() == namespace
            && pod.metadata.deletion_timestamp.is_none()
            && selector.iter().all(|(k, v)| labels.get(k) == Some(v));
        let status = pod.status.as_ref();
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let Some(ip) = status
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
        else {
            continue;
        };
        if !selected || !ready {
            continue;
        }
        for port in spec.ports.iter().flatten() {
            let number = match &port.target_port {
                None => Some(port.port),
                Some(IntOrString::Int(n)) => Some(*n),
                Some(IntOrString::String(name)) => pod
                    .spec
                    .iter()
                    .flat_map(|s| &s.containers)
                    .flat_map(|c| c.ports.iter().flatten())
                    .find(|p| p.name.as_deref() == Some(name.as_str()))
                    .map(|p| p.container_port),
            };
            if let Some(number) = number.and_then(|n| u16::try_from(n).ok()) {
                out.entry(port.name.clone().unwrap_or_default())
                    .or_default()
                    .push(SocketAddr::new(ip, number));
            }
        }
    }
    for addresses in out.values_mut() {
        addresses.sort();
        addresses.dedup();
    }
    out
}

/// The TCP ports of a Service the proxy listens on.
pub fn service_ports(service: &Service) -> Vec<ServicePortKey> {
    let Some(spec) = &service.spec else {
        return Vec::new();
    };
    let Some(ip) = spec
        .cluster_ip
        .as_deref()
        .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
    else {
        return Vec::new();
    };
    spec.ports
        .iter()
        .flatten()
        .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
        .filter_map(|p| {
            Some(ServicePortKey {
                namespace: service.metadata.namespace.clone().unwrap_or_default(),
                name: service.metadata.name.clone().unwrap_or_default(),
                port_name: p.name.clone().unwrap_or_default(),
                listen: SocketAddr::new(ip, u16::try_from(p.port).ok()?),
            })
        })
        .collect()
}

/// The running proxy; stops its listeners when dropped.
pub struct ServiceProxy {
    task: JoinHandle<()>,
}

impl Drop for ServiceProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Listener {
    endpoints: Arc<Mutex<Endpoints>>,
    task: JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ServiceProxy {
    /// Starts following Services and EndpointSlices; `apiserver` is the endpoint of
    /// `default/kubernetes`.
    pub fn start(client: Client, apiserver: SocketAddr) -> ServiceProxy {
        let task = tokio::spawn(async move {
            let mut listeners: BTreeMap<ServicePortKey, Listener> = BTreeMap::new();
            loop {
                if let Err(error) = sync(&client, apiserver, &mut listeners).await {
                    tracing::warn!(%error, "service proxy: cannot list Services or EndpointSlices");
                }
                tokio::time::sleep(RESYNC).await;
            }
        });
        ServiceProxy { task }
    }
}

async fn sync(
    client: &Client,
    apiserver: SocketAddr,
    listeners: &mut BTreeMap<ServicePortKey, Listener>,
) -> Result<(), kube::Error> {
    let services = Api::<Service>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let slices = Api::<EndpointSlice>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let mut wanted = BTreeSet::new();
    for service in &services.items {
        let namespace = service.metadata.namespace.as_deref().unwrap_or_default();
        let own: Vec<EndpointSlice> = slices
            .items
            .iter()
            .filter(|s| s.metadata.namespace.as_deref() == Some(namespace))
            .cloned()
            .collect();
        let mut endpoints = ready_endpoints(service, &own);
        if endpoints.is_empty() {
            endpoints = pod_endpoints(service, &pods.items);
        }
        let is_apiserver =
            namespace == "default" && service.metadata.name.as_deref() == Some("kubernetes");
        for key in service_ports(service) {
            let addresses = if is_apiserver && endpoints.is_empty() {
                vec![apiserver]
            } else {
                endpoints.get(&key.port_name).cloned().unwrap_or_default()
            };
            wanted.insert(key.clone());
            if let Some(listener) = listeners.get(&key) {
                if let Ok(mut e) = listener.endpoints.lock() {
                    e.set(addresses);
                }
                continue;
            }
            match TcpListener::bind(key.listen).await {
                Ok(socket) => {
                    tracing::info!(service = %format!("{}/{}", key.namespace, key.name), listen = %key.listen, "service proxy: listening");
                    let endpoints = Arc::new(Mutex::new(Endpoints::default()));
                    if let Ok(mut e) = endpoints.lock() {
                        e.set(addresses);
                    }
                    let task = tokio::spawn(serve(socket, endpoints.clone(), key.clone()));
                    listeners.insert(key, Listener { endpoints, task });
                }
                Err(error) => {
                    tracing::warn!(listen = %key.listen, %error, "service proxy: cannot listen");
                }
            }
        }
    }
    listeners.retain(|key, _| wanted.contains(key));
    Ok(())
}

async fn serve(socket: TcpListener, endpoints: Arc<Mutex<Endpoints>>, key: ServicePortKey) {
    loop {
        let Ok((mut inbound, _)) = socket.accept().await else {
            continue;
        };
        let target = endpoints.lock().ok().and_then(|mut e| e.choose());
        let Some(target) = target else {
            tracing::debug!(listen = %key.listen, "service proxy: no ready endpoint; connection refused");
            continue;
        };
        tokio::spawn(async move {
            if let Ok(mut outbound) = TcpStream::connect(target).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn service() -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: Some("127.0.96.10".into()),
                ports: Some(vec![
                    ServicePort {
                        name: Some("http".into()),
                        port: 80,
                        ..ServicePort::default()
                    },
                    ServicePort {
                        name: Some("dns".into()),
                        port: 53,
                        protocol: Some("UDP".into()),
                        ..ServicePort::default()
                    },
                ]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        }
    }

    fn endpoint(ip: &str, ready: Option<bool>) -> Endpoint {
        Endpoint {
            addresses: vec![ip.into()],
            conditions: Some(EndpointConditions {
                ready,
                ..EndpointConditions::default()
            }),
            ..Endpoint::default()
        }
    }

    fn slice(service: &str, endpoints: Vec<Endpoint>) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                labels: Some(BTreeMap::from([(
                    "kubernetes.io/service-name".into(),
                    service.into(),
                )])),
                ..ObjectMeta::default()
            },
            address_type: "IPv4".into(),
            endpoints,
            ports: Some(vec![EndpointPort {
                name: Some("http".into()),
                port: Some(8080),
                ..EndpointPort::default()
            }]),
        }
    }

    #[test]
    fn only_tcp_ports_of_a_cluster_ip_are_served() {
        let ports = service_ports(&service());
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].listen, "127.0.96.10:80".parse().unwrap());
        let mut headless = service();
        headless.spec.as_mut().unwrap().cluster_ip = Some("None".into());
        assert!(service_ports(&headless).is_empty());
    }

    #[test]
    fn unready_endpoints_and_other_services_slices_are_left_out() {
        let slices = [
            slice(
                "web",
                vec![
                    endpoint("127.0.100.2", Some(true)),
                    endpoint("127.0.100.3", Some(false)),
                    endpoint("127.0.100.4", None),
                ],
            ),
            slice("other", vec![endpoint("127.0.100.9", Some(true))]),
        ];
        let ready = ready_endpoints(&service(), &slices);
        assert_eq!(
            ready.get("http").unwrap(),
            &vec![
                "127.0.100.2:8080".parse::<SocketAddr>().unwrap(),
                "127.0.100.4:8080".parse().unwrap()
            ]
        );
    }

    fn pod(name: &str, app: &str, ip: &str, ready: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
            "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": ready}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_selector_service_reaches_its_ready_pods_on_the_named_target_port() {
        let mut web = service();
        let spec = web.spec.as_mut().unwrap();
        spec.selector = Some(BTreeMap::from([("app".into(), "web".into())]));
        spec.ports.as_mut().unwrap()[0].target_port = Some(IntOrString::String("http".into()));
        let pods = [
            pod("a", "web", "127.0.100.2", "True"),
            pod("b", "web", "127.0.100.3", "False"),
            pod("c", "other", "127.0.100.4", "True"),
        ];
        let endpoints = pod_endpoints(&web, &pods);
        assert_eq!(
            endpoints.get("http").unwrap(),
            &vec!["127.0.100.2:8080".parse::<SocketAddr>().unwrap()]
        );
    }

    #[test]
    fn endpoints_are_chosen_round_robin_and_none_when_empty() {
        let mut endpoints = Endpoints::default();
        assert_eq!(endpoints.choose(), None);
        let a: SocketAddr = "127.0.100.2:1".parse().unwrap();
        let b: SocketAddr = "127.0.100.3:1".parse().unwrap();
        endpoints.set(vec![a, b]);
        assert_eq!(
            [endpoints.choose(), endpoints.choose(), endpoints.choose()],
            [Some(a), Some(b), Some(a)]
        );
    }
}
