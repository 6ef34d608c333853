//! The TLS both of the operator's servers share, the webhooks' and the HTTPS metrics': each
//! takes from here what it needs.
//!
//! - `certs`: the serving certificate pair, where it is found (OLM's paths, `--cert-dir`), and
//!   the resolver every handshake asks;
//! - `cert_reloader`: the reloader that swaps in a renewed pair;
//! - `cert_secret`: the certificate Secret watched through the API (`--cert-secret`), whose
//!   renewed pair is read before the kubelet brings its files;
//! - `trust` and `trust_watch`: which CA each of the API server's caBundles trusts, so that a
//!   renewed pair under a new CA is served only once a caBundle accepts it;
//! - `self_signed`: the webhooks' self-signed CA and certificate, kept in a Secret by the
//!   operator itself, and the CA written into the caBundles (`--self-signed-cert-secret`);
//! - `profile`: the cluster's TLS security profile, and its swap into each listener;
//! - `config`: a listener's rustls configuration from all of these.

pub mod cert_reloader;
pub mod cert_secret;
pub mod certs;
pub mod config;
pub mod profile;
pub mod self_signed;
pub mod trust;
pub mod trust_watch;
