//! Progress bars on stderr (`indicatif`), drawn only when stderr is a
//! terminal: piped or redirected runs get the one-line summaries alone.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar over `total` bytes (input size known) or a counter of bytes read
/// (`None`: standard input), with rate and ETA.
pub fn bytes(total: Option<u64>, what: &str) -> ProgressBar {
    let bar = new(total);
    let template = if total.is_some() {
        "{msg} [{bar:30}] {bytes}/{total_bytes} ({percent}%) {binary_bytes_per_sec}, eta {eta}"
    } else {
        "{spinner} {msg} {bytes} read, {binary_bytes_per_sec}, {elapsed}"
    };
    style(&bar, template);
    bar.set_message(what.to_string());
    bar
}

/// A counter of items of unknown total (`what` read so far), with rate.
pub fn count(what: &str, unit: &str) -> ProgressBar {
    let bar = new(None);
    style(
        &bar,
        &format!("{{spinner}} {{msg}} {{pos}} {unit}, {{per_sec}}, {{elapsed}}"),
    );
    bar.set_message(what.to_string());
    bar
}

/// A bar over `total` items with rate and ETA.
pub fn items(total: u64, what: &str) -> ProgressBar {
    let bar = new(Some(total));
    style(
        &bar,
        "{msg} [{bar:30}] {pos}/{len} ({percent}%) {per_sec}, eta {eta}",
    );
    bar.set_message(what.to_string());
    bar
}

fn new(total: Option<u64>) -> ProgressBar {
    let bar = match total {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::no_length(),
    };
    bar.set_draw_target(if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    bar
}

fn style(bar: &ProgressBar, template: &str) {
    // The templates are constants; a bad one falls back to the default look.
    if let Ok(s) = ProgressStyle::with_template(template) {
        bar.set_style(s.progress_chars("=> "));
    }
}

/// The long builds an engine runs for a command (a CusText mapping missing
/// from the disk cache: a minute of every core): a bar with the true
/// elapsed time from its first report, and one line on stderr when it
/// ends, terminal or not (`built ... in 56.3s`).
#[derive(Clone, Default)]
pub struct Builds {
    current: std::sync::Arc<std::sync::Mutex<Option<Build>>>,
}

struct Build {
    bar: ProgressBar,
    started: std::time::Instant,
    total: usize,
}

impl Builds {
    /// The callback to give [`dptext_core::Engine::with_build_progress`].
    pub fn hook(&self, what: &str) -> dptext_core::engine::BuildProgress {
        let current = self.current.clone();
        let what = what.to_string();
        std::sync::Arc::new(move |done: usize, total: usize| {
            let mut slot = current
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let b = slot.get_or_insert_with(|| {
                let bar = new(Some(total as u64));
                style(
                    &bar,
                    "{msg} [{bar:30}] {pos}/{len} words ({percent}%), {elapsed} elapsed, eta {eta}",
                );
                bar.set_message(what.clone());
                Build {
                    bar,
                    started: std::time::Instant::now(),
                    total,
                }
            });
            b.bar.set_position(done as u64);
            if done >= total {
                b.bar.finish_and_clear();
                eprintln!(
                    "{what}: {} words in {:.1}s",
                    b.total,
                    b.started.elapsed().as_secs_f64()
                );
                *slot = None;
            }
        })
    }
}
