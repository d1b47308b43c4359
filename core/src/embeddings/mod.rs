//! Word embeddings: a frequency-ordered vocabulary and its vectors.
//!
//! # Runtime layout
//!
//! An embedding set is a directory (written once by `dptext assets fetch`):
//!
//! | file | content |
//! |---|---|
//! | `words.txt` | one token a line, most frequent first (row `i` of the matrix) |
//! | `vectors.f32` | the matrix, row-major, little-endian `f32`, `rows x dim` |
//! | `meta.json` | `{"name", "kind": "word" \| "wordpiece", "rows", "dim", "source"}` |
//!
//! Because rows are in frequency order, a token's row index *is* its
//! frequency rank, and the "least frequent fraction w" of SanText+ is a
//! contiguous suffix of the rows.
//!
//! The matrix is either read into memory or, when the caller passes a
//! [`MapFn`], memory-mapped so that every process on the machine shares one
//! copy in the page cache (the extension does this: many backends, one
//! matrix). The map itself needs `unsafe`, which this crate forbids, so the
//! front end supplies it; the bytes are reinterpreted as `f32` with
//! `bytemuck`, which checks size and alignment.

mod wordpiece;

pub use wordpiece::WordPieces;

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// What the tokens of an embedding set are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VocabKind {
    /// Whole words (GloVe): a text's words are looked up lower-cased.
    Word,
    /// BERT WordPiece tokens (`##` marks a continuation piece).
    Wordpiece,
}

/// The `meta.json` of an embedding directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingMeta {
    /// Short name, e.g. `glove-6b-50d`.
    pub name: String,
    /// Token kind.
    pub kind: VocabKind,
    /// Number of rows in `vectors.f32` and lines in `words.txt`.
    pub rows: usize,
    /// Vector dimension.
    pub dim: usize,
    /// Where the vectors came from (package and version).
    pub source: String,
}

/// Bytes owned elsewhere (for example a memory-mapped file).
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Maps a file into memory; supplied by front ends that may use `unsafe`.
pub type MapFn = fn(&Path) -> std::io::Result<SharedBytes>;

/// Where the matrix lives.
enum Storage {
    /// Read into memory.
    Owned(Vec<f32>),
    /// Shared bytes holding at least `floats` little-endian `f32`s, checked
    /// for size and alignment when loaded.
    Mapped { bytes: SharedBytes, floats: usize },
}

impl Storage {
    fn floats(&self) -> &[f32] {
        match self {
            Storage::Owned(v) => v,
            Storage::Mapped { bytes, floats } => {
                bytemuck::cast_slice(&bytes.as_ref().as_ref()[..floats * 4])
            }
        }
    }
}

/// A vocabulary in frequency order with one vector per token.
pub struct Embeddings {
    meta: EmbeddingMeta,
    words: Vec<String>,
    index: HashMap<String, u32>,
    vectors: Storage,
    max_norm: f32,
}

impl std::fmt::Debug for Embeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embeddings")
            .field("name", &self.meta.name)
            .field("kind", &self.meta.kind)
            .field("rows", &self.words.len())
            .field("dim", &self.meta.dim)
            .finish()
    }
}

impl Embeddings {
    /// Builds an embedding set from its parts (tests, custom vocabularies).
    ///
    /// `words` must be in frequency order, most frequent first, without
    /// duplicates; `vectors` is row-major with `words.len() * dim` values.
    pub fn from_parts(
        name: &str,
        kind: VocabKind,
        words: Vec<String>,
        vectors: Vec<f32>,
        dim: usize,
    ) -> Result<Self> {
        Self::from_storage(name, kind, words, Storage::Owned(vectors), dim)
    }

