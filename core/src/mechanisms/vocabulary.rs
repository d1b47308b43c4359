//! A loaded embedding set with the samplers built over it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::embeddings::{Embeddings, VocabKind, WordPieces};
use crate::error::{Error, Result};
use crate::mechanisms::exponential::ExpSampler;

/// An embedding set plus one [`ExpSampler`] per output set in use, so that
/// per-token tables survive across calls.
pub struct Vocabulary {
    emb: Arc<Embeddings>,
    cache_bytes: u64,
    samplers: Mutex<HashMap<u32, Arc<ExpSampler>>>,
}

impl std::fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocabulary")
            .field("emb", &self.emb)
            .finish()
    }
}

impl Vocabulary {
    /// Wraps an embedding set; each sampler's table cache may use up to
    /// `cache_bytes` bytes.
    pub fn new(emb: Embeddings, cache_bytes: u64) -> Self {
        Vocabulary {
            emb: Arc::new(emb),
            cache_bytes,
            samplers: Mutex::new(HashMap::new()),
        }
    }

    /// The embedding set.
    pub fn embeddings(&self) -> &Arc<Embeddings> {
        &self.emb
    }

    /// The sampler whose output set is the rows `start..len` (the
    /// `len - start` least frequent tokens; `start = 0` is the whole vocabulary).
    pub fn sampler(&self, start: u32) -> Result<Arc<ExpSampler>> {
        let n = self.emb.len() as u32;
        if start >= n {
            return Err(Error::invalid(
                "w",
                "the protected set is empty: raise w so that at least one word is sensitive",
            ));
        }
        let mut map = self
            .samplers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(map
            .entry(start)
            .or_insert_with(|| {
                Arc::new(ExpSampler::new(
                    self.emb.clone(),
                    start..n,
                    self.cache_bytes,
                ))
            })
            .clone())
    }

    /// Appends the token ids of one word to `out`: one id for a word
    /// vocabulary (looked up as written, then lower-cased), its pieces for a
    /// WordPiece vocabulary. Returns false, leaving `out` unchanged, when the
    /// word is out of vocabulary.
    pub fn tokens_into(&self, word: &str, out: &mut Vec<u32>) -> bool {
        match self.emb.kind() {
            VocabKind::Word => {
                let id = match self.emb.id(word) {
                    Some(id) => Some(id),
                    None if word.chars().any(char::is_uppercase) => {
                        self.emb.id(&word.to_lowercase())
                    }
                    None => None,
                };
                id.map(|i| out.push(i)).is_some()
            }
            VocabKind::Wordpiece => match WordPieces::new(&self.emb).split(word) {
                Some(pieces) => {
                    out.extend(pieces);
                    true
                }
                None => false,
            },
        }
    }

    /// The token ids of one word, or `None` when it is out of vocabulary.
    pub fn tokens(&self, word: &str) -> Option<Vec<u32>> {
        let mut out = Vec::new();
        self.tokens_into(word, &mut out).then_some(out)
    }

    /// Turns sampled ids back into one word.
    pub fn render(&self, ids: &[u32]) -> String {
        match self.emb.kind() {
            VocabKind::Word => ids.iter().map(|&i| self.emb.token(i)).collect(),
            VocabKind::Wordpiece => WordPieces::join(ids.iter().map(|&i| self.emb.token(i))),
        }
    }
}
