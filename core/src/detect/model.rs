//! The Rampart token classifier on ONNX Runtime.
//!
//! `ort` loads the `libonnxruntime` installed by `dptext assets fetch`
//! (load-dynamic), once per process. The text is tokenized with the
//! model's own `tokenizer.json` (byte offsets into the original string),
//! classified in windows of at most 510 tokens that overlap by 64, each
//! token keeping the prediction of the window where it sits most
//! centrally, so long texts are covered without truncation. Adjacent
//! tokens of the same coarse label, separated by nothing or by whitespace
//! (or, for locations, by a comma), form one span, widened to whole words; the model's BIO prefixes are not
//! trusted (it tags e-mails B, I, I, B ...).

use std::path::Path;
use std::sync::Mutex;

use ort::session::Session;
use ort::value::TensorRef;

mod plan;

use super::{Label, Source, Span};
use crate::error::{Error, Result};
use plan::Passes;

/// The ONNX Runtime library inside the assets directory.
pub const ORT_LIB: &str = "onnxruntime/libonnxruntime.so.1.31.1";
/// The model directory inside the assets directory.
pub const MODEL_DIR: &str = "rampart";

const WINDOW: usize = 510;
/// Rows (windows and lines, of one text or several) per model call, by default.
pub const DEFAULT_BATCH: usize = 4;
/// Most padded tokens in one batched call.
const BATCH_TOKENS: usize = 8192;
/// Token ids and their byte offsets in the text.
pub type Tokens = (Vec<u32>, Vec<(usize, usize)>);

/// Bytes tokenized at a time, so that a cancel is seen between pieces.
const CHUNK: usize = 16 * 1024;
const OVERLAP: usize = 64;

/// A loaded token classifier.
pub struct NerModel {
    session: Mutex<Session>,
    /// Where the session runs (the CPU after a CUDA request fell back).
    device: crate::runtime::Device,
    tokenizer: tokenizers::Tokenizer,
    /// Coarse label of each output class (`None` for `O`).
    classes: Vec<Option<Label>>,
    token_type_ids: bool,
    cls: u32,
    sep: u32,
    pad: u32,
    /// Rows (windows, lines) per model call.
    batch: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for NerModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NerModel")
            .field("classes", &self.classes.len())
            .finish()
    }
}

use crate::runtime::model_err;

/// Maps a Rampart class name (`B-GIVEN_NAME`) to a coarse label.
pub fn coarse(class: &str) -> Option<Label> {
    let kind = class
        .strip_prefix("B-")
        .or_else(|| class.strip_prefix("I-"))?;
    Some(match kind {
        "GIVEN_NAME" | "SURNAME" => Label::Person,
        "EMAIL" | "PHONE" | "URL" => Label::Contact,
        "BUILDING_NUMBER" | "STREET_NAME" | "SECONDARY_ADDRESS" | "CITY" | "STATE" | "ZIP_CODE" => {
            Label::Location
        }
        _ => Label::Id,
    })
}

impl NerModel {
    /// Loads the model from an assets directory (`rampart/` and the ONNX
    /// Runtime library), with `threads` intra-op threads, on the CPU.
    pub fn load(assets: &Path, threads: usize) -> Result<Self> {
        Self::load_on(assets, threads, crate::runtime::Device::Cpu)
    }

