//! Admission: which connections the proxy serves at once.
//!
//! A connection first holds a *pending* slot (`limits.max_pending`) while
//! it negotiates TLS, starts up and authenticates, all before one deadline
//! (`limits.startup_timeout_secs`) that nothing the client sends extends.
//! Only an authenticated client takes a *session* slot
//! (`limits.max_sessions`), so connections that never authenticate cannot
//! lock real users out: when every pending slot is taken, a new connection
//! closes the one that has waited longest. Both limits follow reloads.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::config::Limits;
use crate::error::{ProxyError, Result};

/// The slots of a serving proxy; it outlives reloads.
pub struct Admission {
    max_sessions: AtomicUsize,
    max_pending: AtomicUsize,
    sessions: AtomicUsize,
    pending: Mutex<Pending>,
}

/// Connections still starting up, oldest first, each with the means to
/// close it.
#[derive(Default)]
struct Pending {
    next: u64,
    queue: VecDeque<(u64, oneshot::Sender<()>)>,
}

impl Admission {
    /// Slots as `limits` says.
    pub fn new(limits: &Limits) -> Arc<Self> {
        let a = Admission {
            max_sessions: AtomicUsize::new(0),
            max_pending: AtomicUsize::new(0),
            sessions: AtomicUsize::new(0),
            pending: Mutex::default(),
        };
        a.set_limits(limits);
        Arc::new(a)
    }

    /// Applies reloaded limits. Sessions above a lowered `max_sessions` go
    /// on; new ones wait for the count to fall below it.
    pub fn set_limits(&self, limits: &Limits) {
        self.max_sessions
            .store(limits.max_sessions, Ordering::Relaxed);
        self.max_pending
            .store(limits.max_pending, Ordering::Relaxed);
    }

    /// A pending slot for a new connection, which must authenticate within
    /// `startup`. When all are taken, the connections that have waited
    /// longest are told to close.
    pub fn pending(self: &Arc<Self>, startup: Duration) -> PendingSlot {
        let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let max = self.max_pending.load(Ordering::Relaxed).max(1);
        while p.queue.len() >= max {
            if let Some((_, close)) = p.queue.pop_front() {
                // The connection may have ended already.
                let _ = close.send(());
            }
        }
        let id = p.next;
        p.next += 1;
        let (close, closed) = oneshot::channel();
        p.queue.push_back((id, close));
        PendingSlot {
            admission: self.clone(),
            id,
            closed: Some(closed),
            deadline: Instant::now() + startup,
            startup_secs: startup.as_secs(),
        }
    }

    /// Connections starting up now.
    pub fn pending_len(&self) -> usize {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .queue
            .len()
    }

    /// Authenticated sessions now.
    pub fn sessions(&self) -> usize {
        self.sessions.load(Ordering::Relaxed)
    }
}

/// A connection's place while it starts up; freed when dropped or turned
/// into a session slot ([`PendingSlot::admit`]).
pub struct PendingSlot {
    admission: Arc<Admission>,
    id: u64,
    /// Fires when a newer connection takes this slot; `None` once it has.
    closed: Option<oneshot::Receiver<()>>,
    deadline: Instant,
    startup_secs: u64,
}

impl PendingSlot {
    /// `step`, unless the start-up deadline passes or a newer connection
    /// needs this slot first: then a [`ProxyError::Limit`] naming the limit.
    pub async fn run<T>(&mut self, step: impl Future<Output = Result<T>>) -> Result<T> {
        let max_pending = self.admission.max_pending.load(Ordering::Relaxed);
        let Some(closed) = self.closed.as_mut() else {
            return Err(ProxyError::too_many_pending(max_pending));
        };
        let r = tokio::select! {
            r = step => return r,
            _ = tokio::time::sleep_until(self.deadline) => {
                return Err(ProxyError::startup_timeout(self.startup_secs));
            }
            _ = closed => Err(ProxyError::too_many_pending(max_pending)),
        };
        self.closed = None;
        r
    }

    /// The session slot of the now authenticated client, freeing this one;
    /// [`ProxyError::too_many_sessions`] when `max_sessions` are in use.
    pub fn admit(self) -> Result<SessionSlot> {
        let a = &self.admission;
        let max = a.max_sessions.load(Ordering::Relaxed);
        a.sessions
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .map_err(|_| ProxyError::too_many_sessions(max))?;
        Ok(SessionSlot {
            admission: a.clone(),
        })
    }
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        let mut p = self
            .admission
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = p.queue.iter().position(|(id, _)| *id == self.id) {
            p.queue.remove(i);
        }
    }
}

/// An authenticated session's slot, freed when dropped.
pub struct SessionSlot {
    admission: Arc<Admission>,
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.admission.sessions.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_sessions: usize, max_pending: usize) -> Limits {
        Limits {
            max_sessions,
            max_pending,
            ..Limits::default()
        }
    }

    #[tokio::test]
    async fn a_full_pending_queue_closes_its_oldest_connection() {
        let a = Admission::new(&limits(1, 2));
        let long = Duration::from_secs(60);
        let mut oldest = a.pending(long);
        let _second = a.pending(long);
        let _third = a.pending(long);
        assert_eq!(a.pending_len(), 2);
        let e = oldest
            .run(std::future::pending::<Result<()>>())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("limits.max_pending = 2"), "{e}");
        assert_eq!(e.sqlstate(), "53300");
        drop(oldest);
        assert_eq!(a.pending_len(), 2, "the evicted slot was already gone");
    }

    #[tokio::test]
    async fn the_deadline_is_one_for_every_step() {
        let a = Admission::new(&limits(1, 4));
        let mut slot = a.pending(Duration::from_millis(300));
        let step = || tokio::time::sleep(Duration::from_millis(200));
        slot.run(async {
            step().await;
            Ok(())
        })
        .await
        .expect("first step in time");
        let e = slot
            .run(async {
                step().await;
                Ok(())
            })
            .await
            .unwrap_err();
        assert_eq!(e.sqlstate(), "57014");
        assert!(e.to_string().contains("limits.startup_timeout_secs"), "{e}");
    }

    #[test]
    fn session_slots_follow_reloads_and_free_on_drop() {
        let a = Admission::new(&limits(1, 4));
        let long = Duration::from_secs(60);
        let first = a.pending(long).admit().expect("a slot");
        let e = match a.pending(long).admit() {
            Ok(_) => panic!("a second session over max_sessions = 1"),
            Err(e) => e,
        };
        assert!(e.to_string().contains("limits.max_sessions = 1"), "{e}");
        assert_eq!(
            a.pending_len(),
            0,
            "a refused client frees its pending slot"
        );
        a.set_limits(&limits(2, 4));
        let second = a.pending(long).admit().expect("raised by a reload");
        assert_eq!(a.sessions(), 2);
        drop((first, second));
        assert_eq!(a.sessions(), 0);
    }
}
