//! Masked-language-model scoring on ONNX Runtime.
//!
//! A model directory holds `model.onnx`, its `tokenizer.json` (Hugging
//! Face `tokenizers` format) and a `config.json` with the special token
//! ids (see `models/mlm/MODEL_CARD.md`). Two export layouts work:
//!
//! - with a `positions` input (`int64 [batch]`, the one position read per
//!   row) and `logits` `[batch, vocab]`: the output layer runs on those
//!   positions only (the project's default model is exported this way);
//! - a plain masked-LM export (`logits` `[batch, seq, vocab]`), e.g.
//!   `bert-base-cased` exported with `optimum-cli export onnx`; the row's
//!   position is read from the full output.
//!
//! `token_type_ids` is passed when the model declares it. Every row of a
//! call has exactly one position of interest; rows are padded to the
//! longest of their batch and run `batch` at a time.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use ort::session::Session;
use ort::value::TensorRef;
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::runtime::{build_session, input_names, model_err, Device};

pub mod math;

/// Most sessions one model keeps on the CPU (each holds its own copy of
/// the weights, about 40 MB for the default model).
pub const MAX_SESSIONS: usize = 8;

/// The default model's directory inside the assets directory.
pub const MODEL_DIR: &str = "mlm";

/// The special tokens and sizes a model directory's `config.json` states.
#[derive(Debug, Clone, Deserialize)]
pub struct MlmConfig {
    /// Output vocabulary size.
    pub vocab_size: usize,
    /// Longest input the model accepts, special tokens included.
    pub max_position_embeddings: usize,
    /// `[MASK]`.
    pub mask_token_id: u32,
    /// `[CLS]`.
    pub cls_token_id: u32,
    /// `[SEP]`.
    pub sep_token_id: u32,
    /// `[PAD]`.
    pub pad_token_id: u32,
    /// Whether the tokenizer lower-cases (uncased model).
    #[serde(default)]
    pub lowercase: bool,
}

/// A tokenized text: WordPiece ids and their byte ranges in the text.
#[derive(Debug, Clone, Default)]
pub struct Encoded {
    /// Token ids, without special tokens.
    pub ids: Vec<u32>,
    /// Byte range of each token in the text.
    pub offsets: Vec<(usize, usize)>,
}

/// One model input row and the position whose distribution is wanted.
#[derive(Debug, Clone)]
pub struct Row {
    /// Token ids with `[CLS]` and `[SEP]`.
    pub ids: Vec<u32>,
    /// Index into `ids`.
    pub position: usize,
}

/// A loaded masked language model.
///
/// On the CPU with `threads > 1` it keeps a pool of sessions (up to
/// [`MAX_SESSIONS`], the threads shared among them) and spreads the calls
/// of [`MaskedLm::map_calls`] over them: each call and the arithmetic on
/// its logits run on one thread. Two single-threaded sessions ran the
/// default model's 64-row calls 1.89 times as fast as one, one session of
/// two intra-op threads 1.39 times (2 cores, `mlm_calls` benchmark). On
/// CUDA there is one session.
pub struct MaskedLm {
    sessions: Vec<Mutex<Session>>,
    tokenizer: tokenizers::Tokenizer,
    config: MlmConfig,
    positions_input: bool,
    token_type_ids: bool,
    device: Device,
    fallback: Option<String>,
    batch: usize,
    dir: PathBuf,
    /// Rows run so far (see [`MaskedLm::rows_run`]).
    rows_run: AtomicU64,
}

impl std::fmt::Debug for MaskedLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaskedLm")
            .field("dir", &self.dir)
            .field("device", &self.device)
            .field("positions_input", &self.positions_input)
            .finish()
    }
}

impl MaskedLm {
    /// Loads the model in `dir` with the ONNX Runtime library `lib` and
    /// `threads` threads, on `device` (CPU when it cannot start), running
    /// at most `batch` rows per model call. On the CPU the threads go to a
    /// pool of `min(threads, MAX_SESSIONS)` sessions, each with
    /// `threads / sessions` intra-op threads (12 threads: 8 sessions of
    /// one); on CUDA, and when CUDA falls back to the CPU, to one session's
    /// intra-op threads.
    pub fn load(
        lib: &Path,
        dir: &Path,
        threads: usize,
        device: Device,
        batch: usize,
    ) -> Result<Self> {
        let threads = threads.max(1);
        let (sessions, intra) = match device {
            Device::Cpu => {
                let n = threads.min(MAX_SESSIONS);
                (n, threads / n)
            }
            Device::Cuda => (1, threads),
        };
        Self::load_sessions(lib, dir, sessions, intra, device, batch)
    }

