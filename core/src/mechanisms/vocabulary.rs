//! A loaded embedding set with the samplers built over it.

use std::sync::Arc;

use crate::embeddings::{Embeddings, VocabKind, WordPieces};
use crate::error::{Error, Result};
use crate::mechanisms::exponential::{table_cache, ExpSampler, TableCache};

/// An embedding set plus the per-token table cache that every sampler
/// over it shares, so tables survive across calls and the memory bound
/// holds however many output sets (SanText+ `w` values) are used.
pub struct Vocabulary {
    emb: Arc<Embeddings>,
    cache: TableCache,
}

impl std::fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocabulary")
            .field("emb", &self.emb)
            .finish()
    }
}

impl Vocabulary {
    /// Wraps an embedding set; its table cache may use up to `cache_bytes` bytes.
    pub fn new(emb: Embeddings, cache_bytes: u64) -> Self {
        Vocabulary {
            emb: Arc::new(emb),
            cache: table_cache(cache_bytes),
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
        Ok(Arc::new(ExpSampler::new(
            self.emb.clone(),
            start..n,
            self.cache.clone(),
        )))
    }

    /// Bytes held by the table cache now (for metrics and tests).
    pub fn cached_bytes(&self) -> u64 {
        self.cache.run_pending_tasks();
        self.cache.weighted_size()
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
