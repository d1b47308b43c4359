//! Cancellation: how a long call notices that its caller gave up.
//!
//! Every loop that can run long (detection windows, masked-LM calls and
//! NDD rounds, CusText mapping builds, the per-word loops of the word
//! mechanisms, surrogate generation) calls [`check`]. It asks the hook
//! installed on the *current thread* by a [`Scope`]; with no hook it is a
//! thread-local read and nothing else, so callers without cancellation
//! (tests, the CLI) pay nothing measurable.
//!
//! Design:
//!
//! - The hook lives in a thread-local, installed for the duration of one
//!   call by [`Scope::enter`] (the [`crate::Engine`] does this around every
//!   call when it was given a hook with [`crate::Engine::with_cancel`]).
//!   Threads that core spawns for itself (CusText mapping builds, the
//!   masked LM's session pool) have no hook, so a hook is only ever run
//!   on the thread that called the engine: inside PostgreSQL that is the
//!   backend's main thread, the only one allowed to touch PostgreSQL.
//!   Multi-threaded loops check on the calling thread and tell their
//!   helpers to stop through an atomic flag.
//! - A hook says "stop" by returning `Err(Error::Cancelled)`; core then
//!   returns that error through every frame, releasing locks and joining
//!   its threads normally, and the front end reports the cancellation in
//!   its own terms (the extension lets PostgreSQL raise its own error,
//!   57014 or a terminate).
//! - A hook may also unwind (PostgreSQL's error machinery becomes a Rust
//!   panic in pgrx). Core tolerates that: its caches take their locks with
//!   poison recovery and never hold one across a check, scoped threads are
//!   told to stop by drop guards, and [`Scope`] restores the previous hook
//!   as it unwinds.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

/// A cancellation hook: `Ok(())` to go on, `Err(Error::Cancelled)` to stop.
pub type CancelCheck = Arc<dyn Fn() -> Result<()> + Send + Sync>;

thread_local! {
    static CURRENT: RefCell<Option<CancelCheck>> = const { RefCell::new(None) };
}

/// Asks the current thread's hook whether to go on; `Ok(())` when none is
/// installed.
pub fn check() -> Result<()> {
    // The hook is cloned out first, so that it runs without the
    // thread-local borrowed (a hook that unwinds or re-enters is fine).
    let hook = CURRENT.with(|c| c.borrow().clone());
    match hook {
        Some(h) => h(),
        None => Ok(()),
    }
}

/// [`check`] on every `n`-th `i` (and on `i = 0`): for tight loops.
pub fn check_every(i: usize, n: usize) -> Result<()> {
    if i % n.max(1) == 0 {
        check()
    } else {
        Ok(())
    }
}

/// True when the current thread has a hook installed.
pub fn installed() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

/// Installs a hook on the current thread until dropped (also when
/// unwinding), then restores the one that was there before.
///
/// ```
/// use dptext_core::cancel::{self, Flag, Scope};
/// let flag = Flag::new();
/// let _scope = Scope::enter(flag.hook());
/// assert!(cancel::check().is_ok());
/// flag.cancel();
/// assert!(matches!(cancel::check(), Err(dptext_core::Error::Cancelled)));
/// ```
#[must_use = "the hook is removed when the scope is dropped"]
pub struct Scope {
    previous: Option<CancelCheck>,
}

impl Scope {
    /// Installs `hook` on the current thread.
    pub fn enter(hook: CancelCheck) -> Scope {
        let previous = CURRENT.with(|c| c.borrow_mut().replace(hook));
        Scope { previous }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

/// A shared cancel flag: the simplest hook, for front ends that cancel
/// from another thread or task (the proxy when a session ends, a CLI on
/// Ctrl-C).
#[derive(Debug, Clone, Default)]
pub struct Flag(Arc<AtomicBool>);

impl Flag {
    /// A flag that is not set.
    pub fn new() -> Self {
        Flag::default()
    }

    /// Sets the flag: calls checking it stop at their next check.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// True once [`Flag::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// A hook that stops a call once the flag is set.
    pub fn hook(&self) -> CancelCheck {
        let flag = self.0.clone();
        Arc::new(move || {
            if flag.load(Ordering::Relaxed) {
                Err(Error::Cancelled)
            } else {
                Ok(())
            }
        })
    }
}

/// Sets `flag` when dropped while unwinding, so that helper threads of a
/// scoped loop stop when the calling thread's hook unwinds.
pub(crate) struct StopOnUnwind<'a>(pub(crate) &'a AtomicBool);

impl Drop for StopOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest_and_restore() {
        assert!(!installed());
        let outer = Flag::new();
        let inner = Flag::new();
        inner.cancel();
        {
            let _a = Scope::enter(outer.hook());
            assert!(check().is_ok());
            {
                let _b = Scope::enter(inner.hook());
                assert!(matches!(check(), Err(Error::Cancelled)));
            }
            assert!(check().is_ok());
        }
        assert!(!installed());
    }

    #[test]
    fn a_hook_is_restored_when_unwinding() {
        let r = std::panic::catch_unwind(|| {
            let _s = Scope::enter(Arc::new(|| panic!("like a PostgreSQL error")));
            let _ = check();
        });
        assert!(r.is_err());
        assert!(!installed());
        assert!(check().is_ok());
    }

    #[test]
    fn other_threads_do_not_see_the_hook() {
        let f = Flag::new();
        f.cancel();
        let _s = Scope::enter(f.hook());
        assert!(check().is_err());
        assert!(std::thread::scope(|s| s
            .spawn(|| check().is_ok())
            .join()
            .unwrap()));
    }
}
