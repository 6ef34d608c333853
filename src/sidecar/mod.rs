//! The helpers that run beside memcached in its pods, from the operator's own image, and talk
//! only to their own pod's server on its loopback: the certificate refresher
//! (`refresh-certs`), which brings a renewed certificate into a running server, and the stats
//! relay (`relay-stats`), which lets memcached_exporter read the statistics of a server that
//! requires authentication. Neither has Kubernetes credentials; both read only the files
//! mounted into the pod.

pub mod refresher;
pub mod relay;
pub mod session;
