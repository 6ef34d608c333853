//! Sets up what the scenarios run against: a local control plane (the test kit's), the
//! operator binary with its serving certificate in a temporary OLM layout, OLM's webhook
//! wiring pointing at it, a scraper's token bound to the committed `metrics-reader`
//! ClusterRole, which every scrape of the operator's (HTTPS) metrics presents, and OpenShift's
//! real `APIServer` CRD (from `hack/tools.sh openshift-api`), so that the operator finds the
//! API of the cluster's TLS profile as on OpenShift.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use memcached_operator::operator;
use memcached_packager::monitoring::METRICS_READER_ROLE_NAME;
use testkit::cert_layout::{self, Layout};
use testkit::control_plane::ControlPlane;
use testkit::direct_wiring::{InstallArgs, install};
use testkit::loopback;
use testkit::pki::{Ca, KeyForm, Leaf};
use testkit::process::{OperatorBinary, READY_WITHIN, Server};
use testkit::repository;
use tokio::sync::Mutex;

/// The operator binary cargo built for these tests.
pub const OPERATOR: OperatorBinary = OperatorBinary::new(env!("CARGO_BIN_EXE_memcached-operator"));

/// The namespace of the operator's leader Lease and OLM owner labels.
pub const OPERATOR_NAMESPACE: &str = "memcached-operator-system";

/// The ServiceAccount whose token scrapes the metrics, as Prometheus's would.
pub const SCRAPER: &str = "metrics-scraper";

/// The webhook port, as in the operator's Deployment: on this process's own loopback address
/// and outside the kernel's ephemeral range, so that no other socket is ever given it.
const WEBHOOK_PORT: u16 = operator::WEBHOOK_PORT;

/// A generous bound on the waits of the set-up: for the API server to serve a CRD, to
/// authorise a binding.
const WAIT: Duration = Duration::from_secs(120);

/// OpenShift's `APIServer` CRD, as `hack/tools.sh openshift-api` copies it out of
/// github.com/openshift/api.
pub const APISERVER_CRD: &str =
    ".tools/openshift/crds/0000_10_config-operator_01_apiservers-Default.crd.yaml";

/// Everything the scenarios share.
pub struct Env {
    /// The admin client.
    pub client: Client,
    /// The CA that signs the webhooks' serving certificates.
    pub ca: Ca,
    /// The OLM-style certificate root the operator reads.
    pub cert_root: tempfile::TempDir,
    /// Where every operator started here serves its webhooks and the wiring points, for the
    /// suite's whole life (so the wiring survives restarts, as OLM's Service does): a fixed
    /// port on this process's own loopback address ([`loopback::fixed`]). While no operator
    /// runs, nothing listens there and connections are refused.
    webhook: SocketAddr,
    /// The running operator, if any.
    pub operator: Mutex<Option<Server>>,
    /// The scraper's token: every operator started here scrapes its metrics with it.
    pub metrics_token: String,
    /// Drops last: stops the control plane.
    pub plane: ControlPlane,
}

/// Lays a new serving pair of `ca` out under `root` in OLM's layout, and returns it.
fn lay_out_pair(ca: &Ca, root: &Path) -> Leaf {
    let leaf = ca.serving(KeyForm::EcPkcs8);
    cert_layout::write(root, Layout::ServingCerts, &leaf.cert_pem, &leaf.key_pem);
    leaf
}

impl Env {
    /// Starts the control plane and the operator, and installs the CRD and the wiring.
    pub async fn start() -> Result<Env, String> {
        let (plane, client) = ControlPlane::start_with_client().await?;
        let ca = Ca::root();
        let cert_root = tempfile::tempdir()
            .map_err(|e| format!("cannot make a temporary certificate root: {e}"))?;
        lay_out_pair(&ca, cert_root.path());
        let webhook = loopback::fixed(WEBHOOK_PORT)?;
        let mut env = Env {
            client,
            ca,
            cert_root,
            webhook,
            operator: Mutex::new(None),
            metrics_token: String::new(),
            plane,
        };
        env.create_namespace(OPERATOR_NAMESPACE).await;
        env.install_metrics_reader_role().await?;
        env.metrics_token = env.token(OPERATOR_NAMESPACE, SCRAPER).await;
        env.bind_metrics_reader(OPERATOR_NAMESPACE, SCRAPER).await;
        env.install_apiserver_crd().await?;
        env.start_operator(env.cert_root.path()).await;
        env.install_wiring().await?;
        Ok(env)
    }

    /// Puts back what scenarios change, after one failed midway: a pair of the suite's CA
    /// under the certificate root, the wiring with the suite's CA in every bundle, and the
    /// operator as the suite starts it (no extra flags).
    pub async fn restore(self: Arc<Self>) -> Result<(), String> {
        self.stop_operator().await;
        self.lay_out_suite_pair();
        self.install_wiring().await?;
        self.start_operator(self.cert_root.path()).await;
        Ok(())
    }

    /// Lays a new serving pair of the suite's CA out under the certificate root (OLM's
    /// layout), and returns it.
    pub fn lay_out_suite_pair(&self) -> Leaf {
        lay_out_pair(&self.ca, self.cert_root.path())
    }

