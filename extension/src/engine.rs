//! This backend's one engine of the core ([`dptext_core::Engine`]),
//! rebuilt when a setting it depends on changes (so vocabularies and
//! models load once and stay cached), and the one warning a backend gives
//! when a model asked to run on a GPU runs on the CPU.

use std::cell::RefCell;
use std::sync::Arc;

use dptext_core::Engine;

use crate::{guc, pg, recognizers};

thread_local! {
    /// One engine per backend; rebuilt when a setting it depends on changes,
    /// so vocabularies load once and stay cached.
    static ENGINE: RefCell<Option<Arc<Engine>>> = const { RefCell::new(None) };
}

/// The engine of this backend, built for the current settings, with the
/// user's recognizers ([`crate::recognizers`]) up to date.
pub(crate) fn engine() -> Arc<Engine> {
    let config = guc::engine_config();
    let engine = ENGINE.with(|slot| {
        let mut slot = slot.borrow_mut();
        match slot.as_ref() {
            Some(e) if *e.config() == config => e.clone(),
            _ => {
                // Every long loop of every call asks PostgreSQL's interrupt
                // flags, so cancel, statement_timeout and terminate work.
                let e = Arc::new(
                    Engine::with_map(config, pg::map_file)
                        .with_cancel(Arc::new(pg::interrupts::check)),
                );
                *slot = Some(e.clone());
                e
            }
        }
    });
    recognizers::refresh(&engine);
    engine
}

/// One WARNING per backend when a model asked to run on `dptext.device`
/// (the detection model, the masked LM) runs on the CPU instead; with
/// `reason` when the caller knows it. In a masked session it goes to the
/// server log only: a masked read runs a model only for a value the store
/// does not hold, so the warning's arrival would tell whether a row's
/// value was computed before.
pub(crate) fn warn_fallback(reason: Option<&str>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static WARNED: AtomicBool = AtomicBool::new(false);
    if dptext_core::runtime::fallback_count() > 0 && !WARNED.swap(true, Ordering::Relaxed) {
        let reason = reason.unwrap_or(
            "a build without the cuda feature, a library without the CUDA provider, or no GPU",
        );
        if crate::session::session_is_masked_cached() == Some(false) {
            pgrx::warning!(
                "dptext.device = 'cuda' is not available ({reason}); running on the CPU"
            );
        } else {
            // LOG: the server log takes it; the log hook keeps it from a
            // masked client whatever its client_min_messages.
            pgrx::log!("dptext.device = 'cuda' is not available ({reason}); running on the CPU");
        }
    }
}
