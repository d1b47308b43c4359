//! Cancel requests. Each session gets a (process id, secret key) of the
//! proxy's own in its BackendKeyData; a CancelRequest that names it is
//! sent on to the server with the upstream backend's real key, which
//! clients never see, and told to the session itself ([`Interrupts`]):
//! in proxy mode the proxy's own sanitizing of a result must stop too,
//! which no server-side cancel reaches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use crate::config;

/// The cancel requests a session was sent, counted: each one changes the
/// value ([`watch::Receiver::changed`] wakes the session's relay).
pub type Interrupts = watch::Receiver<u64>;

struct Target {
    secret: i32,
    upstream: config::Upstream,
    pid: i32,
    key: i32,
    interrupt: watch::Sender<u64>,
}

/// The sessions that can be cancelled, by the process id clients know.
/// It outlives configuration reloads, as sessions do.
#[derive(Default)]
pub struct Cancels {
    sessions: Mutex<HashMap<i32, Target>>,
}

/// A session's entry in [`Cancels`], removed when dropped.
pub struct Registration {
    cancels: Arc<Cancels>,
    /// The process id the client was given.
    pub pid: i32,
    /// The secret key the client was given.
    pub secret: i32,
    interrupts: Interrupts,
}

impl Registration {
    /// The cancel requests sent to this session from now on.
    pub fn interrupts(&self) -> Interrupts {
        let mut rx = self.interrupts.clone();
        rx.mark_unchanged();
        rx
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.cancels
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.pid);
    }
}

impl Cancels {
    /// Registers the upstream backend (`pid`, `key`) reached through
    /// `upstream`, under a fresh process id and secret for the client.
    pub fn register(
        self: &Arc<Self>,
        upstream: &config::Upstream,
        pid: i32,
        key: i32,
    ) -> Registration {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let mut client_pid;
        loop {
            // Positive, like a real process id.
            client_pid = rand::random::<i32>() & i32::MAX;
            if client_pid != 0 && !sessions.contains_key(&client_pid) {
                break;
            }
        }
        let secret = rand::random::<i32>();
        let (interrupt, interrupts) = watch::channel(0);
        sessions.insert(
            client_pid,
            Target {
                secret,
                upstream: upstream.clone(),
                pid,
                key,
                interrupt,
            },
        );
        Registration {
            cancels: self.clone(),
            pid: client_pid,
            secret,
            interrupts,
        }
    }

    /// Where a cancel request for (`pid`, `secret`) goes: the upstream and
    /// its backend's key, when both match a live session.
    pub fn lookup(&self, pid: i32, secret: i32) -> Option<(config::Upstream, i32, i32)> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let t = sessions.get(&pid)?;
        (t.secret == secret).then(|| (t.upstream.clone(), t.pid, t.key))
    }

    /// A cancel request for (`pid`, `secret`): when both match a live
    /// session, the session is told ([`Registration::interrupts`]) and
    /// where the request goes on to is returned, as [`Cancels::lookup`].
    pub fn cancel(&self, pid: i32, secret: i32) -> Option<(config::Upstream, i32, i32)> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let t = sessions.get(&pid).filter(|t| t.secret == secret)?;
        t.interrupt.send_modify(|n| *n = n.wrapping_add(1));
        Some((t.upstream.clone(), t.pid, t.key))
    }

    /// How many sessions are registered.
    pub fn len(&self) -> usize {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_the_upstream_backend_until_the_session_ends() {
        let cancels = Arc::new(Cancels::default());
        let up: config::Upstream =
            toml::from_str("host = \"/tmp\"\ndbname = \"d\"").expect("upstream");
        let reg = cancels.register(&up, 1234, 5678);
        assert!(reg.pid > 0);
        let (_, pid, key) = cancels.lookup(reg.pid, reg.secret).expect("registered");
        assert_eq!((pid, key), (1234, 5678));
        assert!(cancels.lookup(reg.pid, reg.secret ^ 1).is_none());
        assert!(cancels.lookup(1234, 5678).is_none(), "the server's own key");
        // A cancel with the right secret tells the session; one without,
        // not.
        let mut interrupts = reg.interrupts();
        assert!(cancels.cancel(reg.pid, reg.secret ^ 1).is_none());
        assert!(!interrupts.has_changed().unwrap_or(true));
        assert!(cancels.cancel(reg.pid, reg.secret).is_some());
        assert!(interrupts.has_changed().unwrap_or(false));
        interrupts.mark_unchanged();
        let other = cancels.register(&up, 1, 2);
        assert_ne!(other.pid, reg.pid);
        drop(reg);
        assert_eq!(cancels.len(), 1);
        drop(other);
        assert!(cancels.is_empty());
    }
}
