//! The operator's memory allocator: jemalloc, with one arena and freed pages returned to the
//! system after a second.
//!
//! The controller keeps tens of thousands of small allocations per thousand Memcacheds (names,
//! uids, versions, conditions). glibc's malloc adds a header to each and rounds it up to 16
//! bytes, so about a third of the resident heap was bookkeeping. jemalloc's size classes carry
//! no header: at 1,000 objects the anonymous resident memory grows by 5.8 MiB instead of
//! 7.4 MiB (docs/performance.md). One arena suits a process with a thread per core; the
//! thread caches keep the arena's lock off the webhooks' path (without them the mutating
//! webhook answered half as many requests). Only the operator binary uses it; tests and the
//! packaging tool keep the system allocator.
//!
//! The settings are compiled in (`malloc_conf`); `_RJEM_MALLOC_CONF` in the environment
//! overrides them, as jemalloc documents.

use std::ffi::c_char;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read once when it starts: one arena; dirty pages returned to the
/// system after one second, and no second (muzzy) stage before that.
const SETTINGS: &std::ffi::CStr = c"narenas:1,dirty_decay_ms:1000,muzzy_decay_ms:0";

/// A C string pointer that may live in a `static`: it points into the binary's read-only data.
#[repr(transparent)]
pub struct Settings(*const c_char);

// SAFETY: the pointer is to a string literal in read-only memory, never written.
unsafe impl Sync for Settings {}

/// The symbol jemalloc reads its compiled-in settings from (`malloc_conf`, under the prefix
/// `tikv-jemalloc-sys` gives every jemalloc symbol).
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static MALLOC_CONF: Settings = Settings(SETTINGS.as_ptr());
