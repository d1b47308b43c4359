//! The sanitization worker pool: OS threads sized to the cores, fed by a
//! bounded channel (a full queue makes sessions wait: backpressure), so
//! the async runtime only moves bytes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use dptext_core::mechanisms::{Mechanism, MechanismSpec};
use dptext_core::{Engine, RandomMode};
use tokio::sync::{mpsc, oneshot};

use crate::error::{ProxyError, Result};
use crate::values;

/// What to do with one column of a result.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Relay unchanged.
    Pass,
    /// Sanitize with `specs[spec]`, decoding the value as `type_oid` in `format`.
    Sanitize {
        /// Index into the plan's specs.
        spec: usize,
        /// Type of the column.
        type_oid: u32,
        /// 0 text, 1 binary.
        format: i16,
    },
}

/// The actions for every column of a result, and the mechanisms they use.
#[derive(Debug, Clone)]
pub struct RowPlan {
    /// One per column.
    pub actions: Vec<Action>,
    /// Mechanisms referenced by the actions.
    pub specs: Arc<Vec<MechanismSpec>>,
}

impl RowPlan {
    /// True when no column needs work.
    pub fn passes(&self) -> bool {
        self.actions.iter().all(|a| *a == Action::Pass)
    }
}

enum Job {
    Row {
        body: Vec<u8>,
        plan: Arc<RowPlan>,
        reply: oneshot::Sender<Result<Vec<u8>>>,
    },
    Text {
        text: String,
        spec: MechanismSpec,
        reply: oneshot::Sender<Result<String>>,
    },
}

/// A row being rewritten.
pub struct Pending(oneshot::Receiver<Result<Vec<u8>>>);

impl Pending {
    /// The rewritten row.
    pub async fn wait(self) -> Result<Vec<u8>> {
        self.0
            .await
            .map_err(|_| ProxyError::Protocol("a worker failed".into()))?
    }
}

/// A handle to the pool (cheap to clone).
#[derive(Clone)]
pub struct Pool {
    tx: mpsc::Sender<Job>,
}

struct Worker {
    engine: Arc<Engine>,
    mode: RandomMode,
    built: HashMap<String, Box<dyn Mechanism>>,
}

impl Worker {
    fn sanitize(&mut self, spec: &MechanismSpec, text: &str) -> Result<String> {
        let key = format!("{spec:?}");
        if !self.built.contains_key(&key) {
            let m = self.engine.build(spec)?;
            self.built.insert(key.clone(), m);
        }
        let m = self
            .built
            .get(&key)
            .ok_or_else(|| ProxyError::Protocol("mechanism cache".into()))?;
        Ok(self.engine.run(m.as_ref(), text, &self.mode, &[])?.text)
    }

    fn row(&mut self, body: &[u8], plan: &RowPlan) -> Result<Vec<u8>> {
        let fields = crate::wire::parse_data_row(body)?;
        if fields.len() != plan.actions.len() {
            return Err(ProxyError::Protocol(format!(
                "row of {} fields for a description of {}",
                fields.len(),
                plan.actions.len()
            )));
        }
        let mut out = Vec::with_capacity(fields.len());
        for (field, action) in fields.into_iter().zip(&plan.actions) {
            out.push(match (field, action) {
                (None, _) => None,
                (Some(v), Action::Pass) => Some(v.to_vec()),
                (
                    Some(v),
                    Action::Sanitize {
                        spec,
                        type_oid,
                        format,
                    },
                ) => {
                    let spec = plan
                        .specs
                        .get(*spec)
                        .ok_or_else(|| ProxyError::Protocol("plan without its mechanism".into()))?
                        .clone();
                    let mut f = |s: &str| self.sanitize(&spec, s);
                    Some(values::sanitize_value(*type_oid, *format, v, &mut f)?)
                }
            });
        }
        Ok(crate::wire::data_row(&out))
    }
}

impl Pool {
    /// Starts `workers` threads over `engine`, drawing randomness as `mode`.
    pub fn new(engine: Arc<Engine>, mode: RandomMode, workers: usize) -> Self {
        let workers = workers.max(1);
        let (tx, rx) = mpsc::channel::<Job>(workers * 64);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..workers {
            let rx = rx.clone();
            let mut w = Worker {
                engine: engine.clone(),
                mode: mode.clone(),
                built: HashMap::new(),
            };
            let spawned = std::thread::Builder::new()
                .name(format!("dptext-worker-{i}"))
                .spawn(move || loop {
                    let job = {
                        let mut rx = rx.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        rx.blocking_recv()
                    };
                    match job {
                        None => break,
                        Some(Job::Row { body, plan, reply }) => {
                            let _ = reply.send(w.row(&body, &plan));
                        }
                        Some(Job::Text { text, spec, reply }) => {
                            let _ = reply.send(w.sanitize(&spec, &text));
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start a sanitization worker");
            }
        }
        Pool { tx }
    }

    /// Queues one DataRow body for rewriting by `plan` (waits while the
    /// queue is full); the answer arrives on the returned receiver.
    pub async fn submit(&self, body: Vec<u8>, plan: Arc<RowPlan>) -> Result<Pending> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job::Row { body, plan, reply })
            .await
            .map_err(|_| ProxyError::Protocol("the worker pool stopped".into()))?;
        Ok(Pending(rx))
    }

    /// Rewrites one DataRow body by `plan`.
    pub async fn row(&self, body: Vec<u8>, plan: Arc<RowPlan>) -> Result<Vec<u8>> {
        self.submit(body, plan).await?.wait().await
    }

    /// Sanitizes one text with `spec`.
    pub async fn text(&self, text: String, spec: MechanismSpec) -> Result<String> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job::Text { text, spec, reply })
            .await
            .map_err(|_| ProxyError::Protocol("the worker pool stopped".into()))?;
        rx.await
            .map_err(|_| ProxyError::Protocol("a worker failed".into()))?
    }
}
