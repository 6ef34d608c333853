//! Starts and stops a local Kubernetes control plane (etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, and on request a real node: kubelet, kube-proxy,
//! containerd, CoreDNS) through the project's own `hack/control-plane.sh`, in a temporary
//! state directory of its own, and gives a kube client, the admin kubeconfig and the pinned
//! kubectl for it.
//!
//! The plane belongs to the test process (`CONTROL_PLANE_OWNER`): the script's supervisor stops
//! it, and removes its state directory, when the process exits without dropping it (Ctrl-C, an
//! abort), so that no run leaves a cluster behind. A real node is the machine's: a second
//! start while another cluster has it fails with the script's refusal, which names that
//! cluster.
//!
//! What a test installs into the control plane (the operator's CRD, its webhook wiring) is the
//! test's business, not this module's. The script needs the tools in `.tools/bin` (it installs
//! them when they are missing, which takes a long while), so tests that use this module are
//! ignored by a plain `cargo test`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::api::{Api, ListParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use memcached_operator::api::v1beta1::Memcached;
use tempfile::TempDir;

use crate::repository;

/// The script that runs the control plane.
const SCRIPT: &str = "control-plane.sh";

/// Why the control plane, its client or kubectl could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    /// The temporary state directory could not be made.
    #[error("cannot make a state directory for the control plane: {0}")]
    StateDir(std::io::Error),
    /// A program could not be run at all.
    #[error("cannot run {}: {error}", .program.display())]
    Run {
        /// The script or tool.
        program: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// `control-plane.sh start` failed; its standard error says why.
    #[error("the local control plane did not start ({} start: {status}):\n{stderr}", .script.display())]
    Start {
        /// The script.
        script: PathBuf,
        /// How it exited.
        status: ExitStatus,
        /// What it wrote to standard error.
        stderr: String,
    },
    /// The admin kubeconfig could not be read.
    #[error("cannot read the control plane's kubeconfig {}: {error}", .path.display())]
    Kubeconfig {
        /// The kubeconfig.
        path: PathBuf,
        /// What kube said.
        error: kube::config::KubeconfigError,
    },
    /// A file could not be written.
    #[error("cannot write {}: {error}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the system said.
        error: std::io::Error,
    },
    /// No kube client could be made from the kubeconfig.
    #[error("cannot make a client for the control plane: {0}")]
    Client(kube::Error),
    /// A restart of one of its daemons failed; the script's standard error says why.
    #[error("{} restart {component} failed ({status}):\n{stderr}", .script.display())]
    Restart {
        /// The script.
        script: PathBuf,
        /// The daemon.
        component: String,
        /// How it exited.
        status: ExitStatus,
        /// What it wrote to standard error.
        stderr: String,
    },
}

/// The daemons of a control plane with a real node that [`ControlPlane::restart`] restarts,
/// and the script that restarts each.
const RESTARTABLE: [(&str, &str); 7] = [
    ("etcd", SCRIPT),
    ("kube-apiserver", SCRIPT),
    ("kube-controller-manager", SCRIPT),
    ("kube-scheduler", SCRIPT),
    ("containerd", "node.sh"),
    ("kubelet", "node.sh"),
    ("kube-proxy", "node.sh"),
];

/// What a kubectl run printed, and whether it succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubectlOutput {
    /// Whether it exited 0.
    pub success: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// The kind of node a control plane is started with (`NODE=` of `hack/control-plane.sh`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    /// No node: the API server, etcd, the controller manager and the scheduler only, for
    /// tests that run the operator as a process of their own and need no pod to run.
    None,
    /// A real node: kubelet, kube-proxy, containerd and CoreDNS, on the node's bridge.
    Kubelet,
}

impl Node {
    /// The value of `NODE=` for the script.
    fn env(self) -> &'static str {
        match self {
            Node::None => "none",
            Node::Kubelet => "kubelet",
        }
    }
}

/// A control plane started by `hack/control-plane.sh` in its own state directory; stopped
/// (every process it started) when dropped, or by its supervisor when this process ends
/// without dropping it.
pub struct ControlPlane {
    state: TempDir,
}

impl ControlPlane {
    /// Starts a control plane and waits until it is ready (the script's own deadline, 60 s
    /// unless `CONTROL_PLANE_TIMEOUT` says otherwise). Blocks; from async code call it through
    /// `spawn_blocking`.
    pub fn start() -> Result<ControlPlane, ControlPlaneError> {
        ControlPlane::start_as(Node::None)
    }

    /// Starts a control plane with the `node` given, as [`ControlPlane::start`] does; with a
    /// real node it returns once the Node is Ready and CoreDNS answers.
    pub fn start_as(node: Node) -> Result<ControlPlane, ControlPlaneError> {
        ControlPlane::start_with(node, None)
    }

