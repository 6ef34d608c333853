//! Reads the cluster's TLS security profile and keeps following it: finds out (discovery)
//! whether `apiservers.config.openshift.io` exists, watches its `cluster` object, and publishes
//! the [`TlsSettings`] each profile comes to, logging once per change each way they differ from
//! the profile.
//!
//! Where the API does not exist (any cluster but OpenShift), or there is no Kubernetes client,
//! Intermediate is served without a word above debug level. The API is looked for once, at
//! start-up, and again only while discovery fails. A profile that cannot be read or leaves no
//! cipher suite is logged as an error and changes nothing: the previous settings stay.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use rustls::SupportedCipherSuite;
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

use super::TlsSettings;
use super::ciphers::{self, Adjustment};
use super::profiles::{
    APISERVER_GROUP, APISERVER_KIND, APISERVER_NAME, APISERVER_PLURAL, APISERVER_VERSION,
    Adherence, ApiServerSpec, Requested, requested,
};

/// How long start-up waits for the first read of the profile before serving Intermediate
/// meanwhile (the watch goes on, and applies the profile once read).
const FIRST_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How often discovery is tried again while it fails.
const DISCOVERY_RETRY: Duration = Duration::from_secs(30);

/// The settings every TLS listener follows: the current value, and a change for each new
/// profile.
pub type SettingsWatch = watch::Receiver<Arc<TlsSettings>>;

/// Starts following the cluster's profile with `client`, and returns the settings to serve,
/// once the profile has been read (or [`FIRST_READ_TIMEOUT`] has passed). The follower runs
/// until the process ends; without a client or the API, the settings never change.
pub async fn follow(client: Option<Client>, available: Vec<SupportedCipherSuite>) -> SettingsWatch {
    let (sender, mut receiver) = watch::channel(Arc::new(TlsSettings::intermediate()));
    let Some(client) = client else {
        debug!("no Kubernetes client: TLS profile Intermediate");
        return receiver;
    };
    let follower = Follower::new(sender, available);
    tokio::spawn(follower.run(client));
    receiver.mark_unchanged();
    if tokio::time::timeout(FIRST_READ_TIMEOUT, receiver.changed())
        .await
        .is_err()
    {
        warn!(
            timeout_s = FIRST_READ_TIMEOUT.as_secs(),
            "the cluster's TLS profile was not read in time: serving Intermediate until it is"
        );
    }
    receiver
}

