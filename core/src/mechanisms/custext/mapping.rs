//! `f_map`, CusText's mapping from each token to its output set (Alg. 1):
//! built from the embeddings under a strategy, cached on disk with a
//! checksum, and sampled by the score function (Eq. 9).

use std::path::{Path, PathBuf};

use rand::{Rng, RngCore};
use sha2::{Digest, Sha256};

use super::knn::Space;
use super::{MappingStrategy, Metric};
use crate::embeddings::{euclidean, Embeddings};
use crate::error::{Error, Result};
use crate::progress::{Progress, Reporter, NO_PROGRESS};

/// `f_map`: each row's output set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub(super) k: usize,
    pub(super) strategy: MappingStrategy,
    pub(super) metric: Metric,
    /// For each row, the index of its output set in `sets`.
    set_of: Vec<u32>,
    /// The output sets, rows ordered from the closest to the token that
    /// created the set.
    pub(super) sets: Vec<Vec<u32>>,
}

impl Mapping {
    /// Builds the mapping by Alg. 1 over all rows of `emb` (global input set
    /// = global output set = the vocabulary), using `threads` threads for
    /// the nearest-neighbour searches.
    pub fn build(
        emb: &Embeddings,
        k: usize,
        strategy: MappingStrategy,
        metric: Metric,
        threads: usize,
    ) -> Result<Self> {
        Self::build_with_progress(emb, k, strategy, metric, threads, NO_PROGRESS)
    }

    /// [`Mapping::build`], telling `progress` how far it is, in words of
    /// the vocabulary (`total` is `emb.len()`), about ten times a second
    /// at most and from the calling thread only (see [`crate::progress`]).
    /// For the conservative strategy the first half of the total is the
    /// nearest-neighbour search and the second half the assignment of
    /// output sets. The mapping does not depend on `progress`.
    pub fn build_with_progress(
        emb: &Embeddings,
        k: usize,
        strategy: MappingStrategy,
        metric: Metric,
        threads: usize,
        progress: Progress<'_>,
    ) -> Result<Self> {
        let n = emb.len();
        if k == 0 || k > n {
            return Err(Error::invalid("k", format!("must be in [1, {n}], got {k}")));
        }
        let reporter = Reporter::new(progress, n);
        let space = Space::new(emb, metric);
        let mut set_of = vec![u32::MAX; n];
        let mut sets: Vec<Vec<u32>> = Vec::new();
        match strategy {
            MappingStrategy::Aggressive | MappingStrategy::Balanced => {
                let knn = space.all_knn(k, threads, &|rows| reporter.report(rows))?;
                for (x, near) in knn.into_iter().enumerate() {
                    if strategy == MappingStrategy::Aggressive {
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
            MappingStrategy::Conservative => {
                // The pool shrinks, so searches are sequential; each starts
                // from the token's precomputed 4K nearest and scans the whole
                // remaining pool only when too few of those are left.
                // Every row removes min(k, pool) tokens, so only the first
                // ceil(n / k) rows ever search.
                let wide = (4 * k).min(n);
                let searched = n.div_ceil(k);
                let candidates = space.knn_of_rows(searched, wide, threads, &|rows| {
                    reporter.report(rows * n / searched / 2)
                })?;
                let mut in_pool = vec![true; n];
                let mut pool_left = n;
                for (x, wide_near) in candidates.iter().enumerate() {
                    if pool_left == 0 {
                        break;
                    }
                    crate::cancel::check_every(x, 16)?;
                    reporter.report(n / 2 + (n - pool_left) / 2);
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
        reporter.finish();
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

    pub(super) fn sample(&self, emb: &Embeddings, x: u32, eps: f64, rng: &mut dyn RngCore) -> u32 {
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
    pub fn from_bytes(b: &[u8], strategy: MappingStrategy, metric: Metric) -> Option<Self> {
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
        strategy: MappingStrategy,
        metric: Metric,
        build: bool,
    ) -> Result<Self> {
        Self::load_or_build_with_progress(emb, dir, k, strategy, metric, build, NO_PROGRESS)
    }

    /// [`Mapping::load_or_build`], telling `progress` how the build goes
    /// (as [`Mapping::build_with_progress`] does; nothing when the cache
    /// is used).
    pub fn load_or_build_with_progress(
        emb: &Embeddings,
        dir: &Path,
        k: usize,
        strategy: MappingStrategy,
        metric: Metric,
        build: bool,
        progress: Progress<'_>,
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
        let m = Mapping::build_with_progress(emb, k, strategy, metric, threads, progress)?;
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
    strategy: MappingStrategy,
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