    fn from_storage(
        name: &str,
        kind: VocabKind,
        words: Vec<String>,
        storage: Storage,
        dim: usize,
    ) -> Result<Self> {
        let vectors = storage.floats();
        if dim == 0 || vectors.len() != words.len() * dim {
            return Err(Error::invalid(
                "vectors",
                format!(
                    "{} values do not make {} rows of dimension {dim}",
                    vectors.len(),
                    words.len()
                ),
            ));
        }
        if words.is_empty() {
            return Err(Error::invalid("words", "the vocabulary is empty"));
        }
        if vectors.iter().any(|v| !v.is_finite()) {
            return Err(Error::invalid("vectors", "non-finite value in the matrix"));
        }
        let mut index = HashMap::with_capacity(words.len());
        for (i, w) in words.iter().enumerate() {
            if index.insert(w.clone(), i as u32).is_some() {
                return Err(Error::invalid("words", format!("duplicate token {w:?}")));
            }
        }
        let max_norm = vectors
            .chunks_exact(dim)
            .map(|r| r.iter().map(|v| v * v).sum::<f32>().sqrt())
            .fold(0.0f32, f32::max);
        // Squared distances must stay finite, or weights become NaN.
        if !(2.0 * max_norm).powi(2).is_finite() {
            return Err(Error::invalid(
                "vectors",
                "values so large that distances overflow f32",
            ));
        }
        Ok(Embeddings {
            meta: EmbeddingMeta {
                name: name.to_string(),
                kind,
                rows: words.len(),
                dim,
                source: "in-memory".to_string(),
            },
            words,
            index,
            vectors: storage,
            max_norm,
        })
    }

    /// A new embedding set holding only the rows `ids`, in that order (the
    /// order becomes the new frequency order), named `name`: a vocabulary
    /// restricted to a released word list ([`crate::vocab`]).
    pub fn subset(&self, name: &str, ids: &[u32]) -> Result<Self> {
        let rows = self.rows();
        let mut words = Vec::with_capacity(ids.len());
        let mut vectors = Vec::with_capacity(ids.len() * self.dim());
        for &id in ids {
            if id as usize >= self.len() {
                return Err(Error::invalid("words", format!("row {id} is out of range")));
            }
            words.push(self.words[id as usize].clone());
            vectors.extend_from_slice(rows.get(id));
        }
        let mut e = Embeddings::from_parts(name, self.kind(), words, vectors, self.dim())?;
        e.meta.source = self.meta.source.clone();
        Ok(e)
    }

    /// Loads an embedding directory (see the module docs) into memory,
    /// keeping only the `limit` most frequent tokens when a limit is given.
    pub fn load(dir: &Path, limit: Option<usize>) -> Result<Self> {
        Self::load_with(dir, limit, None)
    }

    /// Like [`Embeddings::load`], memory-mapping `vectors.f32` with `map`
    /// when one is given (falling back to reading it when the mapped bytes
    /// are not aligned for `f32` or the machine is big-endian).
    pub fn load_with(dir: &Path, limit: Option<usize>, map: Option<MapFn>) -> Result<Self> {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let missing = |p: &Path| Error::MissingAsset {
            asset: name.clone(),
            path: p.to_path_buf(),
        };
        let meta_path = dir.join("meta.json");
        if !meta_path.exists() {
            return Err(missing(&meta_path));
        }
        let meta_text = fs::read_to_string(&meta_path).map_err(|e| Error::io(&meta_path, e))?;
        let meta: EmbeddingMeta = serde_json::from_str(&meta_text)?;
        let corrupt = |p: &Path, reason: String| Error::CorruptAsset {
            asset: meta.name.clone(),
            path: p.to_path_buf(),
            reason,
        };

        let words_path = dir.join("words.txt");
        let words_text = fs::read_to_string(&words_path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => missing(&words_path),
            _ => Error::io(&words_path, e),
        })?;
        let rows = limit.unwrap_or(meta.rows).min(meta.rows);
        let words: Vec<String> = words_text.lines().take(rows).map(str::to_owned).collect();
        if words.len() != rows {
            return Err(corrupt(
                &words_path,
                format!("{} lines, expected {rows}", words.len()),
            ));
        }

