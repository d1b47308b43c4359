//! Proxy mode's sanitizing: the rules of protected columns, run by a pool
//! of OS threads over dptext-core, so that the async runtime only moves
//! bytes while models and samplers use every core (or the GPU).
//!
//! A session hands over a batch of values (the protected fields of many
//! rows of one result); the batch is split across the workers, each runs
//! its share through its own engine, the values of one rule together
//! (whose detection model reads the windows and lines of those values in
//! shared calls, and whose masked LM batches the copies NDD scores), and
//! the session waits for all of them. Each worker owns
//! an engine and builds its own mechanisms, so model sessions are never
//! shared between workers (one shared detection session serialized them:
//! two workers ran no faster than one). Vectors are memory-mapped, so the
//! engines share those pages. The queue is bounded: when every worker is
//! busy, sessions wait (backpressure).
//!
//! Outputs are keyed by the proxy's `key` (a key derived from it, never
//! the SCRAM salts' secret itself), so asking again returns the same text
//! and averaging repeated answers learns nothing new.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use dptext_core::detect::custom::Custom;
use dptext_core::mechanisms::MechanismSpec;
use dptext_core::{Engine, EngineConfig, RandomMode};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::sync::{mpsc, oneshot};

use crate::error::{ProxyError, Result};
use crate::mode::{ColumnRule, Masking};

/// One worker's share of a batch: (rule label, value) pairs.
struct Job {
    items: Vec<(Arc<str>, String)>,
    reply: oneshot::Sender<Result<Vec<String>>>,
}

/// The rules by label (the canonical `MASKED WITH ...` text), each checked
/// by building it once.
type Specs = Arc<RwLock<HashMap<Arc<str>, MechanismSpec>>>;

/// The engine, the built rules and the worker pool (shared by every
/// session: `Arc`).
pub struct Sanitizer {
    /// Builds each rule once to check it (and loads what it needs).
    checker: Engine,
    specs: Specs,
    /// The queue's sending end; `None` once dropped (which stops the
    /// workers).
    tx: Option<mpsc::Sender<Job>>,
    /// The workers, joined when the sanitizer is dropped.
    handles: Vec<std::thread::JoinHandle<()>>,
    workers: usize,
}

impl Drop for Sanitizer {
    /// Closes the queue and waits for every worker to drop its engine.
    /// Without the wait, a process that returns from `main` right after
    /// (the proxy at shutdown) runs ONNX Runtime's and CUDA's exit-time
    /// teardown while workers are still destroying their CUDA sessions,
    /// which crashed the process on a GPU machine. The last `Arc` is only
    /// dropped when no session can send a job, so the workers are idle or
    /// finishing the share of a session that was cancelled (the wait is at
    /// most that share: a configuration reload's old pool, or shutdown).
    fn drop(&mut self) {
        drop(self.tx.take());
        for h in self.handles.drain(..) {
            // A worker that panicked has nothing left to tear down.
            let _ = h.join();
        }
    }
}

impl std::fmt::Debug for Sanitizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sanitizer")
            .field("workers", &self.workers)
            .finish()
    }
}

/// The keyed mode of proxy-mode outputs: HMAC-SHA-256 of the proxy's key
/// under a fixed label, so that the SCRAM salts (also derived from the
/// key) and the outputs never share key material.
fn output_mode(key: &[u8]) -> Result<RandomMode> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
        .map_err(|e| ProxyError::Config(format!("key: {e}")))?;
    mac.update(b"dptext-proxy masking outputs");
    let derived = mac.finalize().into_bytes().to_vec();
    Ok(RandomMode::Keyed(dptext_core::rng::Secret::new(derived)))
}

/// The engine settings of proxy mode's workers (and of the rule checks):
/// the `[engine]` table, core's defaults where it says nothing (one model
/// thread per worker; no CusText mapping built, which would take minutes
/// of every core).
fn engine_config(masking: &Masking) -> EngineConfig {
    masking.engine.clone()
}

/// `[masking] recognizers`, read and checked once (`None`: not set).
fn recognizers(masking: &Masking) -> Result<Option<Arc<Custom>>> {
    let Some(path) = &masking.recognizers else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        ProxyError::Config(format!(
            "[masking] recognizers: reading {}: {e}",
            path.display()
        ))
    })?;
    let custom = Custom::from_json(&text).map_err(|e| {
        ProxyError::Config(format!("[masking] recognizers in {}: {e}", path.display()))
    })?;
    Ok(Some(Arc::new(custom)))
}

