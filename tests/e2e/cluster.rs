//! Sets up what the scenarios run against: a local control plane (the test kit's), the
//! operator binary with its serving certificate in a temporary OLM layout, and OLM's webhook
//! wiring pointing at it.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PostParams};
use testkit::cert_layout::{self, Layout};
use testkit::control_plane::ControlPlane;
use testkit::direct_wiring::{InstallArgs, install};
use testkit::pki::{Ca, KeyForm};
use testkit::ports::free_port;
use testkit::process::{OperatorBinary, Server};
use testkit::repository;
use tokio::sync::Mutex;

/// The operator binary cargo built for these tests.
pub const OPERATOR: OperatorBinary = OperatorBinary::new(env!("CARGO_BIN_EXE_memcached-operator"));

/// The namespace of the operator's leader Lease and OLM owner labels.
pub const OPERATOR_NAMESPACE: &str = "memcached-operator-system";

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
            .map_err(|e| format!("the control plane's start did not finish: {e}"))?
            .map_err(|e| e.to_string())?;
        let client = plane.client().await.map_err(|e| e.to_string())?;
        let ca = Ca::root();
        let cert_root = tempfile::tempdir()
            .map_err(|e| format!("cannot make a temporary certificate root: {e}"))?;
        let leaf = ca.serving(KeyForm::EcPkcs8);
        cert_layout::write(
            cert_root.path(),
            Layout::ServingCerts,
            &leaf.cert_pem,
            &leaf.key_pem,
        );
        let env = Env {
            client,
            ca,
            cert_root,
            webhook_port: free_port(),
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
        OPERATOR
            .start(&args, &[("KUBECONFIG", &kubeconfig)], listeners)
            .await
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
        std::fs::write(&ca_file, &self.ca.pem)
            .map_err(|e| format!("cannot write {}: {e}", ca_file.display()))?;
        let args = InstallArgs {
            bundle: repository::root().join("bundle/manifests"),
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
    match env.plane.kubectl(args, stdin) {
        Ok(output) => (output.success, output.stdout, output.stderr),
        Err(error) => panic!("kubectl {}: {error}", args.join(" ")),
    }
}
