//! CusText (Chen et al., Alg. 1, Eq. 3-9; docs/mechanisms.md).
//!
//! Every input token `x` gets a customized output set `f_map(x)` of `K`
//! tokens near it (itself included), built once per vocabulary by Alg. 1
//! under one of three strategies:
//!
//! - `aggressive`: each `x` gets its own K nearest tokens;
//! - `balanced` (default): the K nearest set of `x` is also assigned to
//!   those of its members that have no set yet;
//! - `conservative`: balanced, and the members are removed from the pool of
//!   outputs, so output sets are pairwise disjoint.
//!
//! A token is replaced by `y` in `f_map(x)` with probability
//! `exp(eps * u(x, y) / 2) / sum_y' exp(eps * u(x, y') / 2)`, where the score
//! `u` is `1 - ` the min-max normalised Euclidean distance (Eq. 4-5) or the
//! min-max normalised cosine similarity (Eq. 7) over `f_map(x)`: sensitivity
//! 1, so each replacement is eps-DP among the inputs that share an output
//! set.
//!
//! The mapping costs one exact K-nearest-neighbour search per token over the
//! vocabulary (all cores); [`Mapping::load_or_build`] caches it on disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use rand::{Rng, RngCore};
use sha2::{Digest, Sha256};

use crate::cost::{Cost, Guarantee};
use crate::embeddings::{euclidean, Embeddings};
use crate::error::{Error, Result};
use crate::mechanisms::vocabulary::Vocabulary;
use crate::mechanisms::{check_eps, Mechanism, Sanitized};
use crate::rng::RandomMode;
use crate::text::Segmented;

/// The stopwords CusText+ keeps (one a line, `#` comments).
pub const STOPWORDS: &str = include_str!("stopwords.txt");

/// How output sets are assigned (Alg. 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Each token its own K nearest.
    Aggressive,
    /// K nearest of x also given to its members without a set.
    Balanced,
    /// Balanced, with members removed from the pool: disjoint sets.
    Conservative,
}

/// The similarity the score function is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Euclidean distance, Eq. 4-5.
    Euclidean,
    /// Cosine similarity, Eq. 7.
    Cosine,
}

/// Which repeats share one draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// Every occurrence drawn afresh.
    Token,
    /// Repeats of a token inside one value get the same output.
    Record,
    /// Repeats across all values get the same output (needs a key or seed).
    Dataset,
}

named_enum!(Strategy, "mapping", "aggressive" => Aggressive, "balanced" => Balanced, "conservative" => Conservative);
named_enum!(Metric, "metric", "euclidean" => Euclidean, "cosine" => Cosine);
named_enum!(Level, "level", "token" => Token, "record" => Record, "dataset" => Dataset);

/// `f_map`: each row's output set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    k: usize,
    strategy: Strategy,
    metric: Metric,
    /// For each row, the index of its output set in `sets`.
    set_of: Vec<u32>,
    /// The output sets, rows ordered from the closest to the token that
    /// created the set.
    sets: Vec<Vec<u32>>,
}