/// An engine with the configuration's settings and recognizers.
fn engine(config: &EngineConfig, custom: Option<&Arc<Custom>>) -> Engine {
    let engine = Engine::new(config.clone());
    if let Some(c) = custom {
        engine.set_recognizers(c.clone());
    }
    engine
}

/// A worker's share of a batch: the values of each rule run together
/// ([`Engine::run_many`], so that detection shares its model calls among
/// them), the outputs in the order of `items`; any failure fails the
/// share, as one value's did when they ran one by one.
fn run_job(
    engine: &Engine,
    specs: &Specs,
    mode: &RandomMode,
    items: &[(Arc<str>, String)],
) -> Result<Vec<String>> {
    let mut out: Vec<Option<Result<String>>> = items.iter().map(|_| None).collect();
    let mut labels: Vec<&Arc<str>> = items.iter().map(|(label, _)| label).collect();
    labels.sort();
    labels.dedup();
    for label in labels {
        let spec = specs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(label)
            .cloned()
            .ok_or_else(|| ProxyError::Internal(format!("rule {label} was not prepared")))?;
        // Built once per worker engine and kept there (Engine::mechanism).
        let m = engine.mechanism(&spec)?;
        let (at, texts): (Vec<usize>, Vec<&str>) = items
            .iter()
            .enumerate()
            .filter(|(_, (l, _))| l == label)
            .map(|(i, (_, text))| (i, text.as_str()))
            .unzip();
        for (i, r) in at
            .into_iter()
            .zip(engine.run_many(m.as_ref(), &texts, mode, &[]))
        {
            out[i] = Some(r.map(|s| s.text).map_err(ProxyError::from));
        }
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(ProxyError::Internal("a value was not sanitized".into()))))
        .collect()
}

/// Runs a worker's share, turning a panic (a bug in a mechanism or a
/// model library, reachable by content) into an error of that share: the
/// session fails closed as for any sanitizer error, and the worker stays
/// in the pool instead of dying with its thread (after enough such values
/// no worker would be left).
fn guarded(share: impl FnOnce() -> Result<Vec<String>>) -> Result<Vec<String>> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(share)).unwrap_or_else(|_| {
        tracing::error!("a sanitizing worker panicked; the value's session ends");
        Err(ProxyError::Internal("a sanitizing worker failed".into()))
    })
}

/// A rule that cannot be built, named as the configuration names it.
fn rule_error(r: &ColumnRule, e: &ProxyError) -> ProxyError {
    ProxyError::Config(format!(
        "[[rule]] {}.{}.{} ({}): {e}",
        r.schema, r.table, r.column, r.text
    ))
}

impl Sanitizer {
    /// Starts the workers (models load on first use) and builds the
    /// configuration's rules, so that a bad rule or a missing asset fails
    /// at start-up rather than in a session.
    pub fn start(masking: &Masking, rules: &[ColumnRule], key: &[u8]) -> Result<Arc<Self>> {
        let config = engine_config(masking);
        let custom = recognizers(masking)?;
        let workers = if masking.workers == 0 {
            std::thread::available_parallelism().map_or(1, usize::from)
        } else {
            masking.workers
        };
        let specs: Specs = Arc::default();
        let mode = output_mode(key)?;
        let (tx, rx) = mpsc::channel::<Job>(workers * 4);
        let rx = Arc::new(std::sync::Mutex::new(rx));
        let mut handles = Vec::with_capacity(workers);
        for i in 0..workers {
            let rx = rx.clone();
            let engine = engine(&config, custom.as_ref());
            let specs = specs.clone();
            let mode = mode.clone();
            let handle = std::thread::Builder::new()
                .name(format!("dptext-sanitize-{i}"))
                .spawn(move || loop {
                    let job = {
                        let mut guard = rx.lock().unwrap_or_else(PoisonError::into_inner);
                        guard.blocking_recv()
                    };
                    let Some(job) = job else { return };
                    // A share of a batch its session no longer waits for
                    // (a cancel request dropped it): skipped.
                    if job.reply.is_closed() {
                        continue;
                    }
                    let out = guarded(|| run_job(&engine, &specs, &mode, &job.items));
                    let _ = job.reply.send(out);
                })
                .map_err(|e| ProxyError::Config(format!("starting a sanitizing thread: {e}")))?;
            handles.push(handle);
        }
        let s = Arc::new(Sanitizer {
            checker: engine(&config, custom.as_ref()),
            specs,
            tx: Some(tx),
            handles,
            workers,
        });
        for r in rules {
            s.prepare(&r.label(), &r.spec)
                .map_err(|e| rule_error(r, &e))?;
        }
        Ok(s)
    }