    /// [`MaskedLm::load`] with `sessions` sessions of `intra` intra-op
    /// threads each (the benchmark compares layouts with it).
    pub fn load_sessions(
        lib: &Path,
        dir: &Path,
        sessions: usize,
        intra: usize,
        device: Device,
        batch: usize,
    ) -> Result<Self> {
        let lib = &crate::runtime::ort_lib(lib);
        for p in [
            lib.to_path_buf(),
            dir.join("model.onnx"),
            dir.join("tokenizer.json"),
            dir.join("config.json"),
        ] {
            if !p.exists() {
                return Err(Error::MissingAsset {
                    asset: if &p == lib {
                        "onnxruntime".into()
                    } else {
                        "mlm".into()
                    },
                    path: p,
                });
            }
        }
        let config: MlmConfig = serde_json::from_str(
            &std::fs::read_to_string(dir.join("config.json"))
                .map_err(|e| Error::io(dir.join("config.json"), e))?,
        )
        .map_err(|e| model_err(format!("{}: {e}", dir.join("config.json").display())))?;
        if config.max_position_embeddings < 8 {
            return Err(model_err("config.json: max_position_embeddings < 8"));
        }
        let mut tokenizer =
            tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).map_err(model_err)?;
        // Long texts are windowed by the caller, never cut here.
        tokenizer
            .with_truncation(None)
            .map_err(model_err)?
            .with_padding(None);
        let model = dir.join("model.onnx");
        let built = build_session(lib, &model, intra, device)?;
        let inputs = input_names(&built.session, &model, &["input_ids", "attention_mask"])?;
        let mut pool = vec![Mutex::new(built.session)];
        for _ in 1..sessions.max(1) {
            pool.push(Mutex::new(
                build_session(lib, &model, intra, built.device)?.session,
            ));
        }
        Ok(MaskedLm {
            positions_input: inputs.iter().any(|n| n == "positions"),
            token_type_ids: inputs.iter().any(|n| n == "token_type_ids"),
            sessions: pool,
            tokenizer,
            config,
            device: built.device,
            fallback: built.fallback,
            batch: batch.max(1),
            dir: dir.to_path_buf(),
            rows_run: AtomicU64::new(0),
        })
    }

    /// The model's settings.
    pub fn config(&self) -> &MlmConfig {
        &self.config
    }

    /// The device the model runs on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Why the requested device was not used, when it was not.
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// The longest token sequence one row may hold, without `[CLS]`/`[SEP]`.
    pub fn max_tokens(&self) -> usize {
        self.config.max_position_embeddings - 2
    }

    /// Rows per model call.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Sessions the calls are spread over.
    pub fn pool(&self) -> usize {
        self.sessions.len()
    }

    /// Rows per call for `rows` rows: at most [`MaskedLm::batch`], and
    /// few enough that every session gets a call when there are rows
    /// enough.
    pub fn rows_per_call(&self, rows: usize) -> usize {
        self.batch.min(rows.div_ceil(self.pool())).max(1)
    }

    /// A free session, looking from `from` on, or else session `from`
    /// once it is free.
    fn session(&self, from: usize) -> MutexGuard<'_, Session> {
        let n = self.sessions.len();
        for k in 0..n {
            match self.sessions[(from + k) % n].try_lock() {
                Ok(g) => return g,
                Err(std::sync::TryLockError::Poisoned(p)) => return p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
        }
        lock(&self.sessions[from % n])
    }

    /// Masked copies (rows) this model has run since it was loaded.
    pub fn rows_run(&self) -> u64 {
        self.rows_run.load(Ordering::Relaxed)
    }

    /// Tokenizes `text` (no special tokens), with byte offsets.
    pub fn encode(&self, text: &str) -> Result<Encoded> {
        let enc = self.tokenizer.encode(text, false).map_err(model_err)?;
        Ok(Encoded {
            ids: enc.get_ids().to_vec(),
            offsets: enc.get_offsets().to_vec(),
        })
    }

    /// The text of token ids, WordPiece continuations joined.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.tokenizer.decode(ids, true).map_err(model_err)
    }

    /// The token string of an id.
    pub fn token(&self, id: u32) -> Option<String> {
        self.tokenizer.id_to_token(id)
    }

    /// `[CLS] ids [SEP]`.
    pub fn wrap(&self, ids: &[u32]) -> Vec<u32> {
        let mut v = Vec::with_capacity(ids.len() + 2);
        v.push(self.config.cls_token_id);
        v.extend_from_slice(ids);
        v.push(self.config.sep_token_id);
        v
    }

    /// Runs `calls` model calls, the rows of call `i` built by `build(i)`
    /// (at most [`MaskedLm::batch`] rows each), spread over the session
    /// pool; `f(i, r, logits, scratch)` turns the raw logits of row `r` of
    /// call `i` into a value on the thread that ran the call. Returns the
    /// values by call and row, in order. Rows are built one call at a time
    /// on each thread, so memory holds one batch of rows and logits per
    /// session. [`math`] turns logits into log-probabilities or divergences.
    pub fn map_calls<T: Send>(
        &self,
        calls: usize,
        build: impl Fn(usize) -> Vec<Row> + Sync,
        f: impl Fn(usize, usize, &[f32], &mut Vec<f32>) -> T + Sync,
    ) -> Result<Vec<Vec<T>>> {
        let one = |session: &mut Session, i: usize, scratch: &mut Vec<f32>| -> Result<Vec<T>> {
            let rows = build(i);
            let mut vals = Vec::with_capacity(rows.len());
            self.run_batch(session, &rows, &mut |r, z| vals.push(f(i, r, z, scratch)))?;
            Ok(vals)
        };
        let workers = self.sessions.len().min(calls);
        if workers == 0 {
            return Ok(Vec::new());
        }
        if workers == 1 {
            let mut session = self.session(0);
            let mut scratch = Vec::new();
            return (0..calls)
                .map(|i| {
                    crate::cancel::check()?;
                    one(&mut session, i, &mut scratch)
                })
                .collect();
        }
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let work = |w: usize| -> Result<Done<T>> {
            // Worker 0 is the calling thread: it asks the cancellation hook
            // before each call and stops the others through `failed`, also
            // when the hook unwinds.
            let _stop = crate::cancel::StopOnUnwind(&failed);
            // A session is taken only once there is a call to run, and a
            // free one first: another caller may be using some.
            let mut session = None;
            let mut scratch = Vec::new();
            let mut mine = Vec::new();
            loop {
                if w == 0 {
                    if let Err(e) = crate::cancel::check() {
                        failed.store(true, Ordering::Relaxed);
                        return Err(e);
                    }
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= calls || failed.load(Ordering::Relaxed) {
                    return Ok(mine);
                }
                let s = session.get_or_insert_with(|| self.session(w));
                match one(s, i, &mut scratch) {
                    Ok(vals) => mine.push((i, vals)),
                    Err(e) => {
                        failed.store(true, Ordering::Relaxed);
                        return Err(e);
                    }
                }
            }
        };
        let parts: Vec<Result<Done<T>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (1..workers)
                .map(|w| {
                    let work = &work;
                    scope.spawn(move || work(w))
                })
                .collect();
            let mut parts = vec![work(0)];
            for h in handles {
                parts.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            }
            parts
        });
        let mut out: Vec<Option<Vec<T>>> = (0..calls).map(|_| None).collect();
        for part in parts {
            for (i, vals) in part? {
                out[i] = Some(vals);
            }
        }
        out.into_iter()
            .map(|o| o.ok_or_else(|| model_err("a model call was not run")))
            .collect()
    }

    /// Log-probabilities at each row's position, all kept; the rows are
    /// spread over the session pool.
    pub fn log_probs(&self, rows: &[Row]) -> Result<Vec<Vec<f32>>> {
        let per = self.rows_per_call(rows.len());
        let calls = rows.len().div_ceil(per);
        let out = self.map_calls(
            calls,
            |i| rows[i * per..((i + 1) * per).min(rows.len())].to_vec(),
            |_, _, z, scratch| {
                let mut lp = Vec::with_capacity(z.len());
                math::push_log_softmax(z, &mut lp, scratch);
                lp
            },
        )?;
        Ok(out.into_iter().flatten().collect())
    }

    /// One model call: `each(r, logits)` for every row, in order, on the
    /// runtime's output (copied only when it is not contiguous).
    fn run_batch(
        &self,
        session: &mut Session,
        rows: &[Row],
        each: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<()> {
        let b = rows.len();
        self.rows_run.fetch_add(b as u64, Ordering::Relaxed);
        let s = rows.iter().map(|r| r.ids.len()).max().unwrap_or(0);
        if s > self.config.max_position_embeddings {
            return Err(model_err(format!(
                "row of {s} tokens exceeds the model's {}",
                self.config.max_position_embeddings
            )));
        }
        let mut ids =
            ndarray::Array2::<i64>::from_elem((b, s), i64::from(self.config.pad_token_id));
        let mut mask = ndarray::Array2::<i64>::zeros((b, s));
        for (r, row) in rows.iter().enumerate() {
            if row.position >= row.ids.len() {
                return Err(model_err("row position outside the row"));
            }
            for (t, &id) in row.ids.iter().enumerate() {
                ids[[r, t]] = i64::from(id);
                mask[[r, t]] = 1;
            }
        }
        let types = ndarray::Array2::<i64>::zeros((b, s));
        let positions = ndarray::Array1::<i64>::from_iter(rows.iter().map(|r| r.position as i64));
        let t = tensor;
        let pos = TensorRef::from_array_view(&positions).map_err(model_err)?;
        let outputs = match (self.positions_input, self.token_type_ids) {
            (true, true) => session.run(ort::inputs!["input_ids" => t(&ids)?, "attention_mask" => t(&mask)?, "token_type_ids" => t(&types)?, "positions" => pos]),
            (true, false) => session.run(ort::inputs!["input_ids" => t(&ids)?, "attention_mask" => t(&mask)?, "positions" => pos]),
            (false, true) => session.run(ort::inputs!["input_ids" => t(&ids)?, "attention_mask" => t(&mask)?, "token_type_ids" => t(&types)?]),
            (false, false) => session.run(ort::inputs!["input_ids" => t(&ids)?, "attention_mask" => t(&mask)?]),
        }
        .map_err(model_err)?;
        let logits = outputs[0].try_extract_array::<f32>().map_err(model_err)?;
        let shape = logits.shape().to_vec();
        let v = self.config.vocab_size;
        let mut copy = Vec::new();
        let mut row_of = |at: ndarray::ArrayViewD<'_, f32>, r: usize| match at.as_slice() {
            Some(z) => each(r, z),
            None => {
                copy.clear();
                copy.extend(at.iter().copied());
                each(r, &copy);
            }
        };
        match shape.as_slice() {
            [bb, vv] if *bb == b && *vv == v => {
                for r in 0..b {
                    row_of(logits.index_axis(ndarray::Axis(0), r), r);
                }
            }
            [bb, ss, vv] if *bb == b && *ss == s && *vv == v => {
                for (r, row) in rows.iter().enumerate() {
                    let all = logits.index_axis(ndarray::Axis(0), r);
                    row_of(all.index_axis(ndarray::Axis(0), row.position), r);
                }
            }
            _ => {
                return Err(model_err(format!(
                    "unexpected logits shape {shape:?} for {b} rows of {s} tokens, vocabulary {v}"
                )))
            }
        }
        Ok(())
    }
}

/// The values of the calls one worker ran, by call index.
type Done<T> = Vec<(usize, Vec<T>)>;

/// A session's lock; a panic elsewhere leaves the session usable.
fn lock(slot: &Mutex<Session>) -> MutexGuard<'_, Session> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn tensor(a: &ndarray::Array2<i64>) -> Result<TensorRef<'_, i64>> {
    TensorRef::from_array_view(a).map_err(model_err)
}
