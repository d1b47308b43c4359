//! The CusText mechanism: each token replaced by a draw from its output
//! set, at the chosen level (token, record, dataset), stopwords optionally
//! kept.

use std::collections::HashMap;
use std::sync::Arc;

use rand::{Rng, RngCore};

use super::{CusTextSpec, Level, Mapping, STOPWORDS};
use crate::cost::{Cost, Guarantee};
use crate::error::{Error, Result};
use crate::mechanisms::vocabulary::Vocabulary;
use crate::mechanisms::words::Words;
use crate::mechanisms::{check_eps, Mechanism, Sanitized};
use crate::rng::RandomMode;
use crate::text::Segmented;

/// CusText over one vocabulary and mapping.
#[derive(Debug)]
pub struct CusText {
    vocab: Arc<Vocabulary>,
    mapping: Arc<Mapping>,
    eps: f64,
    level: Level,
    keep_stopwords: bool,
    /// [`Mechanism::params`], from the spec.
    key: String,
}

impl CusText {
    /// CusText as `spec` says, over `vocab` with the mapping built for
    /// `spec`'s K, strategy and metric.
    pub fn from_spec(
        vocab: Arc<Vocabulary>,
        mapping: Arc<Mapping>,
        spec: &CusTextSpec,
    ) -> Result<Self> {
        Self::new(vocab, mapping, spec.eps, spec.level, spec.keep_stopwords)
    }

    /// CusText at `eps` (> 0) with a prepared mapping.
    pub fn new(
        vocab: Arc<Vocabulary>,
        mapping: Arc<Mapping>,
        eps: f64,
        level: Level,
        keep_stopwords: bool,
    ) -> Result<Self> {
        check_eps(eps)?;
        let spec = CusTextSpec {
            eps,
            k: mapping.k,
            mapping: mapping.strategy,
            metric: mapping.metric,
            level,
            keep_stopwords,
            words: Words::default(),
        };
        let key = spec.key_params(vocab.embeddings().name());
        Ok(CusText {
            vocab,
            mapping,
            eps,
            level,
            keep_stopwords,
            key,
        })
    }

    /// True when `word` (any case) is in the shipped stopword list.
    pub fn is_stopword(word: &str) -> bool {
        static SET: std::sync::OnceLock<std::collections::HashSet<&'static str>> =
            std::sync::OnceLock::new();
        let set = SET.get_or_init(|| {
            STOPWORDS
                .lines()
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .collect()
        });
        set.contains(word) || set.contains(word.to_lowercase().as_str())
    }
}

impl Mechanism for CusText {
    fn name(&self) -> &'static str {
        "custext"
    }

    fn params(&self) -> String {
        self.key.clone()
    }

    fn sanitize(&self, text: &str, rng: &mut dyn RngCore, mode: &RandomMode) -> Result<Sanitized> {
        if self.level == Level::Dataset && !matches!(mode, RandomMode::Keyed(_)) {
            // A public seed would let anyone recompute the whole word ->
            // replacement table, so only a secret key will do.
            return Err(Error::invalid(
                "level",
                "'dataset' maps repeats across values to one output, which needs a secret key (dptext.key or dptext.key_file)",
            ));
        }
        let emb = self.vocab.embeddings();
        let seg = Segmented::new(text);
        let params = self.params();
        let (mut tokens, mut oov, mut kept, mut draws) = (0usize, 0usize, 0usize, 0usize);
        // Draws shared by repeats (record and dataset levels), keyed by the
        // token's text so that they do not depend on row numbers; an
        // out-of-vocabulary word is keyed by its lower-cased text.
        let mut shared: HashMap<String, u32> = HashMap::new();
        let mut replacements = Vec::with_capacity(seg.len());
        let mut xs = Vec::new();
        let mut ids = Vec::new();
        for (i, w) in seg.words().enumerate() {
            crate::cancel::check_every(i, 256)?;
            let word = seg.word_str(w);
            if self.keep_stopwords && Self::is_stopword(word) {
                kept += 1;
                tokens += 1;
                replacements.push(None);
                continue;
            }
            xs.clear();
            ids.clear();
            // One draw: for an in-vocabulary token from its output set, for
            // an unknown word uniformly from the vocabulary.
            let draw = |x: Option<u32>, rng: &mut dyn RngCore| match x {
                Some(x) => self.mapping.sample(emb, x, self.eps, rng),
                None => rng.random_range(0..emb.len() as u32),
            };
            let units: Vec<(String, Option<u32>)> = if self.vocab.tokens_into(word, &mut xs) {
                xs.iter()
                    .map(|&x| (emb.token(x).to_string(), Some(x)))
                    .collect()
            } else {
                oov += 1;
                vec![(format!("\0oov:{}", word.to_lowercase()), None)]
            };
            for (key, x) in units {
                tokens += 1;
                let y = match self.level {
                    Level::Token => {
                        draws += usize::from(x.is_some());
                        draw(x, rng)
                    }
                    Level::Record => {
                        if let Some(&y) = shared.get(&key) {
                            y
                        } else {
                            draws += usize::from(x.is_some());
                            let y = draw(x, rng);
                            shared.insert(key, y);
                            y
                        }
                    }
                    Level::Dataset => {
                        if let Some(&y) = shared.get(&key) {
                            y
                        } else {
                            draws += usize::from(x.is_some());
                            let mut r = mode.rng_for(&[
                                b"custext dataset",
                                params.as_bytes(),
                                key.as_bytes(),
                            ]);
                            let y = draw(x, &mut r);
                            shared.insert(key, y);
                            y
                        }
                    }
                };
                ids.push(y);
            }
            replacements.push(Some(self.vocab.render(&ids)));
        }
        let cost = Cost {
            mechanism: "custext",
            guarantee: Guarantee::Dp { eps: self.eps },
            tokens,
            oov_tokens: oov,
            kept_tokens: kept,
            composition: match self.level {
                Level::Token => "eps per replaced token",
                Level::Record => "eps per distinct replaced token of the value",
                Level::Dataset => {
                    "eps per distinct replaced token of the whole dataset, spent once"
                }
            }
            .to_string(),
            worst_case_eps: self.eps * draws as f64,
            diameter_bound: f64::from(emb.diameter_bound()),
            embedding: emb.name().to_string(),
            output_set_size: self.mapping.k,
            labels: Vec::new(),
            stages: Vec::new(),
            vocabulary: self.vocab.release().cloned(),
        };
        Ok(Sanitized {
            text: seg.render(&replacements),
            cost,
            protected: Vec::new(),
        })
    }
}