        let vec_path = dir.join("vectors.f32");
        let expected = meta.rows * meta.dim * 4;
        let floats = rows * meta.dim;
        let not_found = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::NotFound => missing(&vec_path),
            _ => Error::io(&vec_path, e),
        };
        let wrong_size = |len: usize| {
            corrupt(
                &vec_path,
                format!("{len} bytes, expected {} x {} x 4", meta.rows, meta.dim),
            )
        };
        let mapped = match map {
            Some(map) if cfg!(target_endian = "little") => {
                let bytes = map(&vec_path).map_err(not_found)?;
                let len = bytes.as_ref().as_ref().len();
                if len != expected {
                    return Err(wrong_size(len));
                }
                let aligned = bytemuck::try_cast_slice::<u8, f32>(bytes.as_ref().as_ref()).is_ok();
                aligned.then_some(Storage::Mapped { bytes, floats })
            }
            _ => None,
        };
        let storage = match mapped {
            Some(s) => s,
            None => {
                let bytes = fs::read(&vec_path).map_err(not_found)?;
                if bytes.len() != expected {
                    return Err(wrong_size(bytes.len()));
                }
                Storage::Owned(
                    bytes[..floats * 4]
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect(),
                )
            }
        };
        let mut e = Embeddings::from_storage(&meta.name, meta.kind, words, storage, meta.dim)?;
        e.meta.source = meta.source;
        tracing::debug!(name = %e.meta.name, rows, dim = e.meta.dim, "loaded embeddings");
        Ok(e)
    }

    /// Short name of the set (e.g. `glove-6b-50d`).
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// Token kind.
    pub fn kind(&self) -> VocabKind {
        self.meta.kind
    }

    /// True when the matrix is memory-mapped rather than read into memory.
    pub fn is_mapped(&self) -> bool {
        matches!(self.vectors, Storage::Mapped { .. })
    }

    /// Where the vectors came from.
    pub fn source(&self) -> &str {
        &self.meta.source
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Always false: an empty vocabulary is rejected when loading.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.meta.dim
    }

    /// The token at row `id` (its frequency rank).
    pub fn token(&self, id: u32) -> &str {
        &self.words[id as usize]
    }

    /// The row of `token`, if it is in the vocabulary.
    pub fn id(&self, token: &str) -> Option<u32> {
        self.index.get(token).copied()
    }

    /// The vector of row `id`.
    pub fn vector(&self, id: u32) -> &[f32] {
        self.rows().get(id)
    }

    /// Euclidean distance between rows `a` and `b`.
    #[inline]
    pub fn distance(&self, a: u32, b: u32) -> f32 {
        self.rows().distance(a, b)
    }

    /// A view of the matrix for hot loops: resolves the storage once.
    #[inline]
    pub fn rows(&self) -> Rows<'_> {
        Rows {
            data: self.vectors.floats(),
            dim: self.meta.dim,
        }
    }

    /// An upper bound on the distance between any two rows (twice the
    /// largest norm); used to state worst-case composed guarantees.
    pub fn diameter_bound(&self) -> f32 {
        2.0 * self.max_norm
    }
}

/// The matrix as a plain slice, for loops over many rows.
#[derive(Clone, Copy)]
pub struct Rows<'a> {
    data: &'a [f32],
    dim: usize,
}

impl<'a> Rows<'a> {
    /// The vector of row `id`.
    #[inline]
    pub fn get(&self, id: u32) -> &'a [f32] {
        &self.data[id as usize * self.dim..(id as usize + 1) * self.dim]
    }

    /// Euclidean distance between rows `a` and `b`.
    #[inline]
    pub fn distance(&self, a: u32, b: u32) -> f32 {
        euclidean(self.get(a), self.get(b))
    }
}

