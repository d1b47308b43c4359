//! The only module with `unsafe` code.
//!
//! - pgrx 0.18 has no safe way to register a string setting with a show
//!   hook, and `dptext.key` needs one so that `SHOW`, `current_setting` and
//!   `pg_settings` never display the secret, not even to superusers
//!   ([`settings`]).
//! - Embedding matrices are memory-mapped, so that every backend of the
//!   server shares one copy in the page cache.
//! - The security label provider `dptext` is a C hook ([`labels`]); it
//!   reads the labelled object's kind and column type from the catalog
//!   caches and hands them to the safe check in [`crate::rules`].
//! - Masking at the source hooks the planner, the executor's start,
//!   utility commands and the planner's statistics ([`hooks`]) and
//!   rewrites query trees ([`rewrite`]); the decisions are safe code in
//!   [`crate::masking`]. Label changes and masking decisions are ordered
//!   by locks ([`locks`]); masked sessions' DDL is read from parse trees
//!   ([`ddl`]); figures that depend on raw sizes are kept from masked
//!   sessions by object-access and log hooks ([`side_channels`]).
//! - The computed-once store is read by index and written below SQL
//!   ([`store`]), so that masked reads need no privilege on it.

use std::path::Path;
use std::sync::Arc;

use dptext_core::embeddings::SharedBytes;

use pgrx::pg_sys;

pub mod catalog;
pub mod ddl;
pub mod hooks;
pub mod interrupts;
pub mod labels;
pub mod lineage;
pub mod locks;
pub mod rewrite;
pub mod settings;
pub mod side_channels;
pub mod store;

/// True while the library is being loaded by `shared_preload_libraries`.
pub fn loading_at_server_start() -> bool {
    // SAFETY: a plain bool global that PostgreSQL sets while it processes
    // shared_preload_libraries; read here from `_PG_init` in the backend's
    // main thread, where nothing writes it concurrently.
    unsafe { pg_sys::process_shared_preload_libraries_in_progress }
}

/// Memory-maps a read-only asset file (the extension's [`dptext_core::embeddings::MapFn`]).
pub fn map_file(path: &Path) -> std::io::Result<SharedBytes> {
    let file = std::fs::File::open(path)?;
    // SAFETY: the map is read-only and private to this process. Undefined
    // behaviour would need the file's contents to change while mapped:
    // `dptext assets fetch` never writes an installed file in place, it
    // removes the asset directory and writes new files (new inodes), so a
    // mapped file keeps its contents until it is unmapped.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    Ok(Arc::new(map))
}