impl Mapping {
    /// Builds the mapping by Alg. 1 over all rows of `emb` (global input set
    /// = global output set = the vocabulary), using `threads` threads for
    /// the nearest-neighbour searches.
    pub fn build(
        emb: &Embeddings,
        k: usize,
        strategy: Strategy,
        metric: Metric,
        threads: usize,
    ) -> Result<Self> {
        let n = emb.len();
        if k == 0 || k > n {
            return Err(Error::invalid("k", format!("must be in [1, {n}], got {k}")));
        }
        let space = Space::new(emb, metric);
        let mut set_of = vec![u32::MAX; n];
        let mut sets: Vec<Vec<u32>> = Vec::new();
        match strategy {
            Strategy::Aggressive | Strategy::Balanced => {
                let knn = space.all_knn(k, threads)?;
                for (x, near) in knn.into_iter().enumerate() {
                    if strategy == Strategy::Aggressive {
                        set_of[x] = sets.len() as u32;
                        sets.push(near);
                        continue;
                    }
                    let id = sets.len() as u32;
                    let mut used = false;
                    for &y in &near {
                        if set_of[y as usize] == u32::MAX {
                            set_of[y as usize] = id;
                            used = true;
                        }
                    }
                    if used {
                        sets.push(near);
                    }
                }
            }
            Strategy::Conservative => {
                // The pool shrinks, so searches are sequential; each starts
                // from the token's precomputed 4K nearest and scans the whole
                // remaining pool only when too few of those are left.
                // Every row removes min(k, pool) tokens, so only the first
                // ceil(n / k) rows ever search.
                let wide = (4 * k).min(n);
                let candidates = space.knn_of_rows(n.div_ceil(k), wide, threads)?;
                let mut in_pool = vec![true; n];
                let mut pool_left = n;
                for (x, wide_near) in candidates.iter().enumerate() {
                    if pool_left == 0 {
                        break;
                    }
                    crate::cancel::check_every(x, 16)?;
                    let mut near: Vec<u32> = wide_near
                        .iter()
                        .copied()
                        .filter(|&y| in_pool[y as usize])
                        .take(k)
                        .collect();
                    if near.len() < k.min(pool_left) {
                        near = space.knn(x as u32, k, |y| in_pool[y as usize]);
                    }
                    let id = sets.len() as u32;
                    let mut used = false;
                    for &y in &near {
                        if set_of[y as usize] == u32::MAX {
                            set_of[y as usize] = id;
                            used = true;
                        }
                        in_pool[y as usize] = false;
                        pool_left -= 1;
                    }
                    if used {
                        sets.push(near);
                    }
                }
            }
        }
        if set_of.contains(&u32::MAX) {
            return Err(Error::invalid(
                "mapping",
                "a token was left without an output set",
            ));
        }
        Ok(Mapping {
            k,
            strategy,
            metric,
            set_of,
            sets,
        })
    }

    /// The output set of row `x`.
    pub fn output_set(&self, x: u32) -> &[u32] {
        &self.sets[self.set_of[x as usize] as usize]
    }

    /// Number of distinct output sets.
    pub fn set_count(&self) -> usize {
        self.sets.len()
    }

    /// The share of input tokens that have adjacent tokens (another input
    /// mapped to the same output set: types N-1 and N-M of the paper), the
    /// figure of the paper's Table 4.
    pub fn adjacent_share(&self) -> f64 {
        let mut users = vec![0u32; self.sets.len()];
        for &s in &self.set_of {
            users[s as usize] += 1;
        }
        let shared = self
            .set_of
            .iter()
            .filter(|&&s| users[s as usize] > 1)
            .count();
        shared as f64 / self.set_of.len() as f64
    }

    /// The exact output distribution of row `x` at `eps` (Eq. 9), as
    /// (output row, probability) pairs.
    pub fn probabilities(&self, emb: &Embeddings, x: u32, eps: f64) -> Vec<(u32, f64)> {
        let set = self.output_set(x);
        let u = scores(emb, self.metric, x, set);
        let top = u.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = u.iter().map(|&s| (eps * (s - top) / 2.0).exp()).collect();
        let z: f64 = w.iter().sum();
        set.iter().zip(w).map(|(&y, w)| (y, w / z)).collect()
    }

    fn sample(&self, emb: &Embeddings, x: u32, eps: f64, rng: &mut dyn RngCore) -> u32 {
        let p = self.probabilities(emb, x, eps);
        let mut u = rng.random::<f64>();
        for &(y, py) in &p {
            if u < py {
                return y;
            }
            u -= py;
        }
        p.last().map_or(x, |&(y, _)| y)
    }

    const MAGIC: &'static [u8; 8] = b"DPCUST01";

    /// Serialises the mapping (with a SHA-256 trailer).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Self::MAGIC.to_vec();
        for v in [
            self.k as u32,
            self.set_of.len() as u32,
            self.sets.len() as u32,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend(self.set_of.iter().flat_map(|v| v.to_le_bytes()));
        for s in &self.sets {
            b.extend_from_slice(&(s.len() as u32).to_le_bytes());
            b.extend(s.iter().flat_map(|v| v.to_le_bytes()));
        }
        let digest = Sha256::digest(&b);
        b.extend_from_slice(&digest);
        b
    }