    /// Starts a control plane with the `node` given, as [`ControlPlane::start_as`] does,
    /// whose API server writes an audit log (JSON lines, [`ControlPlane::audit_log`]) by the
    /// audit policy file `audit_policy`, when one is given.
    pub fn start_with(
        node: Node,
        audit_policy: Option<&Path>,
    ) -> Result<ControlPlane, ControlPlaneError> {
        let state = tempfile::Builder::new()
            .prefix("memcached-operator-control-plane.")
            .tempdir()
            .map_err(ControlPlaneError::StateDir)?;
        let script = repository::hack(SCRIPT);
        let mut command = Command::new(&script);
        if let Some(policy) = audit_policy {
            command.env("AUDIT_POLICY", policy);
        }
        let output = command
            .arg("start")
            .env("CONTROL_PLANE_DIR", state.path())
            .env("NODE", node.env())
            .env("CONTROL_PLANE_OWNER", std::process::id().to_string())
            .env("CONTROL_PLANE_DISPOSABLE", "1")
            .output()
            .map_err(|error| ControlPlaneError::Run {
                program: script.clone(),
                error,
            })?;
        // From here on, dropping the plane stops whatever part of it did start.
        let plane = ControlPlane { state };
        if !output.status.success() {
            return Err(ControlPlaneError::Start {
                script,
                status: output.status,
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            });
        }
        Ok(plane)
    }

    /// Starts a control plane from async code and returns it with an admin client; the
    /// error says which of the two failed, for a scenario runner to report.
    pub async fn start_with_client() -> Result<(ControlPlane, Client), String> {
        ControlPlane::start_as_with_client(Node::None).await
    }

    /// [`ControlPlane::start_with_client`] with the `node` given.
    pub async fn start_as_with_client(node: Node) -> Result<(ControlPlane, Client), String> {
        let plane = tokio::task::spawn_blocking(move || ControlPlane::start_as(node))
            .await
            .map_err(|e| format!("the control plane's start did not finish: {e}"))?
            .map_err(|e| e.to_string())?;
        let client = plane.client().await.map_err(|e| e.to_string())?;
        Ok((plane, client))
    }

    /// The state directory: kubeconfig, PKI, logs of each component (`logs/NAME.log`).
    pub fn state_dir(&self) -> &Path {
        self.state.path()
    }

    /// Sets the node's registry mirror to `mode` for the pulls from then on
    /// (`hack/node.sh mirror`): `by-tag`, or `by-digest`, where only images named by digest
    /// can be pulled, as through a disconnected cluster's digest mirror. Blocks briefly.
    pub fn node_mirror(&self, mode: &str) -> Result<(), String> {
        let script = repository::hack("node.sh");
        let output = Command::new(&script)
            .args(["mirror", mode])
            .env("CONTROL_PLANE_DIR", self.state.path())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{} mirror {mode}: {}",
                script.display(),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }

    /// The API server's audit log, when it was started with an audit policy.
    pub fn audit_log(&self) -> PathBuf {
        self.state.path().join("logs/audit.log")
    }

    /// Stops one daemon of the running cluster (etcd, kube-apiserver,
    /// kube-controller-manager, kube-scheduler, or the node's containerd, kubelet or
    /// kube-proxy) and starts it again with its data kept, as a service manager restarts a
    /// daemon; returns once it serves again. Blocks; from async code call it through
    /// `spawn_blocking`.
    pub fn restart(&self, component: &str) -> Result<(), ControlPlaneError> {
        let script = RESTARTABLE
            .iter()
            .find(|(name, _)| *name == component)
            .map(|(_, script)| repository::hack(script))
            .unwrap_or_else(|| repository::hack(SCRIPT));
        let output = Command::new(&script)
            .args(["restart", component])
            .env("CONTROL_PLANE_DIR", self.state.path())
            .output()
            .map_err(|error| ControlPlaneError::Run {
                program: script.clone(),
                error,
            })?;
        if output.status.success() {
            Ok(())
        } else {
            Err(ControlPlaneError::Restart {
                script,
                component: component.to_string(),
                status: output.status,
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            })
        }
    }

    /// The admin kubeconfig (group `system:masters`).
    pub fn kubeconfig(&self) -> PathBuf {
        self.state.path().join("kubeconfig")
    }

    /// Writes `dir/kubeconfig`: the admin kubeconfig's cluster, authenticating with the bearer
    /// `token` (a ServiceAccount's, say) instead of the admin's certificate.
    pub fn token_kubeconfig(&self, token: &str, dir: &Path) -> Result<PathBuf, ControlPlaneError> {
        let admin = self.kubeconfig();
        let mut kubeconfig =
            Kubeconfig::read_from(&admin).map_err(|error| ControlPlaneError::Kubeconfig {
                path: admin.clone(),
                error,
            })?;
        for user in &mut kubeconfig.auth_infos {
            user.auth_info = Some(AuthInfo {
                token: Some(token.to_string().into()),
                ..AuthInfo::default()
            });
        }
        let path = dir.join("kubeconfig");
        let text = serde_json::to_vec(&kubeconfig).unwrap_or_default();
        std::fs::write(&path, text).map_err(|error| ControlPlaneError::Write {
            path: path.clone(),
            error,
        })?;
        Ok(path)
    }