    /// [`NerModel::load`] on `device`: a CUDA request that cannot start
    /// runs on the CPU with one warning, as the masked LM's does
    /// ([`crate::runtime::fallback_count`] counts it).
    pub fn load_on(assets: &Path, threads: usize, device: crate::runtime::Device) -> Result<Self> {
        let lib = crate::runtime::ort_lib(&assets.join(ORT_LIB));
        let dir = assets.join(MODEL_DIR);
        for (asset, p) in [
            ("onnxruntime", lib.clone()),
            ("rampart", dir.join("model.onnx")),
            ("rampart", dir.join("tokenizer.json")),
            ("rampart", dir.join("config.json")),
        ] {
            if !p.exists() {
                return Err(Error::MissingAsset {
                    asset: asset.into(),
                    path: p,
                });
            }
        }
        let config: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("config.json"))
                .map_err(|e| Error::io(dir.join("config.json"), e))?,
        )?;
        let id2label = config["id2label"]
            .as_object()
            .ok_or_else(|| model_err("config.json has no id2label"))?;
        let mut classes = vec![None; id2label.len()];
        for (k, v) in id2label {
            let i: usize = k
                .parse()
                .map_err(|_| model_err(format!("bad class id {k}")))?;
            let name = v.as_str().unwrap_or("O");
            *classes
                .get_mut(i)
                .ok_or_else(|| model_err(format!("class id {i} out of range")))? = coarse(name);
        }
        let tokenizer =
            tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).map_err(model_err)?;
        let cls = tokenizer
            .token_to_id("[CLS]")
            .ok_or_else(|| model_err("no [CLS] token"))?;
        let sep = tokenizer
            .token_to_id("[SEP]")
            .ok_or_else(|| model_err("no [SEP] token"))?;
        let pad = tokenizer.token_to_id("[PAD]").unwrap_or(0);
        let built = crate::runtime::build_session(&lib, &dir.join("model.onnx"), threads, device)?;
        let session = built.session;
        let token_type_ids = session
            .inputs()
            .iter()
            .any(|i| i.name() == "token_type_ids");
        Ok(NerModel {
            session: Mutex::new(session),
            device: built.device,
            tokenizer,
            classes,
            token_type_ids,
            cls,
            sep,
            pad,
            batch: std::sync::atomic::AtomicUsize::new(DEFAULT_BATCH),
        })
    }

    /// Where the model runs: the device asked for, or the CPU when a CUDA
    /// request could not start.
    pub fn device(&self) -> crate::runtime::Device {
        self.device
    }

    /// Per-token (class, probability) for several windows in one model
    /// call: rows padded to the longest with `[PAD]` and masked out, so
    /// each row's predictions are those of the row alone.
    fn classify_batch(&self, windows: &[&[u32]]) -> Result<Vec<Vec<(usize, f32)>>> {
        let rows = windows.len();
        let n = windows.iter().map(|w| w.len()).max().unwrap_or(0) + 2;
        let mut input = ndarray::Array2::<i64>::from_elem((rows, n), i64::from(self.pad));
        let mut mask = ndarray::Array2::<i64>::zeros((rows, n));
        for (r, w) in windows.iter().enumerate() {
            input[[r, 0]] = i64::from(self.cls);
            for (i, &id) in w.iter().enumerate() {
                input[[r, i + 1]] = i64::from(id);
            }
            input[[r, w.len() + 1]] = i64::from(self.sep);
            for i in 0..w.len() + 2 {
                mask[[r, i]] = 1;
            }
        }
        let types = ndarray::Array2::<i64>::zeros((rows, n));
        let mut session = self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let t = tensor;
        let outputs = if self.token_type_ids {
            session.run(ort::inputs!["input_ids" => t(&input)?, "attention_mask" => t(&mask)?, "token_type_ids" => t(&types)?])
        } else {
            session.run(ort::inputs!["input_ids" => t(&input)?, "attention_mask" => t(&mask)?])
        }
        .map_err(model_err)?;
        let logits = outputs[0].try_extract_array::<f32>().map_err(model_err)?;
        let shape = logits.shape().to_vec();
        if shape.len() != 3 || shape[0] != rows || shape[1] != n || shape[2] != self.classes.len() {
            return Err(model_err(format!("unexpected logits shape {shape:?}")));
        }
        Ok(windows
            .iter()
            .enumerate()
            .map(|(r, w)| {
                let row_logits = logits.index_axis(ndarray::Axis(0), r);
                (1..w.len() + 1)
                    .map(|t| {
                        let row = row_logits.index_axis(ndarray::Axis(0), t);
                        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                        let z: f32 = row.iter().map(|v| (v - max).exp()).sum();
                        let (best, v) =
                            row.iter()
                                .enumerate()
                                .fold(
                                    (0, f32::NEG_INFINITY),
                                    |a, (i, &v)| if v > a.1 { (i, v) } else { a },
                                );
                        (best, (v - max).exp() / z)
                    })
                    .collect()
            })
            .collect())
    }

    /// Rows per model call (1: one window or line a call).
    pub fn set_batch(&self, rows: usize) {
        self.batch
            .store(rows.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// Token ids and byte offsets of `text`, tokenized in pieces of about
    /// [`CHUNK`] bytes with a cancellation check between them (a 2 MB text
    /// took seconds in one call). Pieces end before whitespace or ASCII
    /// punctuation, where BERT's pre-tokenizer splits anyway and its
    /// normalizer works character by character, so the tokens are those of
    /// the whole text (`chunked_tokens_are_the_whole_texts` checks it).
    pub fn tokens(&self, text: &str) -> Result<Tokens> {
        let mut ids = Vec::new();
        let mut offsets = Vec::new();
        let mut start = 0;
        while start < text.len() {
            crate::cancel::check()?;
            let mut end = (start + CHUNK).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            if end < text.len() {
                end += text[end..]
                    .find(|c: char| c.is_whitespace() || c.is_ascii_punctuation())
                    .unwrap_or(text.len() - end);
            }
            let enc = self
                .tokenizer
                .encode(&text[start..end], false)
                .map_err(model_err)?;
            ids.extend_from_slice(enc.get_ids());
            offsets.extend(
                enc.get_offsets()
                    .iter()
                    .map(|&(s, e)| (s + start, e + start)),
            );
            start = end;
        }
        Ok((ids, offsets))
    }

    /// Token ids and byte offsets of `text` in one call (what
    /// [`NerModel::tokens`] must agree with).
    pub fn tokens_whole(&self, text: &str) -> Result<Tokens> {
        let enc = self.tokenizer.encode(text, false).map_err(model_err)?;
        Ok((enc.get_ids().to_vec(), enc.get_offsets().to_vec()))
    }

    /// The model's spans in `text`, word-aligned, byte offsets.
    pub fn spans(&self, text: &str) -> Result<Vec<Span>> {
        self.read_one(
            text,
            Passes {
                windows: true,
                lines: false,
            },
        )
    }

    /// The model's spans of each of `texts`: [`NerModel::spans`] and, with
    /// `per_line`, [`NerModel::line_spans`] after them, exactly as for
    /// each text alone, but with the windows and lines of all the texts
    /// sharing model calls (up to [`NerModel::set_batch`] rows a call,
    /// similar lengths together). One text's error leaves the others alone.
    pub fn spans_many(&self, texts: &[&str], per_line: bool) -> Vec<Result<Vec<Span>>> {
        self.read_many(
            texts,
            Passes {
                windows: true,
                lines: per_line,
            },
        )
    }

    /// [`NerModel::read_many`] of one text.
    fn read_one(&self, text: &str, passes: Passes) -> Result<Vec<Span>> {
        self.read_many(&[text], passes)
            .pop()
            .unwrap_or_else(|| Ok(Vec::new()))
    }

    /// Spans from per-token predictions: adjacent tokens of one coarse
    /// label joined, widened to whole words, scored by their mean probability.
    fn assemble(&self, text: &str, offsets: &[(usize, usize)], best: &[(usize, f32)]) -> Vec<Span> {
        let mut spans: Vec<Span> = Vec::new();
        let mut scores: Vec<Vec<f32>> = Vec::new();
        for (t, &(class, p)) in best.iter().enumerate() {
            let Some(label) = self.classes.get(class).copied().flatten() else {
                continue;
            };
            let (s, e) = offsets[t];
            if e <= s {
                continue;
            }
            if let Some(last) = spans.last_mut() {
                let gap = text.get(last.end..s).unwrap_or("x");
                // Addresses run across commas ("42 Oak Street, Springfield, IL").
                let joins = gap.chars().all(char::is_whitespace)
                    || (label == Label::Location && gap.trim() == "," && gap.starts_with(','));
                if last.label == label && s >= last.end && joins {
                    last.end = last.end.max(e);
                    if let Some(sc) = scores.last_mut() {
                        sc.push(p);
                    }
                    continue;
                }
            }
            spans.push(Span {
                start: s,
                end: e,
                label,
                score: p,
                source: Source::Model,
            });
            scores.push(vec![p]);
        }
        for (span, sc) in spans.iter_mut().zip(&scores) {
            span.score = sc.iter().sum::<f32>() / sc.len() as f32;
            widen_to_words(text, span);
        }
        spans
    }
}

impl NerModel {
    /// The model's spans line by line: a short context reads names the
    /// whole-text windows miss (`Maria Lopez lives in Springfield.`), and a
    /// line mostly in capitals is read in title case (the model was trained
    /// on mixed case: `KOWALCZYK, HELENA` is a name, `Kowalczyk, Helena`
    /// reads as one). Offsets point into `text`.
    pub fn line_spans(&self, text: &str) -> Result<Vec<Span>> {
        self.read_one(
            text,
            Passes {
                windows: false,
                lines: true,
            },
        )
    }
}

/// ASCII title case, byte for byte the same length: `KOWALCZYK, HELENA`
/// becomes `Kowalczyk, Helena`.
fn title_case(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut prev_alpha = false;
    for c in line.chars() {
        if c.is_ascii_alphabetic() {
            out.push(if prev_alpha {
                c.to_ascii_lowercase()
            } else {
                c.to_ascii_uppercase()
            });
            prev_alpha = true;
        } else {
            out.push(c);
            prev_alpha = c.is_alphabetic() || c == '\'';
        }
    }
    out
}

fn tensor(a: &ndarray::Array2<i64>) -> Result<TensorRef<'_, i64>> {
    TensorRef::from_array_view(a).map_err(model_err)
}