    /// Reads what [`Mapping::to_bytes`] wrote; `None` if it is corrupt.
    pub fn from_bytes(b: &[u8], strategy: Strategy, metric: Metric) -> Option<Self> {
        let (body, digest) = b.split_at(b.len().checked_sub(32)?);
        if Sha256::digest(body).as_slice() != digest || body.get(..8)? != Self::MAGIC {
            return None;
        }
        let mut words = body[8..]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        let k = words.next()? as usize;
        let n = words.next()? as usize;
        let nsets = words.next()? as usize;
        let set_of: Vec<u32> = words.by_ref().take(n).collect();
        let mut sets = Vec::with_capacity(nsets);
        for _ in 0..nsets {
            let len = words.next()? as usize;
            let s: Vec<u32> = words.by_ref().take(len).collect();
            if s.len() != len || s.iter().any(|&y| y as usize >= n) {
                return None;
            }
            sets.push(s);
        }
        if set_of.len() != n
            || words.next().is_some()
            || set_of.iter().any(|&s| s as usize >= nsets)
        {
            return None;
        }
        Some(Mapping {
            k,
            strategy,
            metric,
            set_of,
            sets,
        })
    }

    /// The mapping for `emb`, from the disk cache in `dir` when a valid one
    /// is there, else built (timed, logged) and written to the cache. A
    /// cache that cannot be written (read-only assets) is only logged.
    pub fn load_or_build(
        emb: &Embeddings,
        dir: &Path,
        k: usize,
        strategy: Strategy,
        metric: Metric,
        build: bool,
    ) -> Result<Self> {
        let file = cache_file(dir, emb, k, strategy, metric);
        if let Ok(bytes) = std::fs::read(&file) {
            match Mapping::from_bytes(&bytes, strategy, metric) {
                Some(m) if m.k == k && m.set_of.len() == emb.len() => return Ok(m),
                _ => {
                    tracing::warn!(file = %file.display(), "ignoring a corrupt custext mapping cache")
                }
            }
        }
        if !build {
            return Err(Error::MappingNotBuilt {
                k,
                strategy: strategy.name(),
                metric: metric.name(),
                embedding: if emb.kind() == crate::embeddings::VocabKind::Word {
                    "glove"
                } else {
                    "wordpiece"
                },
                path: file,
            });
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let started = std::time::Instant::now();
        let m = Mapping::build(emb, k, strategy, metric, threads)?;
        tracing::info!(
            embedding = emb.name(),
            rows = emb.len(),
            k,
            strategy = strategy.name(),
            metric = metric.name(),
            secs = started.elapsed().as_secs_f64(),
            "built custext mapping"
        );
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        let written = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&tmp, m.to_bytes()))
            .and_then(|()| std::fs::rename(&tmp, &file));
        if let Err(e) = written {
            tracing::warn!(file = %file.display(), error = %e, "could not cache the custext mapping");
        }
        Ok(m)
    }
}

/// Where the mapping of (vocabulary, K, strategy, metric) is cached.
pub fn cache_file(
    dir: &Path,
    emb: &Embeddings,
    k: usize,
    strategy: Strategy,
    metric: Metric,
) -> PathBuf {
    dir.join(format!(
        "{}-{}-k{k}-{}-{}.bin",
        emb.name(),
        emb.len(),
        strategy.name(),
        metric.name()
    ))
}