    /// A kube client with the admin kubeconfig.
    pub async fn client(&self) -> Result<Client, ControlPlaneError> {
        let path = self.kubeconfig();
        let kubeconfig =
            Kubeconfig::read_from(&path).map_err(|error| ControlPlaneError::Kubeconfig {
                path: path.clone(),
                error,
            })?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|error| ControlPlaneError::Kubeconfig { path, error })?;
        Client::try_from(config).map_err(ControlPlaneError::Client)
    }

    /// Runs the pinned kubectl (`.tools/bin/kubectl`, never one from `PATH`) with the admin
    /// kubeconfig, `args` and, if given, `stdin`.
    pub fn kubectl(
        &self,
        args: &[&str],
        stdin: Option<&str>,
    ) -> Result<KubectlOutput, ControlPlaneError> {
        let kubectl = repository::tool("kubectl");
        let failed = |error| ControlPlaneError::Run {
            program: kubectl.clone(),
            error,
        };
        let mut child = Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(failed)?;
        // Taken, written and dropped here, so kubectl sees the end of its input.
        if let Some(mut input) = child.stdin.take()
            && let Some(text) = stdin
        {
            input.write_all(text.as_bytes()).map_err(failed)?;
        }
        let output = child.wait_with_output().map_err(failed)?;
        Ok(KubectlOutput {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let script = repository::hack(SCRIPT);
        let stopped = Command::new(&script)
            .arg("stop")
            .env("CONTROL_PLANE_DIR", self.state.path())
            .status();
        match stopped {
            Ok(status) if status.success() => {}
            Ok(status) => eprintln!("{} stop: {status}", script.display()),
            Err(error) => eprintln!("cannot run {} stop: {error}", script.display()),
        }
    }
}

/// Creates ServiceAccount `namespace/name` (unless it exists) and returns a token for it
/// from the TokenRequest API, valid for an hour.
pub async fn service_account_token(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<String, kube::Error> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let mut account = ServiceAccount::default();
    account.metadata.name = Some(name.to_string());
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => return Err(error),
    }
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let answer = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await?;
    Ok(answer.status.map(|status| status.token).unwrap_or_default())
}

/// Creates namespace `name` (unless it exists) and returns its name.
///
/// # Panics
/// If the API server refuses it for another reason than that it exists.
pub async fn create_namespace(client: &Client, name: &str) -> String {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(name.to_string());
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("cannot create namespace {name}: {error}"),
    }
    name.to_string()
}

/// Waits up to `wait` until Memcached `namespace/name` is Available, with `servers` servers
/// when given; returns its `status.servers`.
///
/// # Panics
/// If it is not within `wait` (`scenarios::eventually`).
pub async fn memcached_available(
    client: &Client,
    namespace: &str,
    name: &str,
    servers: Option<usize>,
    wait: std::time::Duration,
) -> Vec<String> {
    let api: Api<Memcached> = Api::namespaced(client.clone(), namespace);
    let count = servers
        .map(|n| format!(" with {n} servers"))
        .unwrap_or_default();
    crate::scenarios::eventually(
        &format!("Memcached {namespace}/{name} Available{count}"),
        wait,
        || async {
            let status = api.get(name).await.ok()?.status?;
            let available = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Available" && c.status == "True");
            let listed = status.servers.unwrap_or_default();
            (available && servers.is_none_or(|n| listed.len() == n)).then_some(listed)
        },
    )
    .await
}

/// The pods of Deployment `deployment` in `namespace` (by the name its ReplicaSets give them)
/// that are not being deleted, by name.
///
/// # Panics
/// If the API server refuses the list.
pub async fn pods_of_deployment(client: &Client, namespace: &str, deployment: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut pods: Vec<Pod> = api
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("the pods of {namespace}/{deployment}: {e}"))
        .items
        .into_iter()
        .filter(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(deployment))
                && p.metadata.deletion_timestamp.is_none()
        })
        .collect();
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    pods
}

/// The names of the cluster-scoped objects of kind `K` that start with the operator's name.
///
/// # Panics
/// If the API server refuses the list.
pub async fn names_of_ours<K>(client: &Client) -> Vec<String>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list {}: {e}", K::kind(&())))
        .items
        .iter()
        .filter_map(|o| o.meta().name.clone())
        .filter(|n| n.starts_with(memcached_operator::operator::NAME))
        .collect()
}