    /// What `dptext-proxy check` does: builds every rule once, as
    /// [`Sanitizer::start`] would, without starting any worker.
    pub fn check(masking: &Masking, rules: &[ColumnRule]) -> Result<()> {
        let engine = engine(&engine_config(masking), recognizers(masking)?.as_ref());
        for r in rules {
            engine
                .build(&r.spec)
                .map_err(|e| rule_error(r, &e.into()))?;
        }
        Ok(())
    }

    /// Checks rule `label` by building it once (loads vectors or models:
    /// call it off the async runtime's threads), unless checked already;
    /// the workers then build it for themselves on first use.
    pub fn prepare(&self, label: &str, spec: &MechanismSpec) -> Result<()> {
        if self
            .specs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(label)
        {
            return Ok(());
        }
        self.checker.build(spec)?;
        self.specs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(Arc::from(label), spec.clone());
        Ok(())
    }

    /// Sanitizes `items` ((rule label, value) pairs, every rule prepared),
    /// returning the outputs in the same order; the batch is shared among
    /// the workers.
    pub async fn run(&self, items: Vec<(Arc<str>, String)>) -> Result<Vec<String>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let per = items.len().div_ceil(self.workers).max(1);
        let tx = self
            .tx
            .as_ref()
            .ok_or_else(|| ProxyError::Internal("the sanitizing workers stopped".into()))?;
        let mut waits = Vec::new();
        let mut items = items.into_iter().peekable();
        while items.peek().is_some() {
            let share: Vec<(Arc<str>, String)> = items.by_ref().take(per).collect();
            let (reply, wait) = oneshot::channel();
            tx.send(Job {
                items: share,
                reply,
            })
            .await
            .map_err(|_| ProxyError::Internal("the sanitizing workers stopped".into()))?;
            waits.push(wait);
        }
        let mut out = Vec::new();
        for w in waits {
            out.extend(
                w.await
                    .map_err(|_| ProxyError::Internal("a sanitizing worker failed".into()))??,
            );
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_share_is_an_error_and_a_normal_one_passes_through() {
        let e = guarded(|| panic!("boom")).unwrap_err().to_string();
        assert!(e.contains("a sanitizing worker failed"), "{e}");
        assert_eq!(
            guarded(|| Ok(vec!["x".into()])).unwrap(),
            vec!["x".to_string()]
        );
    }

    #[test]
    fn a_recognizers_file_that_cannot_be_used_stops_the_check() {
        let dir = std::env::temp_dir().join(format!("dptext-rec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = Masking {
            recognizers: Some(dir.join("missing.json")),
            ..Masking::default()
        };
        let e = Sanitizer::check(&missing, &[]).unwrap_err().to_string();
        assert!(e.contains("[masking] recognizers: reading"), "{e}");
        let bad = dir.join("bad.json");
        std::fs::write(
            &bad,
            r#"{"recognizers": [{"name": "x", "label": "NOPE", "words": ["a"]}]}"#,
        )
        .unwrap();
        let invalid = Masking {
            recognizers: Some(bad),
            ..Masking::default()
        };
        let e = Sanitizer::check(&invalid, &[]).unwrap_err().to_string();
        assert!(e.contains("[masking] recognizers in"), "{e}");
        let good = dir.join("good.json");
        std::fs::write(
            &good,
            r#"{"recognizers": [{"name": "x", "label": "ID", "words": ["a"]}]}"#,
        )
        .unwrap();
        let fine = Masking {
            recognizers: Some(good),
            ..Masking::default()
        };
        Sanitizer::check(&fine, &[]).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