    /// Where the API server calls the webhooks.
    pub fn webhook_address(&self) -> SocketAddr {
        self.webhook
    }

    /// Starts the operator (`run`, webhooks at [`Env::webhook_address`]) with `cert_root`,
    /// waits until it is ready, and keeps it as the running operator.
    pub async fn start_operator(&self, cert_root: &Path) {
        let server = self.spawn_operator(cert_root, &[]).await;
        server.wait_ready(READY_WITHIN).await;
        *self.operator.lock().await = Some(server);
    }

    /// Starts another operator process without waiting for it to be ready: its listeners
    /// are bound, the webhooks' (unless `--webhooks=false`) at [`Env::webhook_address`], the
    /// others on ports of its choosing.
    pub async fn spawn_operator(&self, cert_root: &Path, flags: &[&str]) -> Server {
        self.spawn_operator_with_env(cert_root, flags, &[]).await
    }

    /// Starts another operator process with `flags` and the variables `env` beside its own,
    /// without waiting for it to be ready.
    pub async fn spawn_operator_with_env(
        &self,
        cert_root: &Path,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> Server {
        let webhooks = !flags.contains(&"--webhooks=false");
        let port = if webhooks {
            self.webhook.port().to_string()
        } else {
            "0".into()
        };
        let address = self.webhook.ip().to_string();
        let mut args: Vec<String> = [
            "run",
            "--bind-address",
            &address,
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
        let mut variables = vec![
            ("KUBECONFIG", kubeconfig.as_str()),
            ("POD_NAMESPACE", OPERATOR_NAMESPACE),
        ];
        variables.extend_from_slice(env);
        let mut server = OPERATOR.start(&args, &variables, listeners).await;
        server.set_metrics_token(&self.metrics_token);
        server
    }

    /// Creates the `metrics-reader` ClusterRole from the committed `config/rbac` file.
    async fn install_metrics_reader_role(&self) -> Result<(), String> {
        let path = repository::root().join("config/rbac/metrics_reader_role.yaml");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let document = memcached_packager::yaml::documents(&text)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .into_iter()
            .next()
            .ok_or_else(|| format!("{}: no object", path.display()))?;
        let role: ClusterRole = serde_json::from_value(document)
            .map_err(|e| format!("{}: not a ClusterRole: {e}", path.display()))?;
        let roles: Api<ClusterRole> = Api::all(self.client.clone());
        match roles.create(&PostParams::default(), &role).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(error) => Err(format!(
                "cannot create the metrics-reader ClusterRole: {error}"
            )),
        }
    }

    /// Creates OpenShift's `APIServer` CRD and waits until `apiservers.config.openshift.io` is
    /// served, so that the operator, started next, finds it.
    async fn install_apiserver_crd(&self) -> Result<(), String> {
        let path = repository::root().join(APISERVER_CRD);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "cannot read {} (hack/tools.sh openshift-api copies it): {e}",
                path.display()
            )
        })?;
        let document = memcached_packager::yaml::documents(&text)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .into_iter()
            .next()
            .ok_or_else(|| format!("{}: no object", path.display()))?;
        let crd: CustomResourceDefinition = serde_json::from_value(document)
            .map_err(|e| format!("{}: not a CRD: {e}", path.display()))?;
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(format!("cannot create the APIServer CRD: {error}")),
        }
        let client = self.client.clone();
        eventually("apiservers.config.openshift.io is served", WAIT, || {
            let client = client.clone();
            async move {
                let resources = client
                    .list_api_group_resources("config.openshift.io/v1")
                    .await
                    .ok()?;
                resources
                    .resources
                    .iter()
                    .any(|r| r.name == "apiservers")
                    .then_some(())
            }
        })
        .await;
        Ok(())
    }

    /// Creates the ServiceAccount `namespace/name` (if need be) and returns a token of it,
    /// valid for a day.
    pub async fn token(&self, namespace: &str, name: &str) -> String {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        let mut account = ServiceAccount::default();
        account.metadata.name = Some(name.to_string());
        match accounts.create(&PostParams::default(), &account).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => panic!("cannot create service account {namespace}/{name}: {error}"),
        }
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec![],
                expiration_seconds: Some(24 * 3600),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .unwrap_or_else(|error| panic!("no token for {namespace}/{name}: {error}"))
            .status
            .unwrap_or_else(|| panic!("a token request for {namespace}/{name} without status"))
            .token
    }

    /// Binds the `metrics-reader` ClusterRole to the ServiceAccount `namespace/name`, and
    /// waits until the API server's authorizer says it may read the metrics (a scrape denied
    /// before that would be remembered for a while).
    pub async fn bind_metrics_reader(&self, namespace: &str, name: &str) {
        let binding = ClusterRoleBinding {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("metrics-reader-{namespace}-{name}")),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".to_string(),
                kind: "ClusterRole".to_string(),
                name: METRICS_READER_ROLE_NAME.to_string(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_string(),
                name: name.to_string(),
                namespace: Some(namespace.to_string()),
                ..Subject::default()
            }]),
        };
        let bindings: Api<ClusterRoleBinding> = Api::all(self.client.clone());
        match bindings.create(&PostParams::default(), &binding).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => panic!("cannot bind metrics-reader to {namespace}/{name}: {error}"),
        }
        let user = format!("system:serviceaccount:{namespace}:{name}");
        eventually(
            &format!("{user} may get {}", operator::METRICS_PATH),
            WAIT,
            || async { self.may_read_metrics(&user).await.then_some(()) },
        )
        .await;
    }

    /// Whether the API server's authorizer lets `user` get the metrics path.
    pub async fn may_read_metrics(&self, user: &str) -> bool {
        let reviews: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.to_string()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(operator::METRICS_PATH.to_string()),
                    verb: Some("get".to_string()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        reviews
            .create(&PostParams::default(), &review)
            .await
            .ok()
            .and_then(|answer| answer.status)
            .is_some_and(|status| status.allowed)
    }

    /// Stops the running operator with SIGTERM and waits for it to exit.
    pub async fn stop_operator(&self) {
        if let Some(mut server) = self.operator.lock().await.take() {
            server.terminate();
            server.exit_status(READY_WITHIN).await;
        }
    }

    /// Applies the bundle's CRD and OLM's webhook wiring, pointed at the operator.
    pub async fn install_wiring(&self) -> Result<(), String> {
        self.install_wiring_with(&self.ca.pem).await
    }

    /// Installs (or rewrites) the CRD and the webhook wiring with `ca_pem` as every CA
    /// bundle, one object after the other, as cainjector rewrites them.
    pub async fn install_wiring_with(&self, ca_pem: &str) -> Result<(), String> {
        let ca_file = self.cert_root.path().join("ca.crt");
        std::fs::write(&ca_file, ca_pem)
            .map_err(|e| format!("cannot write {}: {e}", ca_file.display()))?;
        let args = InstallArgs {
            bundle: repository::root().join("bundle/manifests"),
            url: format!("https://{}", self.webhook),
            ca_file,
            namespace: OPERATOR_NAMESPACE.to_string(),
        };
        install(&args, &self.client)
            .await
            .map_err(|e| format!("cannot install the CRD and the webhook wiring: {e}"))?;
        // The CRD must be served before the first scenario writes to it.
        eventually("the Memcached CRD is served", WAIT, || async {
            let api: Api<memcached_operator::api::v1beta1::Memcached> =
                Api::all(self.client.clone());
            api.list(&Default::default()).await.map(|_| ())
        })
        .await;
        Ok(())
    }

    /// Stops the running operator and starts it again with `flags`, on the same certificate
    /// root and address, waiting until it is ready.
    pub async fn restart_operator(&self, flags: &[&str]) {
        self.restart_operator_with_env(flags, &[]).await;
    }

    /// Stops the running operator and starts it again with `flags` and the variables `env`,
    /// on the same certificate root and port, waiting until it is ready.
    pub async fn restart_operator_with_env(&self, flags: &[&str], env: &[(&str, &str)]) {
        self.stop_operator().await;
        let server = self
            .spawn_operator_with_env(self.cert_root.path(), flags, env)
            .await;
        server.wait_ready(READY_WITHIN).await;
        *self.operator.lock().await = Some(server);
    }

    /// Creates or replaces the Secret `name` in the operator's namespace with a serving pair.
    pub async fn write_cert_secret(&self, name: &str, cert_pem: &str, key_pem: &str) {
        let secrets: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.client.clone(), OPERATOR_NAMESPACE);
        let secret = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": OPERATOR_NAMESPACE},
            "type": "kubernetes.io/tls",
            "stringData": {"tls.crt": cert_pem, "tls.key": key_pem},
        });
        secrets
            .patch(
                name,
                &kube::api::PatchParams::apply("e2e").force(),
                &kube::api::Patch::Apply(&secret),
            )
            .await
            .unwrap_or_else(|e| panic!("write Secret {name}: {e}"));
    }

    /// The running operator's process id.
    pub async fn operator_pid(&self) -> Option<u32> {
        self.operator.lock().await.as_ref().map(Server::pid)
    }

    /// The running operator's log lines that contain `text`.
    pub async fn operator_logs_containing(&self, text: &str) -> Vec<serde_json::Value> {
        self.operator
            .lock()
            .await
            .as_ref()
            .map(|server| server.logs_containing(text))
            .unwrap_or_default()
    }

    /// Creates a namespace for a scenario and returns its name.
    pub async fn create_namespace(&self, name: &str) -> String {
        testkit::control_plane::create_namespace(&self.client, name).await
    }
}

pub use testkit::scenarios::eventually;

/// Runs the project's kubectl against the control plane; returns (success, stdout, stderr).
pub fn kubectl(env: &Env, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    match env.plane.kubectl(args, stdin) {
        Ok(output) => (output.success, output.stdout, output.stderr),
        Err(error) => panic!("kubectl {}: {error}", args.join(" ")),
    }
}
