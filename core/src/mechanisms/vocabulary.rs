//! A loaded embedding set with the samplers built over it.

use std::sync::Arc;

use crate::cost::VocabularyCost;
use crate::embeddings::{Embeddings, VocabKind, WordPieces};
use crate::error::{Error, Result};
use crate::mechanisms::exponential::{table_cache, ExpSampler, TableCache};
use crate::vocab::VocabularyAsset;

/// An embedding set plus the per-token table cache that every sampler
/// over it shares, so tables survive across calls and the memory bound
/// holds however many output sets (SanText+ `w` values) are used.
pub struct Vocabulary {
    emb: Arc<Embeddings>,
    cache: TableCache,
    /// The released vocabulary it was restricted to, if any.
    release: Option<VocabularyCost>,
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
            release: None,
        }
    }

    /// `base` restricted to the words of a released vocabulary, as the
    /// SanText and CusText papers take theirs from the task corpus: the
    /// words become both the input and the output set, in the release's
    /// order (the column's noisy frequency order, which SanText+'s
    /// sensitive set follows). Every word must be in `base`: a vocabulary
    /// built over more GloVe words than are loaded is an error, not a
    /// silently smaller set. The restricted set is named
    /// `<base>@<vocabulary>-<first 8 hex digits of its digest>`, which
    /// puts the version into every mechanism's parameters.
    pub fn restricted(
        base: &Vocabulary,
        asset: &VocabularyAsset,
        cache_bytes: u64,
    ) -> Result<Self> {
        let emb = base.embeddings();
        if emb.kind() != VocabKind::Word {
            return Err(Error::invalid(
                "vocabulary",
                "a released vocabulary applies to the word embedding ('glove'), not to WordPiece",
            ));
        }
        if asset.words.is_empty() {
            return Err(Error::invalid(
                "vocabulary",
                format!(
                    "{} is empty: no word passed its threshold; build it again with more values, a larger eps or delta, or a smaller max_words_per_value",
                    asset.name
                ),
            ));
        }
        let mut ids = Vec::with_capacity(asset.words.len());
        let mut missing = Vec::new();
        for w in &asset.words {
            match emb.id(w) {
                Some(id) => ids.push(id),
                None => missing.push(w.as_str()),
            }
        }
        if let Some(first) = missing.first() {
            return Err(Error::invalid(
                "vocabulary",
                format!(
                    "{} has {} words outside the loaded embedding ({} rows of {}; it was built over {} rows of {}), e.g. {first:?}: load as many GloVe words as it was built with",
                    asset.name,
                    missing.len(),
                    emb.len(),
                    emb.name(),
                    asset.embedding_rows,
                    asset.embedding
                ),
            ));
        }
        let digest8 = asset.digest.get(..8).unwrap_or(&asset.digest);
        let name = format!("{}@{}-{digest8}", emb.name(), asset.name);
        Ok(Vocabulary {
            emb: Arc::new(emb.subset(&name, &ids)?),
            cache: table_cache(cache_bytes),
            release: Some(asset.cost()),
        })
    }

    /// The released vocabulary this one is restricted to, if any.
    pub fn release(&self) -> Option<&VocabularyCost> {
        self.release.as_ref()
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
