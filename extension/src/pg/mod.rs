//! Thin PostgreSQL primitives, with `unsafe` (each block with a SAFETY
//! note), that the rest of the extension calls in safe code:
//!
//! - [`catalog`]: role, relation, type and index lookups, read-only SPI;
//! - [`settings`]: the secret setting `dptext.key`, registered with a show
//!   hook (pgrx 0.18 has no safe way), so that `SHOW`, `current_setting`
//!   and `pg_settings` never display it; who chose a setting;
//! - [`interrupts`]: cancellation checks and argument types (UTF-8 text,
//!   JSON parameters);
//! - [`locks`]: the locks that order label changes and masking decisions;
//! - [`lookup`]: the extension's own read-only catalog queries, under a
//!   fresh snapshot and unmasked;
//! - [`store`]: `dptext.store` read by index and written below SQL, so that
//!   masked reads need no privilege on it;
//! - [`version`]: what differs between the PostgreSQL majors it builds for;
//! - embedding matrices memory-mapped ([`map_file`]), so that every backend
//!   of the server shares one copy in the page cache.
//!
//! The enforcement of masking, which also touches PostgreSQL's structures,
//! is [`crate::enforce`].

use std::path::Path;
use std::sync::Arc;

use dptext_core::embeddings::SharedBytes;

use pgrx::pg_sys;

pub mod catalog;
pub mod interrupts;
pub mod locks;
pub mod lookup;
pub mod settings;
pub mod store;
pub mod version;

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
