//! Sentence embeddings for utility measurement: how close a sanitized text
//! stays to its original in meaning.
//!
//! The model is sentence-transformers' all-MiniLM-L6-v2, exported to ONNX
//! by `scripts/build-encoder` (the asset [`SENTENCE_ENCODER_DIR`]:
//! `model.onnx`, `tokenizer.json`, `config.json`). The graph does the whole
//! pipeline, BERT, mean pooling over the attention mask and L2
//! normalization, so a text's vector is one output row; its inputs are
//! `input_ids` and `attention_mask` (`int64 [batch, seq]`), its output
//! `sentence_embedding` (`float32 [batch, 384]`). `token_type_ids` is passed
//! as zeros when a model declares it. Texts are cut at 256 tokens, as the
//! reference implementation cuts them; `docs/sentence-encoder.md` has the
//! measured agreement with it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ort::session::Session;
use ort::value::TensorRef;
use serde::Deserialize;

use crate::assets::SENTENCE_ENCODER_DIR;
use crate::error::{Error, Result};
use crate::runtime::{build_session, input_names, model_err, Device};

#[cfg(test)]
mod tests;

/// The command, from the repository root, that builds the asset.
pub const BUILD_COMMAND: &str = "scripts/build-encoder";

/// Most rows per model call. Rows are sorted by length first, so a call
/// pads little; 32 rows of 256 tokens keep a call's attention scores
/// near 100 MB.
pub const BATCH: usize = 32;

/// What the asset's `config.json` states (other fields are ignored).
#[derive(Debug, Clone, Deserialize)]
struct EncoderConfig {
    dim: usize,
    max_seq_length: usize,
    pad_token_id: u32,
    output: String,
}

/// all-MiniLM-L6-v2 sentence embeddings (the `sentence-minilm-l6` asset).
pub struct SentenceEncoder {
    session: Mutex<Session>,
    tokenizer: tokenizers::Tokenizer,
    config: EncoderConfig,
    token_type_ids: bool,
    device: Device,
    dir: PathBuf,
}

impl std::fmt::Debug for SentenceEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentenceEncoder")
            .field("dir", &self.dir)
            .field("device", &self.device)
            .field("dim", &self.config.dim)
            .finish()
    }
}

impl SentenceEncoder {
    /// Opens the encoder with the engine's ONNX Runtime library, device and thread settings.
    pub fn open(config: &crate::EngineConfig) -> Result<SentenceEncoder> {
        Self::load(&config.assets_dir, config.model_threads, config.device)
    }