/// Scores `u(x, y)` for `y` in `set` (Eq. 4-5 or 7), in [0, 1].
fn scores(emb: &Embeddings, metric: Metric, x: u32, set: &[u32]) -> Vec<f64> {
    let xv = emb.vector(x);
    let raw: Vec<f64> = set
        .iter()
        .map(|&y| match metric {
            Metric::Euclidean => f64::from(euclidean(xv, emb.vector(y))),
            Metric::Cosine => cosine(xv, emb.vector(y)),
        })
        .collect();
    let lo = raw.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = raw.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    raw.iter()
        .map(|&r| {
            let norm = if hi > lo { (r - lo) / (hi - lo) } else { 0.0 };
            match metric {
                Metric::Euclidean => 1.0 - norm,
                Metric::Cosine => norm,
            }
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut ab, mut aa, mut bb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        ab += f64::from(x * y);
        aa += f64::from(x * x);
        bb += f64::from(y * y);
    }
    if aa == 0.0 || bb == 0.0 {
        0.0
    } else {
        ab / (aa.sqrt() * bb.sqrt())
    }
}

/// The vectors prepared for one metric's nearest-neighbour search.
struct Space<'a> {
    emb: &'a Embeddings,
    metric: Metric,
    /// Unit vectors (cosine only).
    unit: Vec<f32>,
}

impl<'a> Space<'a> {
    fn new(emb: &'a Embeddings, metric: Metric) -> Self {
        let unit = match metric {
            Metric::Euclidean => Vec::new(),
            Metric::Cosine => (0..emb.len() as u32)
                .flat_map(|i| {
                    let v = emb.vector(i);
                    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                    v.iter()
                        .map(move |x| if norm > 0.0 { x / norm } else { 0.0 })
                })
                .collect(),
        };
        Space { emb, metric, unit }
    }

    /// Dissimilarity: smaller is nearer (distance, or minus the cosine).
    fn key(&self, x: u32, y: u32) -> f32 {
        match self.metric {
            Metric::Euclidean => self.emb.distance(x, y),
            Metric::Cosine => {
                let d = self.emb.dim();
                let a = &self.unit[x as usize * d..(x as usize + 1) * d];
                let b = &self.unit[y as usize * d..(y as usize + 1) * d];
                -dot(a, b)
            }
        }
    }

