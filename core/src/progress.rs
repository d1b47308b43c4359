//! Progress of long builds (a CusText mapping), reported to the caller.
//!
//! A build takes a [`Progress`] callback, `f(done, total)`, and calls it
//! through a [`Reporter`], which keeps the calls cheap and well-behaved for
//! any front end:
//!
//! - only from the thread that started the build (helper threads count
//!   their work in an atomic that this thread reads), so a callback never
//!   runs concurrently with itself;
//! - at a bounded rate (at most once per [`Reporter::INTERVAL`], plus the
//!   first and last calls), so a callback may draw on a terminal;
//! - with `done` strictly increasing, never above `total`, and a last call
//!   with `done == total` when the build succeeds.
//!
//! Front ends that show nothing (the extension, the proxy) pass
//! [`NO_PROGRESS`].

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A progress callback: `f(done, total)`, in units the build documents.
pub type Progress<'a> = &'a (dyn Fn(usize, usize) + Sync);

/// The callback that shows nothing.
pub const NO_PROGRESS: Progress<'static> = &|_, _| {};

/// Calls a [`Progress`] at a bounded rate with monotone values.
pub struct Reporter<'a> {
    f: Progress<'a>,
    total: usize,
    started: Instant,
    /// Milliseconds after `started` of the last call; `u64::MAX` before
    /// the first.
    last_ms: AtomicU64,
    /// `done` of the last call, `usize::MAX` before the first.
    last_done: AtomicUsize,
}

impl<'a> Reporter<'a> {
    /// The least time between two calls (but the first and the last).
    pub const INTERVAL: Duration = Duration::from_millis(100);

    /// A reporter of `total` units, which tells `f` `(0, total)` at once.
    pub fn new(f: Progress<'a>, total: usize) -> Self {
        let r = Reporter {
            f,
            total,
            started: Instant::now(),
            last_ms: AtomicU64::new(u64::MAX),
            last_done: AtomicUsize::new(usize::MAX),
        };
        r.report(0);
        r
    }

    /// Reports `done` units (capped at the total) if it is more than was
    /// last reported and the interval has passed, or if it is the total.
    pub fn report(&self, done: usize) {
        let done = done.min(self.total);
        let last_done = self.last_done.load(Ordering::Relaxed);
        if last_done != usize::MAX && done <= last_done {
            return;
        }
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        let last_ms = self.last_ms.load(Ordering::Relaxed);
        let interval = Self::INTERVAL.as_millis() as u64;
        if last_ms != u64::MAX && done < self.total && now < last_ms.saturating_add(interval) {
            return;
        }
        self.last_done.store(done, Ordering::Relaxed);
        self.last_ms.store(now, Ordering::Relaxed);
        (self.f)(done, self.total);
    }

    /// Reports the total (the build is done).
    pub fn finish(&self) {
        self.report(self.total);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn calls_are_monotone_rate_bounded_and_end_at_the_total() {
        let calls = Mutex::new(Vec::new());
        let f = |d, t| calls.lock().unwrap_or_else(|p| p.into_inner()).push((d, t));
        let r = Reporter::new(&f, 1000);
        for d in [5, 3, 10, 2000] {
            r.report(d);
        }
        r.finish();
        r.report(7);
        // (0) first, then nothing inside the interval but the total, once.
        assert_eq!(*calls.lock().unwrap(), vec![(0, 1000), (1000, 1000)]);
    }

    #[test]
    fn reports_after_the_interval() {
        let calls = Mutex::new(Vec::new());
        let f = |d, t| calls.lock().unwrap_or_else(|p| p.into_inner()).push((d, t));
        let r = Reporter::new(&f, 10);
        std::thread::sleep(Reporter::INTERVAL + Duration::from_millis(10));
        r.report(4);
        r.report(5);
        assert_eq!(*calls.lock().unwrap(), vec![(0, 10), (4, 10)]);
    }
}
