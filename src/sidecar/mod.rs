//! What runs in memcached's pods from the operator's own image, and deals only with its own
//! pod's server: the certificate refresher (`refresh-certs`), which brings a renewed
//! certificate into a running server; the stats relay (`relay-stats`), which lets
//! memcached_exporter read the statistics of a server it could not read itself; and, for a
//! server with authentication or one the operator restarts for a withdrawn client CA, the
//! supervisor (`supervise`), which runs memcached as its child inside memcached's own
//! container, passes signals on, has it reread a changed auth file and restarts it in place
//! when the operator asks (`ca_restart`), with the installer (`install-supervisor`) that
//! copies the binary there. The refresher and
//! the relay answer the kubelet's probes from their loops' heartbeats (`health`), and serve
//! their own metrics beside them (`metrics`); the refresher also counts the client CAs a
//! server may still trust after they left `ca.crt` (`trust`). None has
//! Kubernetes credentials; all read only the files mounted into their own container. A sidecar
//! that stops on an error says why in its termination message (`termination`).

pub mod auth_watch;
pub mod ca_restart;
pub mod health;
pub mod install;
pub mod metrics;
pub mod refresher;
pub mod relay;
pub mod session;
pub mod supervisor;
pub mod termination;
pub mod trust;
