//! Proxy mode's sanitizing: the rules of protected columns, run by a pool
//! of OS threads over dptext-core, so that the async runtime only moves
//! bytes while models and samplers use every core (or the GPU).
//!
//! A session hands over a batch of values (the protected fields of many
//! rows of one result); the batch is split across the workers, each runs
//! its share value by value through the core's engine (whose detection
//! model batches the lines of a value, and whose masked LM batches the
//! copies NDD scores), and the session waits for all of them. The queue
//! is bounded: when every worker is busy, sessions wait (backpressure).
//!
//! Outputs are keyed by the proxy's `key` (a key derived from it, never
//! the SCRAM salts' secret itself), so asking again returns the same text
//! and averaging repeated answers learns nothing new.

use std::sync::Arc;

use dptext_core::mechanisms::Mechanism;
use dptext_core::{Engine, EngineConfig, RandomMode};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::sync::{mpsc, oneshot};

use crate::error::{ProxyError, Result};
use crate::mode::{ColumnRule, Masking};

/// One worker's share of a batch: (rule index, value) pairs.
struct Job {
    items: Vec<(usize, String)>,
    reply: oneshot::Sender<Result<Vec<String>>>,
}

/// The built rules and the worker pool (cheap to share: `Arc`).
pub struct Sanitizer {
    rules: Vec<ColumnRule>,
    tx: mpsc::Sender<Job>,
    workers: usize,
}

impl std::fmt::Debug for Sanitizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sanitizer")
            .field("rules", &self.rules.len())
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

impl Sanitizer {
    /// Loads nothing yet (models load on first use), builds every rule's
    /// mechanism (a bad rule or missing asset fails here, at start-up, not
    /// in a session) and starts the workers.
    pub fn start(masking: &Masking, rules: Vec<ColumnRule>, key: &[u8]) -> Result<Arc<Self>> {
        let mut config = EngineConfig::new(dptext_core::assets::resolve_dir(
            masking.assets_dir.as_deref(),
        ));
        config.device = masking
            .device
            .parse()
            .map_err(|e| ProxyError::Config(format!("[masking] device: {e}")))?;
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let workers = if masking.workers == 0 {
            cores
        } else {
            masking.workers
        };
        config.model_threads = 1;
        // A missing CusText mapping would take minutes of every core.
        config.build_mappings = false;
        let engine = Arc::new(Engine::new(config));
        let mut built: Vec<Arc<dyn Mechanism>> = Vec::with_capacity(rules.len());
        for r in &rules {
            let m = engine.build(&r.spec).map_err(|e| {
                ProxyError::Config(format!(
                    "[[rule]] {}.{}.{} ({}): {e}",
                    r.schema, r.table, r.column, r.text
                ))
            })?;
            built.push(Arc::from(m));
        }
        let built = Arc::new(built);
        let mode = output_mode(key)?;
        let (tx, rx) = mpsc::channel::<Job>(workers * 4);
        let rx = Arc::new(std::sync::Mutex::new(rx));
        for i in 0..workers {
            let rx = rx.clone();
            let engine = engine.clone();
            let built = built.clone();
            let mode = mode.clone();
            std::thread::Builder::new()
                .name(format!("dptext-sanitize-{i}"))
                .spawn(move || loop {
                    let job = {
                        let mut guard = rx.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        guard.blocking_recv()
                    };
                    let Some(job) = job else { return };
                    let out = job
                        .items
                        .iter()
                        .map(|(rule, text)| {
                            let m = built.get(*rule).ok_or_else(|| {
                                ProxyError::Protocol(format!("no rule {rule}"))
                            })?;
                            Ok(engine.run(m.as_ref(), text, &mode, &[])?.text)
                        })
                        .collect::<Result<Vec<String>>>();
                    let _ = job.reply.send(out);
                })
                .map_err(|e| ProxyError::Config(format!("starting a sanitizing thread: {e}")))?;
        }
        Ok(Arc::new(Sanitizer {
            rules,
            tx,
            workers,
        }))
    }

    /// The rules, in the order their indexes refer to.
    pub fn rules(&self) -> &[ColumnRule] {
        &self.rules
    }

    /// Sanitizes `items` ((rule index, value) pairs), returning the outputs
    /// in the same order; the batch is shared among the workers.
    pub async fn run(&self, items: Vec<(usize, String)>) -> Result<Vec<String>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let per = items.len().div_ceil(self.workers).max(1);
        let mut waits = Vec::new();
        let mut items = items.into_iter().peekable();
        while items.peek().is_some() {
            let share: Vec<(usize, String)> = items.by_ref().take(per).collect();
            let (reply, wait) = oneshot::channel();
            self.tx
                .send(Job {
                    items: share,
                    reply,
                })
                .await
                .map_err(|_| ProxyError::Protocol("the sanitizing workers stopped".into()))?;
            waits.push(wait);
        }
        let mut out = Vec::new();
        for w in waits {
            out.extend(
                w.await
                    .map_err(|_| ProxyError::Protocol("a sanitizing worker failed".into()))??,
            );
        }
        Ok(out)
    }
}