    /// Loads the encoder from the assets directory `assets` with `threads`
    /// intra-op threads on `device` (the CPU when CUDA cannot start).
    fn load(assets: &Path, threads: usize, device: Device) -> Result<SentenceEncoder> {
        let dir = assets.join(SENTENCE_ENCODER_DIR);
        // The asset first: it is the one `dptext assets fetch` does not make.
        for name in ["model.onnx", "tokenizer.json", "config.json"] {
            let p = dir.join(name);
            if !p.exists() {
                return Err(Error::AssetNotBuilt {
                    asset: SENTENCE_ENCODER_DIR.into(),
                    path: p,
                    command: BUILD_COMMAND.into(),
                });
            }
        }
        let lib = crate::runtime::ort_lib(&assets.join(crate::detect::model::ORT_LIB));
        if !lib.exists() {
            return Err(Error::MissingAsset {
                asset: "onnxruntime".into(),
                path: lib,
            });
        }
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let config: EncoderConfig = serde_json::from_str(&text)
            .map_err(|e| model_err(format!("{}: {e}", path.display())))?;
        if config.dim == 0 || config.max_seq_length < 2 {
            return Err(model_err(format!(
                "{}: dim {} and max_seq_length {} are not usable",
                path.display(),
                config.dim,
                config.max_seq_length
            )));
        }
        let mut tokenizer =
            tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).map_err(model_err)?;
        // Whatever the file says: cut at the model's length, never pad
        // (a call pads its rows to the longest itself).
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: config.max_seq_length,
                ..Default::default()
            }))
            .map_err(model_err)?
            .with_padding(None);
        let model = dir.join("model.onnx");
        let built = build_session(&lib, &model, threads, device)?;
        let inputs = input_names(&built.session, &model, &["input_ids", "attention_mask"])?;
        if !built
            .session
            .outputs()
            .iter()
            .any(|o| o.name() == config.output)
        {
            return Err(model_err(format!(
                "{} has no output {}",
                model.display(),
                config.output
            )));
        }
        Ok(SentenceEncoder {
            token_type_ids: inputs.iter().any(|n| n == "token_type_ids"),
            session: Mutex::new(built.session),
            tokenizer,
            config,
            device: built.device,
            dir,
        })
    }

    /// One L2-normalized 384-d vector per text, in order; batches internally (texts of
    /// similar length together), truncates at 256 tokens like the reference.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let rows = texts
            .iter()
            .map(|t| self.ids(t))
            .collect::<Result<Vec<_>>>()?;
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by_key(|&i| rows[i].len());
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); rows.len()];
        for chunk in order.chunks(BATCH) {
            crate::cancel::check()?;
            let batch: Vec<&[u32]> = chunk.iter().map(|&i| rows[i].as_slice()).collect();
            for (&i, v) in chunk.iter().zip(self.run(&batch)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// The vector width (384).
    pub fn dim(&self) -> usize {
        self.config.dim
    }

    /// The device the model runs on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Token ids of `text` with `[CLS]` and `[SEP]`, cut at the model's
    /// length.
    fn ids(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self.tokenizer.encode(text, true).map_err(model_err)?;
        Ok(enc.get_ids().to_vec())
    }

    /// One model call on rows of token ids, padded to the longest.
    fn run(&self, rows: &[&[u32]]) -> Result<Vec<Vec<f32>>> {
        let b = rows.len();
        let s = rows.iter().map(|r| r.len()).max().unwrap_or(0).max(1);
        let mut ids =
            ndarray::Array2::<i64>::from_elem((b, s), i64::from(self.config.pad_token_id));
        let mut mask = ndarray::Array2::<i64>::zeros((b, s));
        for (r, row) in rows.iter().enumerate() {
            for (t, &id) in row.iter().enumerate() {
                ids[[r, t]] = i64::from(id);
                mask[[r, t]] = 1;
            }
        }
        let types = ndarray::Array2::<i64>::zeros((b, s));
        let t = tensor;
        let mut session = self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let outputs = if self.token_type_ids {
            session.run(ort::inputs![
                "input_ids" => t(&ids)?,
                "attention_mask" => t(&mask)?,
                "token_type_ids" => t(&types)?
            ])
        } else {
            session.run(ort::inputs!["input_ids" => t(&ids)?, "attention_mask" => t(&mask)?])
        }
        .map_err(model_err)?;
        let emb = outputs[self.config.output.as_str()]
            .try_extract_array::<f32>()
            .map_err(model_err)?;
        let d = self.config.dim;
        if emb.shape() != [b, d] {
            return Err(model_err(format!(
                "unexpected {} shape {:?} for {b} rows, dimension {d}",
                self.config.output,
                emb.shape()
            )));
        }
        Ok(emb
            .outer_iter()
            .map(|row| row.iter().copied().collect())
            .collect())
    }
}

fn tensor(a: &ndarray::Array2<i64>) -> Result<TensorRef<'_, i64>> {
    TensorRef::from_array_view(a).map_err(model_err)
}

/// Cosine similarity of two vectors (0 when either is zero).
///
/// Sums in `f64`; entries past the shorter vector's length are ignored.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut aa, mut bb) = (0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        return 0.0;
    }
    (dot / (aa.sqrt() * bb.sqrt())) as f32
}