/// Extends a span to whole words (alphanumeric runs) on both sides.
fn widen_to_words(text: &str, span: &mut Span) {
    while let Some(c) = text[..span.start].chars().next_back() {
        if !c.is_alphanumeric() {
            break;
        }
        span.start -= c.len_utf8();
    }
    while let Some(c) = text[span.end..].chars().next() {
        if !c.is_alphanumeric() {
            break;
        }
        span.end += c.len_utf8();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> Option<NerModel> {
        crate::assets::load_or_skip(|dir| NerModel::load(dir, 1))
    }

    /// The model honours the device asked for: CUDA where it starts, else
    /// the CPU with one counted fallback and the CPU's spans.
    #[test]
    fn a_cuda_request_runs_there_or_falls_back_with_the_same_spans() {
        let Some(cpu) = model() else { return };
        let before = crate::runtime::fallback_count();
        let Some(gpu) = crate::assets::load_or_skip(|dir| {
            NerModel::load_on(dir, 1, crate::runtime::Device::Cuda)
        }) else {
            return;
        };
        assert_eq!(cpu.device(), crate::runtime::Device::Cpu);
        if gpu.device() == crate::runtime::Device::Cuda {
            return;
        }
        assert!(crate::runtime::fallback_count() > before);
        let t = "Seen by Dr. Anna Kowalski at 14 Elm Street, Springfield; call 555-201-7788.";
        assert_eq!(found(&gpu, t), found(&cpu, t));
        assert!(!found(&cpu, t).is_empty());
    }

    fn found(m: &NerModel, t: &str) -> Vec<(Label, String)> {
        m.spans(t)
            .unwrap()
            .iter()
            .map(|s| (s.label, t[s.start..s.end].to_string()))
            .collect()
    }

    /// Tokenizing in pieces gives exactly the whole text's tokens, on text
    /// long enough to be cut many times, with words, punctuation, digits,
    /// accents, CJK and emoji at the cuts.
    #[test]
    fn chunked_tokens_are_the_whole_texts() {
        let Some(m) = model() else { return };
        let unit = "Dr. Zoë Müller-Smith (MRN 8249813) saw the patient on 3/14/2024; \
                    follow-up at St. Mary's, 東京 clinic 🙂... ABDOMEN soft,non-tender.\n";
        let text = unit.repeat(1 + 3 * CHUNK / unit.len());
        let dots = ".".repeat(CHUNK * 2 + 17);
        for t in [text.as_str(), dots.as_str()] {
            let (ids, offsets) = m.tokens(t).unwrap();
            let (whole_ids, whole_offsets) = m.tokens_whole(t).unwrap();
            assert_eq!(ids, whole_ids);
            assert_eq!(offsets, whole_offsets);
        }
    }

    #[test]
    fn names_addresses_and_emails() {
        let Some(m) = model() else { return };
        let t = "Please contact John Smith at john.smith@example.com. He lives at 42 Oak Street, Springfield, IL 62704.";
        let f = found(&m, t);
        assert!(f.contains(&(Label::Person, "John Smith".into())), "{f:?}");
        assert!(
            f.contains(&(Label::Contact, "john.smith@example.com".into())),
            "{f:?}"
        );
        assert!(
            f.iter()
                .any(|(l, v)| *l == Label::Location && v.contains("Oak Street")),
            "{f:?}"
        );
    }

    #[test]
    fn long_texts_are_windowed_not_truncated() {
        let Some(m) = model() else { return };
        // About 1,500 tokens: the name at the end is past the first window.
        let filler = "the patient reported mild pain and was given fluids. ".repeat(140);
        let t = format!("{filler}Discharged by Maria Gonzalez.");
        let f = found(&m, &t);
        assert!(
            f.iter()
                .any(|(l, v)| *l == Label::Person && v.contains("Gonzalez")),
            "{f:?}"
        );
        // Multi-byte text keeps byte offsets on character boundaries.
        let u = "Café owner Zoë Müller lives in Zürich. 🙂";
        for s in m.spans(u).unwrap() {
            assert!(u.is_char_boundary(s.start) && u.is_char_boundary(s.end));
        }
    }

    /// One line a call and 32 lines a call find the same spans.
    #[test]
    fn batched_lines_find_what_single_lines_find() {
        let Some(m) = model() else { return };
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/clinical");
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for f in files.iter().take(6) {
            let note =
                crate::detect::annotated::parse(&std::fs::read_to_string(f).unwrap()).unwrap();
            m.set_batch(1);
            let one: Vec<(usize, usize, Label)> = m
                .line_spans(&note.text)
                .unwrap()
                .iter()
                .map(|s| (s.start, s.end, s.label))
                .collect();
            m.set_batch(32);
            let many: Vec<(usize, usize, Label)> = m
                .line_spans(&note.text)
                .unwrap()
                .iter()
                .map(|s| (s.start, s.end, s.label))
                .collect();
            let mut a = one.clone();
            a.sort();
            let mut b = many.clone();
            b.sort();
            assert_eq!(a, b, "{}", f.display());
        }
    }

    #[test]
    fn coarse_labels() {
        assert_eq!(coarse("B-GIVEN_NAME"), Some(Label::Person));
        assert_eq!(coarse("I-ZIP_CODE"), Some(Label::Location));
        assert_eq!(coarse("B-PASSPORT"), Some(Label::Id));
        assert_eq!(coarse("O"), None);
    }
}
