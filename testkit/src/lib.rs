//! Gives the operator's tests, benchmarks, fuzz targets and examples what they share: a test
//! PKI and the file layouts OLM and the kubelet mount certificates in, a TLS client and a
//! handshake prober, the operator as a child process, the review bodies the API server sends,
//! a local control plane (with or without a real node), the images built for that node, what
//! its containers run as and wrote, what a user may open and signal on it, and the installs
//! through `make deploy` and the real OLM.
//!
//! Nothing here runs in a cluster; the crate is never published. Each module does one job and
//! takes the operator's own declarations (API group and versions, the webhook table, OLM's
//! certificate paths) from `memcached-operator`, so a test never spells them a second time.
//!
//! Setting-up functions panic, naming the step and the file or address, when the machine
//! cannot do what a test needs (a test cannot go on without its certificate or its server);
//! functions whose failure a test observes (a request, a control plane's start) return
//! errors instead.

#![warn(missing_docs)]

pub mod access;
pub mod captured;
pub mod cases;
pub mod cert_layout;
pub mod cert_manager;
pub mod certificates;
pub mod client;
pub mod containers;
pub mod control_plane;
pub mod deploy;
pub mod direct_wiring;
pub mod handshake;
pub mod helm;
pub mod house;
pub mod images;
pub mod install_script;
pub mod lease;
pub mod loopback;
pub mod memcache;
pub mod olm_install;
pub mod pki;
pub mod process;
pub mod procfs;
pub mod proxy_pod;
pub mod repository;
pub mod reviews;
pub mod scenarios;
pub mod writer;
