//! The helpers that run beside memcached in its pods, from the operator's own image, and deal
//! only with their own pod's server: the certificate refresher (`refresh-certs`), which brings
//! a renewed certificate into a running server, the credentials reloader (`reload-auth`),
//! which has it reread a changed auth file, and the stats relay (`relay-stats`), which lets
//! memcached_exporter read the statistics of a server that requires authentication. None has
//! Kubernetes credentials; all read only the files mounted into the pod.

pub mod refresher;
pub mod relay;
pub mod reloader;
pub mod session;
