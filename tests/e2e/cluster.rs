//! Starts and stops what the scenarios run against: a local control plane (through the
//! project's own script, in a temporary state directory), the operator binary with its
//! serving certificate in a temporary OLM layout, and OLM's webhook wiring pointing at it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use memcached_packager::wiring::{InstallArgs, install};
use tokio::sync::Mutex;

use crate::pki::{self, Ca, KeyForm, Layout};
use crate::process::Server;

/// The namespace of the operator's leader Lease and OLM owner labels.
pub const OPERATOR_NAMESPACE: &str = "memcached-operator-system";

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A control plane started by `hack/control-plane.sh` in its own state directory.
pub struct ControlPlane {
    state: tempfile::TempDir,
}

impl ControlPlane {
    fn start() -> Result<ControlPlane, String> {
        let state = tempfile::Builder::new()
            .prefix("memcached-operator-e2e.")
            .tempdir()
            .map_err(|e| format!("cannot make a state directory: {e}"))?;
        let script = repository().join("hack/control-plane.sh");
        let output = std::process::Command::new(&script)
            .arg("start")
            .env("CONTROL_PLANE_DIR", state.path())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        let plane = ControlPlane { state };
        if !output.status.success() {
            return Err(format!(
                "the local control plane did not start ({} start: {}):\n{}",
                script.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(plane)
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.state.path().join("kubeconfig")
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let stopped = std::process::Command::new(repository().join("hack/control-plane.sh"))
            .arg("stop")
            .env("CONTROL_PLANE_DIR", self.state.path())
            .status();
        if !matches!(stopped, Ok(status) if status.success()) {
            eprintln!("e2e: stopping the control plane failed: {stopped:?}");
        }
    }
}

/// Everything the scenarios share.
pub struct Env {
    /// The admin client.
    pub client: Client,
    /// The CA that signs the webhooks' serving certificates.
    pub ca: Ca,
    /// The OLM-style certificate root the operator reads.
    pub cert_root: tempfile::TempDir,
    /// The fixed webhook port (so the wiring survives restarts).
    pub webhook_port: u16,
    /// The running operator, if any.
    pub operator: Mutex<Option<Server>>,
    /// Drops last: stops the control plane.
    pub plane: ControlPlane,
}

impl Env {
    /// Starts the control plane and the operator, and installs the CRD and the wiring.
    pub async fn start() -> Result<Env, String> {
        let plane = tokio::task::spawn_blocking(ControlPlane::start)
            .await
            .map_err(|e| e.to_string())??;
        let kubeconfig = Kubeconfig::read_from(plane.kubeconfig())
            .map_err(|e| format!("cannot read the control plane's kubeconfig: {e}"))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| format!("cannot use the control plane's kubeconfig: {e}"))?;
        let client = Client::try_from(config).map_err(|e| format!("cannot make a client: {e}"))?;
        let ca = Ca::root();
        let cert_root = tempfile::tempdir().map_err(|e| e.to_string())?;
        let leaf = ca.serving(KeyForm::EcPkcs8);
        pki::write(
            cert_root.path(),
            Layout::ServingCerts,
            &leaf.cert_pem,
            &leaf.key_pem,
        );
        let webhook_port = free_port()?;
        let env = Env {
            client,
            ca,
            cert_root,
            webhook_port,
            operator: Mutex::new(None),
            plane,
        };
        env.create_namespace(OPERATOR_NAMESPACE).await;
        env.start_operator(env.cert_root.path()).await;
        env.install_wiring().await?;
        Ok(env)
    }

    /// Starts the operator (`run`, webhooks on the fixed port) with `cert_root`, waits until
    /// it is ready, and keeps it as the running operator.
    pub async fn start_operator(&self, cert_root: &Path) {
        let server = self.spawn_operator(cert_root, &[]).await;
        server.wait_ready(Duration::from_secs(20)).await;
        *self.operator.lock().await = Some(server);
    }

    /// Starts another operator process without waiting for it to be ready.
    pub async fn spawn_operator(&self, cert_root: &Path, flags: &[&str]) -> Server {
        let webhooks = !flags.contains(&"--webhooks=false");
        let port = if webhooks {
            self.webhook_port.to_string()
        } else {
            "0".into()
        };
        let mut args: Vec<String> = [
            "run",
            "--bind-address",
            "127.0.0.1",
            "--webhook-port",
            &port,
            "--probe-port",
            "0",
            "--metrics-port",
            "0",
            "--lease-namespace",
            OPERATOR_NAMESPACE,
            "--lease-duration",
            "6s",
            "--renew-deadline",
            "4s",
            "--retry-period",
            "1s",
            "--cert-poll-interval",
            "1s",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        args.extend(["--cert-root".to_string(), cert_root.display().to_string()]);
        args.extend(flags.iter().map(|f| f.to_string()));
        let kubeconfig = self.plane.kubeconfig().display().to_string();
        let listeners: &[&str] = if webhooks {
            &["webhooks", "probes", "metrics"]
        } else {
            &["probes", "metrics"]
        };
        Server::start_command(&args, &[("KUBECONFIG", &kubeconfig)], listeners).await
    }

    /// Stops the running operator with SIGTERM and waits for it to exit.
    pub async fn stop_operator(&self) {
        if let Some(mut server) = self.operator.lock().await.take() {
            server.terminate();
            server.exit_status(Duration::from_secs(30)).await;
        }
    }

    /// Applies the bundle's CRD and OLM's webhook wiring, pointed at the operator.
    pub async fn install_wiring(&self) -> Result<(), String> {
        let ca_file = self.cert_root.path().join("ca.crt");
        std::fs::write(&ca_file, &self.ca.pem).map_err(|e| e.to_string())?;
        let args = InstallArgs {
            bundle: repository().join("bundle/manifests"),
            url: format!("https://127.0.0.1:{}", self.webhook_port),
            ca_file,
            namespace: OPERATOR_NAMESPACE.to_string(),
        };
        install(&args, &self.client)
            .await
            .map_err(|e| format!("cannot install the CRD and the webhook wiring: {e}"))?;
        // The CRD must be served before the first scenario writes to it.
        eventually(
            "the Memcached CRD is served",
            Duration::from_secs(30),
            || async {
                let api: Api<memcached_operator::api::v1beta1::Memcached> =
                    Api::all(self.client.clone());
                api.list(&Default::default()).await.ok().map(|_| ())
            },
        )
        .await;
        Ok(())
    }

    /// Creates a namespace for a scenario and returns its name.
    pub async fn create_namespace(&self, name: &str) -> String {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some(name.to_string());
        match namespaces.create(&PostParams::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => panic!("cannot create namespace {name}: {error}"),
        }
        name.to_string()
    }

    /// The admin kubeconfig, for kubectl.
    pub fn kubeconfig(&self) -> PathBuf {
        self.plane.kubeconfig()
    }
}

/// A loopback port nothing listens on now.
fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

/// Polls `check` until it returns `Some`, or panics naming `what` after `within`.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs the project's kubectl against the control plane; returns (success, stdout, stderr).
pub fn kubectl(env: &Env, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    use std::io::Write;
    let mut command = std::process::Command::new(repository().join(".tools/bin/kubectl"));
    command
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("run .tools/bin/kubectl");
    if let (Some(text), Some(mut input)) = (stdin, child.stdin.take()) {
        input
            .write_all(text.as_bytes())
            .expect("write kubectl's stdin");
    }
    let output = child.wait_with_output().expect("wait for kubectl");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
