//! The sanitization worker pool: OS threads sized to the cores, fed by a
//! bounded channel (a full queue makes sessions wait: backpressure), so
//! the async runtime only moves bytes.

use std::collections::{HashMap, HashSet};
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
        /// The rule's column (table OID, attribute number): keyed outputs
        /// for it are a function of (key, column, value). `None` (text
        /// computed in the query): fresh randomness every time, so that a
        /// literal cannot be compared with a protected value's output.
        rule: Option<(u32, i16)>,
    },
}

/// The mechanisms of a session, and the names that JSON keys may keep.
#[derive(Debug)]
pub struct Mechanisms {
    /// Mechanisms referenced by actions.
    pub specs: Vec<MechanismSpec>,
    /// A stable cache key of each spec.
    pub keys: Vec<String>,
    /// Column names in the catalog: JSON object keys equal to one are kept.
    pub column_names: HashSet<String>,
}

impl Mechanisms {
    /// The mechanisms `specs`, keeping JSON keys in `column_names`.
    pub fn new(specs: Vec<MechanismSpec>, column_names: HashSet<String>) -> Self {
        let keys = specs.iter().map(|s| format!("{s:?}")).collect();
        Mechanisms {
            specs,
            keys,
            column_names,
        }
    }
}

/// The actions for every column of a result, and the mechanisms they use.
#[derive(Debug, Clone)]
pub struct RowPlan {
    /// One per column.
    pub actions: Vec<Action>,
    /// Mechanisms referenced by the actions.
    pub mechanisms: Arc<Mechanisms>,
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
    /// `text` through `spec` (cached under `key`): keyed by `rule` when the
    /// session is keyed and the value comes from a rule's column, else
    /// with fresh randomness.
    fn sanitize(
        &mut self,
        key: &str,
        spec: &MechanismSpec,
        text: &str,
        rule: Option<(u32, i16)>,
    ) -> Result<String> {
        if !self.built.contains_key(key) {
            let m = self.engine.build(spec)?;
            self.built.insert(key.to_string(), m);
        }
        let m = self
            .built
            .get(key)
            .ok_or_else(|| ProxyError::Protocol("mechanism cache".into()))?;
        Ok(match rule {
            Some((oid, attnum)) => {
                let (oid, attnum) = (oid.to_be_bytes(), attnum.to_be_bytes());
                self.engine
                    .run(m.as_ref(), text, &self.mode, &[b"rule", &oid, &attnum])?
            }
            None => self.engine.run(m.as_ref(), text, &RandomMode::Os, &[])?,
        }
        .text)
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
        let mech = &plan.mechanisms;
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
                        rule,
                    },
                ) => {
                    let (key, spec) = mech
                        .keys
                        .get(*spec)
                        .zip(mech.specs.get(*spec))
                        .ok_or_else(|| ProxyError::Protocol("plan without its mechanism".into()))?;
                    let mut f = |s: &str, part: values::Part| {
                        if part == values::Part::Key && mech.column_names.contains(s) {
                            Ok(s.to_string())
                        } else {
                            self.sanitize(key, spec, s, *rule)
                        }
                    };
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
                            let key = format!("{spec:?}");
                            let _ = reply.send(w.sanitize(&key, &spec, &text, None));
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

    /// Sanitizes one text with `spec`, with fresh randomness (notices,
    /// notifications, parameter values: text computed by the session).
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
