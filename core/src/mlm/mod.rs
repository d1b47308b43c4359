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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ort::session::Session;
use ort::value::TensorRef;
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::runtime::{build_session, model_err, Device};

pub mod math;

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
pub struct MaskedLm {
    session: Mutex<Session>,
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
    /// Loads the model in `dir` with the ONNX Runtime library `lib`,
    /// `threads` intra-op threads, on `device` (CPU when it cannot start),
    /// running at most `batch` rows per model call.
    pub fn load(
        lib: &Path,
        dir: &Path,
        threads: usize,
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
        let built = build_session(lib, &dir.join("model.onnx"), threads, device)?;
        let inputs: Vec<String> = built
            .session
            .inputs()
            .iter()
            .map(|i| i.name().to_string())
            .collect();
        for need in ["input_ids", "attention_mask"] {
            if !inputs.iter().any(|n| n == need) {
                return Err(model_err(format!(
                    "{} has no input {need} (inputs: {inputs:?})",
                    dir.join("model.onnx").display()
                )));
            }
        }
        Ok(MaskedLm {
            positions_input: inputs.iter().any(|n| n == "positions"),
            token_type_ids: inputs.iter().any(|n| n == "token_type_ids"),
            session: Mutex::new(built.session),
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

    /// Raw logits over the vocabulary at each row's position (the caller
    /// masks it), in `batch`-sized model calls; `each` receives the row
    /// index and its logits, so callers never hold more than one batch.
    /// [`math`] turns logits into log-probabilities or divergences.
    pub fn logits_each(&self, rows: &[Row], mut each: impl FnMut(usize, &[f32])) -> Result<()> {
        for (c, chunk) in rows.chunks(self.batch).enumerate() {
            let out = self.run_batch(chunk)?;
            let v = self.config.vocab_size;
            for (r, z) in out.chunks(v).enumerate() {
                each(c * self.batch + r, z);
            }
        }
        Ok(())
    }

    /// Log-probabilities at each row's position, all kept.
    pub fn log_probs(&self, rows: &[Row]) -> Result<Vec<Vec<f32>>> {
        let mut out = vec![Vec::new(); rows.len()];
        let mut scratch = Vec::new();
        self.logits_each(rows, |i, z| {
            let mut lp = Vec::with_capacity(z.len());
            math::push_log_softmax(z, &mut lp, &mut scratch);
            out[i] = lp;
        })?;
        Ok(out)
    }

    /// One model call: the logits rows, concatenated (`rows.len() * vocab`).
    fn run_batch(&self, rows: &[Row]) -> Result<Vec<f32>> {
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
        let mut session = self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
        let mut out = Vec::with_capacity(b * v);
        match shape.as_slice() {
            [bb, vv] if *bb == b && *vv == v => match logits.as_slice() {
                Some(all) => out.extend_from_slice(all),
                None => out.extend(logits.iter().copied()),
            },
            [bb, ss, vv] if *bb == b && *ss == s && *vv == v => {
                for (r, row) in rows.iter().enumerate() {
                    let all = logits.index_axis(ndarray::Axis(0), r);
                    let at = all.index_axis(ndarray::Axis(0), row.position);
                    out.extend(at.iter().copied());
                }
            }
            _ => {
                return Err(model_err(format!(
                    "unexpected logits shape {shape:?} for {b} rows of {s} tokens, vocabulary {v}"
                )))
            }
        }
        Ok(out)
    }
}

fn tensor(a: &ndarray::Array2<i64>) -> Result<TensorRef<'_, i64>> {
    TensorRef::from_array_view(a).map_err(model_err)
}