/// Euclidean distance of two equally long vectors, written so that the
/// compiler vectorises it (eight independent accumulators).
#[inline]
pub fn euclidean(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for k in 0..8 {
            let d = x[k] - y[k];
            acc[k] += d * d;
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        let d = x - y;
        s += d * d;
    }
    s.sqrt()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// A synthetic vocabulary: `n` words `w0..` with random vectors in `dim`
    /// dimensions scaled so that distances span roughly 1.5 to 8, like GloVe.
    pub(crate) fn synthetic(n: usize, dim: usize, seed: u64) -> Embeddings {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let words = (0..n).map(|i| format!("w{i}")).collect();
        let vectors = (0..n * dim)
            .map(|_| rng.random_range(-1.3f32..1.3))
            .collect();
        Embeddings::from_parts("synthetic", VocabKind::Word, words, vectors, dim)
            .expect("valid synthetic embeddings")
    }

    #[test]
    fn rejects_bad_parts() {
        let w = vec!["a".to_string(), "b".to_string()];
        assert!(Embeddings::from_parts("x", VocabKind::Word, w.clone(), vec![0.0; 3], 2).is_err());
        assert!(Embeddings::from_parts("x", VocabKind::Word, vec![], vec![], 2).is_err());
        let dup = vec!["a".to_string(), "a".to_string()];
        assert!(Embeddings::from_parts("x", VocabKind::Word, dup, vec![0.0; 4], 2).is_err());
        let nan = vec![0.0, f32::NAN, 0.0, 0.0];
        assert!(Embeddings::from_parts("x", VocabKind::Word, w.clone(), nan, 2).is_err());
        let huge = vec![1e19, 0.0, -1e19, 0.0];
        assert!(Embeddings::from_parts("x", VocabKind::Word, w, huge, 2).is_err());
    }

    #[test]
    fn distance_matches_naive() {
        let e = synthetic(20, 13, 1);
        for a in 0..20u32 {
            for b in 0..20u32 {
                let naive: f32 = e
                    .vector(a)
                    .iter()
                    .zip(e.vector(b))
                    .map(|(x, y)| (x - y) * (x - y))
                    .sum::<f32>()
                    .sqrt();
                assert!((e.distance(a, b) - naive).abs() < 1e-5);
                assert!(e.distance(a, b) <= e.diameter_bound());
            }
        }
    }

    #[test]
    fn load_round_trip_and_errors() {
        let dir = std::env::temp_dir().join(format!("dptext-emb-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let err = Embeddings::load(&dir, None).unwrap_err();
        assert!(matches!(err, Error::MissingAsset { .. }), "{err}");
        assert!(err.to_string().contains("dptext assets fetch"));
        let meta = EmbeddingMeta {
            name: "t".into(),
            kind: VocabKind::Word,
            rows: 3,
            dim: 2,
            source: "test".into(),
        };
        fs::write(dir.join("meta.json"), serde_json::to_string(&meta).unwrap()).unwrap();
        fs::write(dir.join("words.txt"), "the\nof\nzebra\n").unwrap();
        let v: Vec<u8> = [1.0f32, 0.0, 0.0, 1.0, 3.0, 4.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        fs::write(dir.join("vectors.f32"), &v[..20]).unwrap();
        let err = Embeddings::load(&dir, None).unwrap_err();
        assert!(matches!(err, Error::CorruptAsset { .. }), "{err}");
        fs::write(dir.join("vectors.f32"), &v).unwrap();
        let e = Embeddings::load(&dir, None).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(e.id("zebra"), Some(2));
        assert_eq!(e.vector(2), &[3.0, 4.0]);
        assert_eq!(e.source(), "test");
        assert!(!e.is_mapped());
        let e2 = Embeddings::load(&dir, Some(2)).unwrap();
        assert_eq!(e2.len(), 2);
        assert_eq!(e2.id("zebra"), None);
        // A "map" that hands back aligned bytes (as an mmap would).
        fn map(p: &Path) -> std::io::Result<SharedBytes> {
            let floats: Vec<f32> = fs::read(p)?
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            Ok(Arc::new(
                bytemuck::cast_slice::<f32, u8>(&floats)
                    .to_vec()
                    .into_boxed_slice(),
            ) as SharedBytes)
        }
        let m = Embeddings::load_with(&dir, Some(2), Some(map)).unwrap();
        assert_eq!(m.len(), 2);
        assert!(m.is_mapped());
        assert_eq!(m.vector(1), &[0.0, 1.0]);
        assert_eq!(m.distance(0, 1), e.distance(0, 1));
        fs::remove_dir_all(&dir).unwrap();
    }
}
