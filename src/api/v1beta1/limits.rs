//! The numbers of the v1beta1 API: what defaulting fills in, and the bounds of what a spec may
//! ask for. The webhook, the CRD's CEL rules and the schema's descriptions all quote these.

/// Replicas when none are given.
pub const DEFAULT_REPLICAS: i32 = 1;
/// The most replicas a Memcached may ask for.
pub const MAX_REPLICAS: i32 = 64;
/// memcached's item memory in MiB when none is given.
pub const DEFAULT_MEMORY_LIMIT_MB: i32 = 64;
/// memcached's connection limit when none is given.
pub const DEFAULT_MAX_CONNECTIONS: i32 = 1024;
/// memcached's worker threads when none are given.
pub const DEFAULT_THREADS: i32 = 4;
/// memcached's largest item when none is given.
pub const DEFAULT_MAX_ITEM_SIZE: &str = "1m";
/// The smallest item size memcached accepts, in bytes.
pub const MIN_ITEM_SIZE_BYTES: u64 = 1024;
/// memcached's largest slab chunk (`slab_chunk_max`) unless set otherwise: half its 1 MiB slab
/// page. The item size must be a multiple of it, and so at least as large.
pub const DEFAULT_SLAB_CHUNK_MAX_BYTES: u64 = 524_288;
/// memcached's verbosity when none is given.
pub const DEFAULT_VERBOSITY: i32 = 0;
/// The client port when none is given.
pub const DEFAULT_PORT: i32 = 11211;
/// The PodDisruptionBudget's maxUnavailable when none is given.
pub const DEFAULT_MAX_UNAVAILABLE: i32 = 1;
/// The least item memory, in MiB, with a warm restart: memcached then preallocates a 1 MiB
/// page for each of its slab classes (39 with the default settings) and refuses to start with
/// less.
pub const MIN_WARM_RESTART_MEMORY_MB: i32 = 64;
/// The pods' termination grace period, in seconds, when none is given.
pub const DEFAULT_TERMINATION_GRACE_SECONDS: i64 = 30;
/// The exporter's port when none is given (memcached_exporter's own default).
pub const DEFAULT_METRICS_PORT: i32 = 9150;