    /// The `k` rows nearest to `x` among those `keep` accepts, nearest first
    /// (ties by row), `x` itself first when it is accepted.
    fn knn(&self, x: u32, k: usize, keep: impl Fn(u32) -> bool) -> Vec<u32> {
        let mut cand: Vec<(f32, u32)> = (0..self.emb.len() as u32)
            .filter(|&y| keep(y))
            .map(|y| {
                (
                    if y == x {
                        f32::NEG_INFINITY
                    } else {
                        self.key(x, y)
                    },
                    y,
                )
            })
            .collect();
        let k = k.min(cand.len());
        let by = |a: &(f32, u32), b: &(f32, u32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
        if k < cand.len() {
            cand.select_nth_unstable_by(k, by);
            cand.truncate(k);
        }
        cand.sort_unstable_by(by);
        cand.into_iter().map(|(_, y)| y).collect()
    }

    /// The `k` nearest of every row, on `threads` threads.
    fn all_knn(&self, k: usize, threads: usize) -> Result<Vec<Vec<u32>>> {
        self.knn_of_rows(self.emb.len(), k, threads)
    }

    /// The `k` nearest of rows `0..n`, on `threads` threads (the calling
    /// thread one of them). Rows are taken in blocks from a shared counter;
    /// the calling thread asks the cancellation hook between its blocks
    /// and stops the others when it says stop (or unwinds).
    fn knn_of_rows(&self, n: usize, k: usize, threads: usize) -> Result<Vec<Vec<u32>>> {
        const BLOCK: usize = 16;
        let threads = threads.clamp(1, 64);
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let work = |main: bool| -> Result<Vec<(usize, Vec<Vec<u32>>)>> {
            let _stop = crate::cancel::StopOnUnwind(&stop);
            let mut done = Vec::new();
            loop {
                if main {
                    if let Err(e) = crate::cancel::check() {
                        stop.store(true, Ordering::Relaxed);
                        return Err(e);
                    }
                }
                let start = next.fetch_add(BLOCK, Ordering::Relaxed);
                if start >= n || stop.load(Ordering::Relaxed) {
                    return Ok(done);
                }
                let rows = (start..(start + BLOCK).min(n))
                    .map(|x| self.knn(x as u32, k, |_| true))
                    .collect();
                done.push((start, rows));
            }
        };
        let parts = std::thread::scope(|s| {
            let helpers: Vec<_> = (1..threads).map(|_| s.spawn(|| work(false))).collect();
            let mine = work(true);
            let mut parts = vec![mine];
            for h in helpers {
                parts.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            }
            parts
        });
        let mut out: Vec<Vec<u32>> = vec![Vec::new(); n];
        for part in parts {
            for (start, rows) in part? {
                for (i, r) in rows.into_iter().enumerate() {
                    out[start + i] = r;
                }
            }
        }
        Ok(out)
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        s += x * y;
    }
    s
}

/// CusText over one vocabulary and mapping.
#[derive(Debug)]
pub struct CusText {
    vocab: Arc<Vocabulary>,
    mapping: Arc<Mapping>,
    eps: f64,
    level: Level,
    keep_stopwords: bool,
}

impl CusText {
    /// CusText at `eps` (> 0) with a prepared mapping.
    pub fn new(
        vocab: Arc<Vocabulary>,
        mapping: Arc<Mapping>,
        eps: f64,
        level: Level,
        keep_stopwords: bool,
    ) -> Result<Self> {
        check_eps(eps)?;
        Ok(CusText {
            vocab,
            mapping,
            eps,
            level,
            keep_stopwords,
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
        format!(
            "eps={:?};k={};mapping={};metric={};level={};keep_stopwords={};embedding={}",
            self.eps,
            self.mapping.k,
            self.mapping.strategy.name(),
            self.mapping.metric.name(),
            self.level.name(),
            self.keep_stopwords,
            self.vocab.embeddings().name()
        )
    }

    fn sanitize(&self, text: &str, rng: &mut dyn RngCore) -> Result<Sanitized> {
        self.sanitize_in(text, rng, &RandomMode::Os)
    }

    fn sanitize_in(
        &self,
        text: &str,
        rng: &mut dyn RngCore,
        mode: &RandomMode,
    ) -> Result<Sanitized> {
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
        };
        Ok(Sanitized {
            text: seg.render(&replacements),
            cost,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embeddings::tests::synthetic;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn setup(
        n: usize,
        k: usize,
        strategy: Strategy,
        metric: Metric,
    ) -> (Arc<Vocabulary>, Arc<Mapping>) {
        let v = Arc::new(Vocabulary::new(synthetic(n, 8, 21), 1 << 20));
        let m = Mapping::build(v.embeddings(), k, strategy, metric, 2).unwrap();
        (v, Arc::new(m))
    }

    #[test]
    fn aggressive_sets_are_each_tokens_k_nearest() {
        let (v, m) = setup(300, 10, Strategy::Aggressive, Metric::Euclidean);
        let emb = v.embeddings();
        for x in [0u32, 7, 299] {
            let set = m.output_set(x);
            assert_eq!(set.len(), 10);
            assert_eq!(set[0], x, "x is its own nearest");
            let far = set.iter().map(|&y| emb.distance(x, y)).fold(0f32, f32::max);
            let closer_outside = (0..300u32)
                .filter(|y| !set.contains(y))
                .filter(|&y| emb.distance(x, y) < far)
                .count();
            assert_eq!(closer_outside, 0);
        }
    }

    #[test]
    fn conservative_sets_are_disjoint_and_cover_everything() {
        for metric in [Metric::Euclidean, Metric::Cosine] {
            let (_, m) = setup(503, 20, Strategy::Conservative, metric);
            let mut seen = vec![false; 503];
            for s in &m.sets {
                for &y in s {
                    assert!(!seen[y as usize], "{y} in two output sets");
                    seen[y as usize] = true;
                }
            }
            assert!(seen.iter().all(|&b| b));
            assert_eq!(m.adjacent_share(), 1.0, "every input shares its set");
        }
    }

    #[test]
    fn balanced_leaves_almost_no_token_without_adjacent_tokens() {
        let (_, agg) = setup(1000, 20, Strategy::Aggressive, Metric::Euclidean);
        let (_, bal) = setup(1000, 20, Strategy::Balanced, Metric::Euclidean);
        // Table 4 of the paper: aggressive leaves most tokens alone, balanced almost none.
        assert!(
            agg.adjacent_share() < 0.01,
            "aggressive {}",
            agg.adjacent_share()
        );
        assert!(
            bal.adjacent_share() > 0.9,
            "balanced {}",
            bal.adjacent_share()
        );
    }

    #[test]
    fn eps_zero_gives_one_over_k_and_scores_follow_eq9() {
        let (v, m) = setup(400, 20, Strategy::Balanced, Metric::Euclidean);
        for (_, p) in m.probabilities(v.embeddings(), 3, 0.0) {
            assert!((p - 1.0 / 20.0).abs() < 1e-12);
        }
        // Eq. 9: ratio of the best and worst output is exp(eps / 2).
        let p = m.probabilities(v.embeddings(), 3, 4.0);
        let hi = p.iter().map(|x| x.1).fold(0.0, f64::max);
        let lo = p.iter().map(|x| x.1).fold(1.0, f64::min);
        assert!((hi / lo - 2f64.exp()).abs() < 1e-9, "{}", hi / lo);
    }

    #[test]
    fn samples_follow_eq9() {
        // Chi-square, K = 20 bins, df = 19, critical value at 0.001: 43.82.
        let (v, m) = setup(400, 20, Strategy::Balanced, Metric::Cosine);
        let emb = v.embeddings();
        let mut rng = ChaCha20Rng::seed_from_u64(17);
        for (x, eps) in [(5u32, 1.0), (200, 3.0), (399, 6.0)] {
            let p = m.probabilities(emb, x, eps);
            let n = 30_000;
            let mut count: HashMap<u32, f64> = HashMap::new();
            for _ in 0..n {
                *count.entry(m.sample(emb, x, eps, &mut rng)).or_default() += 1.0;
            }
            let stat: f64 = p
                .iter()
                .map(|&(y, py)| {
                    let e = py * n as f64;
                    (count.get(&y).copied().unwrap_or(0.0) - e).powi(2) / e
                })
                .sum();
            assert!(stat < 43.82, "x {x} eps {eps}: chi2 {stat}");
            assert_eq!(
                count
                    .keys()
                    .filter(|y| !p.iter().any(|q| q.0 == **y))
                    .count(),
                0
            );
        }
    }

    #[test]
    fn levels_and_stopwords() {
        let (v, m) = setup(300, 20, Strategy::Balanced, Metric::Euclidean);
        let text = "w5 w5 w5 w5 w5 w5 w5 w5 the W5";
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let rec = CusText::new(v.clone(), m.clone(), 0.5, Level::Record, true).unwrap();
        let out = rec.sanitize(text, &mut rng).unwrap();
        let words: Vec<&str> = out.text.split(' ').collect();
        assert!(words[..8].iter().all(|w| *w == words[0]), "{}", out.text);
        assert_eq!(words[8], "the", "stopword kept");
        assert_eq!(
            words[9].to_lowercase(),
            words[0],
            "repeat in another case too"
        );
        assert_eq!(out.cost.kept_tokens, 1);
        assert_eq!(out.cost.worst_case_eps, 0.5, "one draw at record level");
        let tok = CusText::new(v.clone(), m.clone(), 0.5, Level::Token, false).unwrap();
        let out = tok.sanitize(text, &mut rng).unwrap();
        let distinct: std::collections::HashSet<&str> = out.text.split(' ').collect();
        assert!(distinct.len() > 2, "token level draws afresh: {}", out.text);
        // Nine draws: "the" is not in this vocabulary (a uniform draw, eps 0).
        assert_eq!(out.cost.oov_tokens, 1);
        assert_eq!(out.cost.worst_case_eps, 0.5 * 9.0);
        // Dataset level: the same output for a token in every value, and
        // only with a deterministic random mode.
        let ds = CusText::new(v, m, 0.5, Level::Dataset, true).unwrap();
        assert!(ds.sanitize("w5", &mut rng).is_err());
        assert!(
            ds.sanitize_in("w5", &mut rng, &RandomMode::Seeded(1))
                .is_err(),
            "a public seed is not enough"
        );
        let key = RandomMode::from_settings(None, Some(b"dataset level test key")).unwrap();
        let a = ds.sanitize_in("w5 w9", &mut rng, &key).unwrap().text;
        let b = ds.sanitize_in("w9 and w5", &mut rng, &key).unwrap().text;
        let (a, b): (Vec<&str>, Vec<&str>) = (a.split(' ').collect(), b.split(' ').collect());
        assert_eq!((a[0], a[1]), (b[2], b[0]));
    }

    #[test]
    fn mapping_round_trips_and_detects_corruption() {
        let (v, m) = setup(200, 10, Strategy::Conservative, Metric::Euclidean);
        let bytes = m.to_bytes();
        let back = Mapping::from_bytes(&bytes, Strategy::Conservative, Metric::Euclidean).unwrap();
        assert_eq!(*m, back);
        let mut bad = bytes.clone();
        bad[20] ^= 1;
        assert!(Mapping::from_bytes(&bad, Strategy::Conservative, Metric::Euclidean).is_none());
        assert!(
            Mapping::from_bytes(&bytes[..10], Strategy::Conservative, Metric::Euclidean).is_none()
        );
        let dir = std::env::temp_dir().join(format!("dptext-custext-{}", std::process::id()));
        // Without permission to build, a missing mapping is an error naming the CLI.
        let e = Mapping::load_or_build(
            v.embeddings(),
            &dir,
            10,
            Strategy::Conservative,
            Metric::Euclidean,
            false,
        )
        .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::MappingNotBuilt, "{e}");
        assert!(
            e.custext_map_command()
                .is_some_and(|c| c.starts_with("dptext custext-map --k 10 --mapping conservative")),
            "{e}"
        );
        let built = Mapping::load_or_build(
            v.embeddings(),
            &dir,
            10,
            Strategy::Conservative,
            Metric::Euclidean,
            true,
        )
        .unwrap();
        let file = cache_file(
            &dir,
            v.embeddings(),
            10,
            Strategy::Conservative,
            Metric::Euclidean,
        );
        assert!(file.exists());
        // Cached: loads even when building is not allowed.
        let cached = Mapping::load_or_build(
            v.embeddings(),
            &dir,
            10,
            Strategy::Conservative,
            Metric::Euclidean,
            false,
        )
        .unwrap();
        assert_eq!(built, cached);
        std::fs::write(&file, b"garbage").unwrap();
        let rebuilt = Mapping::load_or_build(
            v.embeddings(),
            &dir,
            10,
            Strategy::Conservative,
            Metric::Euclidean,
            true,
        )
        .unwrap();
        assert_eq!(built, rebuilt);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn parameters_are_validated() {
        use crate::mechanisms::MechanismSpec;
        let ok = MechanismSpec::parse("custext", &serde_json::json!({"eps": 1})).unwrap();
        assert!(matches!(
            ok,
            MechanismSpec::CusText {
                k: 20,
                keep_stopwords: true,
                level: Level::Record,
                mapping: Strategy::Balanced,
                ..
            }
        ));
        for (params, msg) in [
            (serde_json::json!({"eps": 0}), "\"eps\""),
            (serde_json::json!({"eps": 1, "k": 0}), "\"k\""),
            (serde_json::json!({"eps": 1, "k": 5000}), "\"k\""),
            (
                serde_json::json!({"eps": 1, "mapping": "greedy"}),
                "\"mapping\"",
            ),
            (serde_json::json!({"eps": 1, "level": "row"}), "\"level\""),
            (
                serde_json::json!({"eps": 1, "metric": "manhattan"}),
                "\"metric\"",
            ),
        ] {
            let e = MechanismSpec::parse("custext", &params).unwrap_err();
            assert!(e.to_string().contains(msg), "{params}: {e}");
        }
        assert!(CusText::is_stopword("The") && !CusText::is_stopword("fever"));
    }
}
