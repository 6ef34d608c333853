//! Applies the TLS settings to one listener: builds its rustls configuration from the current
//! [`TlsSettings`] and, at each change, builds a new one and swaps it in with axum-server's
//! [`RustlsConfig::reload_from_config`].
//!
//! The swap affects handshakes that start afterwards only: a connection already open keeps the
//! configuration it was accepted with, so no request in flight fails. The listener's own
//! parts (its certificate resolver, ALPN) are the `build` function's: the resolver goes on
//! serving whatever certificate it holds. A configuration rustls refuses is logged and the
//! previous one kept.

use std::sync::Arc;

use axum_server::tls_rustls::RustlsConfig;
use rustls::ServerConfig;
use tracing::{error, info};

use super::TlsSettings;
use super::cluster::SettingsWatch;

/// A listener's rustls configuration, kept following the TLS settings.
pub struct ProfiledTls<B> {
    listener: &'static str,
    settings: SettingsWatch,
    build: B,
    config: RustlsConfig,
    current: Arc<TlsSettings>,
}

impl<B> ProfiledTls<B>
where
    B: Fn(&TlsSettings) -> Result<ServerConfig, rustls::Error> + Send + 'static,
{
    /// Builds `listener`'s configuration from the current settings with `build`.
    pub fn new(
        listener: &'static str,
        mut settings: SettingsWatch,
        build: B,
    ) -> Result<Self, rustls::Error> {
        let current = settings.borrow_and_update().clone();
        let config = RustlsConfig::from_config(Arc::new(build(&current)?));
        Ok(ProfiledTls {
            listener,
            settings,
            build,
            config,
            current,
        })
    }

    /// The configuration to serve with; it changes in place.
    pub fn config(&self) -> RustlsConfig {
        self.config.clone()
    }

    /// Swaps in a new configuration at each change of the settings, until they can no longer
    /// change.
    pub async fn run(mut self) {
        while self.settings.changed().await.is_ok() {
            let next = self.settings.borrow_and_update().clone();
            if next.same_as(&self.current) {
                continue;
            }
            match (self.build)(&next) {
                Ok(config) => {
                    self.config.reload_from_config(Arc::new(config));
                    info!(
                        listener = self.listener,
                        profile = next.profile,
                        "TLS settings applied to new connections"
                    );
                    self.current = next;
                }
                Err(problem) => error!(
                    listener = self.listener,
                    profile = next.profile,
                    %problem,
                    "rustls refused the TLS settings: keeping the previous ones"
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::sync::watch;

    use super::*;
    use crate::tls::certs::CertResolver;
    use crate::tls::config::tls_config;
    use crate::tls::profile::ciphers::settle;
    use crate::tls::profile::profiles::{Adherence, MODERN_CIPHERS, Requested, TlsVersion};

    fn modern() -> TlsSettings {
        let requested = Requested {
            profile: "Modern",
            ciphers: MODERN_CIPHERS.iter().map(|c| c.to_string()).collect(),
            min_version: TlsVersion::Tls13,
            adherence: Adherence::NoOpinion,
        };
        settle(&requested, rustls::crypto::ring::ALL_CIPHER_SUITES)
            .expect("settles")
            .0
    }

    fn builder(
        built: Arc<AtomicUsize>,
    ) -> impl Fn(&TlsSettings) -> Result<ServerConfig, rustls::Error> + Send + 'static {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        move |settings| {
            built.fetch_add(1, Ordering::SeqCst);
            tls_config(
                Arc::new(CertResolver::default()),
                provider.clone(),
                settings,
                false,
            )
        }
    }

    #[tokio::test]
    async fn a_change_of_settings_swaps_the_configuration_and_an_equal_one_does_not() {
        let (sender, receiver) = watch::channel(Arc::new(TlsSettings::intermediate()));
        let built = Arc::new(AtomicUsize::new(0));
        let tls = ProfiledTls::new("test", receiver, builder(built.clone())).expect("builds");
        let config = tls.config();
        assert_eq!(config.get_inner().crypto_provider().cipher_suites.len(), 9);
        let task = tokio::spawn(tls.run());
        sender.send_replace(Arc::new(TlsSettings::intermediate()));
        sender.send_replace(Arc::new(modern()));
        drop(sender);
        task.await.expect("runs to its end");
        assert_eq!(
            built.load(Ordering::SeqCst),
            2,
            "built at start and for Modern"
        );
        let inner = config.get_inner();
        assert_eq!(inner.crypto_provider().cipher_suites.len(), 3);
        assert!(
            inner
                .crypto_provider()
                .cipher_suites
                .iter()
                .all(|suite| matches!(suite, rustls::SupportedCipherSuite::Tls13(_)))
        );
    }

    #[tokio::test]
    async fn settings_rustls_refuses_keep_the_previous_configuration() {
        let (sender, receiver) = watch::channel(Arc::new(TlsSettings::intermediate()));
        let built = Arc::new(AtomicUsize::new(0));
        let tls = ProfiledTls::new("test", receiver, builder(built)).expect("builds");
        let config = tls.config();
        let task = tokio::spawn(tls.run());
        let nothing = TlsSettings {
            profile: "Custom",
            versions: vec![&rustls::version::TLS13],
            suites: Vec::new(),
        };
        sender.send_replace(Arc::new(nothing));
        drop(sender);
        task.await.expect("runs to its end");
        assert_eq!(config.get_inner().crypto_provider().cipher_suites.len(), 9);
    }
}