/// Whether the API server serves `apiservers.config.openshift.io`: `Ok(false)` when the group
/// version is not found.
async fn api_exists(client: &Client) -> Result<bool, kube::Error> {
    match client
        .list_api_group_resources(&format!("{APISERVER_GROUP}/{APISERVER_VERSION}"))
        .await
    {
        Ok(resources) => Ok(resources
            .resources
            .iter()
            .any(|resource| resource.name == APISERVER_PLURAL)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

/// Publishes the settings of each profile the cluster asks for.
struct Follower {
    sender: watch::Sender<Arc<TlsSettings>>,
    available: Vec<SupportedCipherSuite>,
    /// The last profile read, applied or refused; a profile equal to it changes nothing and
    /// logs nothing.
    last: Option<Result<Requested, String>>,
}

impl Follower {
    fn new(sender: watch::Sender<Arc<TlsSettings>>, available: Vec<SupportedCipherSuite>) -> Self {
        Follower {
            sender,
            available,
            last: None,
        }
    }

    async fn run(mut self, client: Client) {
        let mut discovery_failed = false;
        loop {
            match api_exists(&client).await {
                Ok(true) => break,
                Ok(false) => {
                    debug!("no {APISERVER_PLURAL}.{APISERVER_GROUP} API: TLS profile Intermediate");
                    self.publish_default();
                    return;
                }
                Err(error) => {
                    if !discovery_failed {
                        warn!(
                            %error,
                            "cannot tell whether {APISERVER_PLURAL}.{APISERVER_GROUP} exists: \
                             serving Intermediate, trying again every {}s",
                            DISCOVERY_RETRY.as_secs()
                        );
                        discovery_failed = true;
                    }
                    self.publish_default();
                    tokio::time::sleep(DISCOVERY_RETRY).await;
                }
            }
        }
        let gvk = GroupVersionKind::gvk(APISERVER_GROUP, APISERVER_VERSION, APISERVER_KIND);
        let resource = ApiResource::from_gvk_with_plural(&gvk, APISERVER_PLURAL);
        let api: Api<DynamicObject> = Api::all_with(client, &resource);
        let config = watcher::Config::default().fields(&format!("metadata.name={APISERVER_NAME}"));
        let mut events = watcher::watcher(api, config).default_backoff().boxed();
        let mut listed: Option<DynamicObject> = None;
        let mut last_error: Option<String> = None;
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Init) => listed = None,
                Ok(Event::InitApply(object)) => listed = Some(object),
                Ok(Event::InitDone) => self.observe(listed.take().as_ref()),
                Ok(Event::Apply(object)) => self.observe(Some(&object)),
                Ok(Event::Delete(_)) => self.observe(None),
                Err(error) => {
                    let error = error.to_string();
                    if last_error.as_ref() != Some(&error) {
                        warn!(
                            error,
                            "cannot watch {APISERVER_PLURAL}/{APISERVER_NAME} (is get, list and \
                             watch on {APISERVER_PLURAL}.{APISERVER_GROUP} granted?): keeping \
                             the TLS settings served, retrying with backoff"
                        );
                        last_error = Some(error);
                    }
                    // Start-up waits for a first value: the one served (Intermediate) is it.
                    self.sender.send_modify(|_| {});
                    continue;
                }
            }
            last_error = None;
        }
    }

    /// Serves Intermediate where there is no profile to read; the receiver sees a change, so
    /// start-up need not wait.
    fn publish_default(&self) {
        self.sender
            .send_replace(Arc::new(TlsSettings::intermediate()));
    }

    /// Applies the profile of `object` (`None`: no `cluster` object, the default).
    fn observe(&mut self, object: Option<&DynamicObject>) {
        let spec = match object.map(spec_of).transpose() {
            Ok(spec) => spec,
            Err(problem) => {
                self.refuse(problem);
                return;
            }
        };
        match requested(spec.as_ref()) {
            Ok(requested) => self.apply(requested),
            Err(problem) => self.refuse(problem.to_string()),
        }
    }

    /// Logs why a profile is not applied, once while it stays the same.
    fn refuse(&mut self, problem: String) {
        let refused = Some(Err(problem.clone()));
        if self.last != refused {
            error!(
                problem,
                "cannot apply the cluster's TLS profile: keeping the previous TLS settings"
            );
            self.last = refused;
        }
        // Start-up waits for a first value; the previous one is it.
        self.sender.send_modify(|_| {});
    }

    fn apply(&mut self, requested: Requested) {
        let wanted = Some(Ok(requested.clone()));
        if self.last == wanted {
            return;
        }
        self.last = wanted;
        if let Adherence::Unknown(value) = &requested.adherence {
            warn!(
                adherence = value.as_str(),
                "spec.tlsAdherence: not a value this operator knows, treated as \
                 StrictAllComponents; the TLS profile is followed either way"
            );
        }
        let (settings, adjustments) = match ciphers::settle(&requested, &self.available) {
            Ok(settled) => settled,
            Err(problem) => {
                error!(
                    profile = problem.profile,
                    ciphers = ?problem.ciphers,
                    "{problem}"
                );
                self.sender.send_modify(|_| {});
                return;
            }
        };
        for adjustment in &adjustments {
            let message = adjustment.message();
            match adjustment {
                Adjustment::CipherNotOffered { name, .. } => {
                    warn!(
                        profile = requested.profile,
                        cipher = name.as_str(),
                        "{message}"
                    )
                }
                _ if adjustment.is_shortfall() => warn!(profile = requested.profile, "{message}"),
                _ => info!(profile = requested.profile, "{message}"),
            }
        }
        info!(
            profile = settings.profile,
            adherence = requested.adherence.label(),
            versions = ?settings.version_labels(),
            suites = ?settings.suite_names(),
            "TLS profile: new connections use these settings"
        );
        self.sender.send_replace(Arc::new(settings));
    }
}

/// The `spec` of an `APIServer` object, or why it cannot be read.
fn spec_of(object: &DynamicObject) -> Result<ApiServerSpec, String> {
    match object.data.get("spec") {
        None => Ok(ApiServerSpec::default()),
        Some(spec) => serde_path_to_error::deserialize(spec.clone())
            .map_err(|error| format!("spec.{}: {}", error.path(), error.inner())),
    }
}
