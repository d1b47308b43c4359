//! Exact sampling from the distance-based exponential mechanism (SanText Eq. 1)
//! without a |V| x |V| matrix.
//!
//! For an input token `x` and an output set `U` (a contiguous range of
//! frequency-ordered rows), `Pr[y] = exp(-eps/2 * d(x, y)) / Z`. The first
//! time `(x, eps)` is seen, one pass over `U` computes the exact normaliser
//! `Z`, the `TOP` most likely outputs with their cumulative weights, and the
//! largest weight among the rest. That table (about 24 KB) is cached in a
//! byte-weighted `moka` cache. A draw then picks the top part with its exact
//! mass by binary search, or else samples the remainder exactly by rejection
//! (uniform proposal over `U`, top members rejected, acceptance
//! `w(y) / max_rest`), so no output loses its probability: the support is the
//! whole of `U`.
//!
//! Weights are shifted by the smallest distance (`exp(-eps/2 * (d - d_min))`),
//! which leaves the distribution unchanged and keeps `Z >= 1` even for huge eps.

use std::ops::Range;
use std::sync::Arc;

use moka::sync::Cache;
use rand::{Rng, RngCore};

use crate::embeddings::Embeddings;

/// How many of the most likely outputs a token's table keeps.
pub(crate) const TOP: usize = 2048;

/// The cached summary of one token's output distribution.
#[derive(Debug)]
struct TokenTable {
    /// Top outputs, most likely first.
    top: Vec<u32>,
    /// Cumulative weights of `top`.
    cum: Vec<f64>,
    /// The last member of `top` in the (distance, row) order: a row is in
    /// `top` exactly when its (distance, row) pair is not greater.
    boundary: (f32, u32),
    /// Sum of all weights over the output set.
    z: f64,
    /// Largest weight outside `top` (0 when `top` is the whole set).
    rest_max: f64,
    /// Smallest distance from the input to the output set (the shift).
    d_min: f32,
}

impl TokenTable {
    fn bytes(&self) -> u32 {
        (self.top.len() * (4 + 8) + 96) as u32
    }
}

/// Samples `Pr[y] ∝ exp(-eps/2 * d(x, y))` over a fixed output set.
pub struct ExpSampler {
    emb: Arc<Embeddings>,
    set: Range<u32>,
    cache: Cache<(u32, u64), Arc<TokenTable>>,
}

impl std::fmt::Debug for ExpSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpSampler")
            .field("embedding", &self.emb.name())
            .field("set", &self.set)
            .field("cached_tables", &self.cache.entry_count())
            .finish()
    }
}

impl ExpSampler {
    /// A sampler whose outputs are the rows in `set`, caching per-token
    /// tables up to `cache_bytes` bytes.
    pub fn new(emb: Arc<Embeddings>, set: Range<u32>, cache_bytes: u64) -> Self {
        debug_assert!(set.start < set.end && set.end as usize <= emb.len());
        let cache = Cache::builder()
            .weigher(|_k: &(u32, u64), v: &Arc<TokenTable>| v.bytes())
            .max_capacity(cache_bytes.max(1 << 16))
            .build();
        ExpSampler { emb, set, cache }
    }

    /// The output set (rows of the embedding).
    pub fn output_set(&self) -> Range<u32> {
        self.set.clone()
    }

    /// The embedding set behind the sampler.
    pub fn embeddings(&self) -> &Arc<Embeddings> {
        &self.emb
    }

    fn weight(eps: f64, d: f32, d_min: f32) -> f64 {
        (-(eps / 2.0) * f64::from(d - d_min)).exp()
    }

    fn build(&self, x: u32, eps: f64) -> TokenTable {
        let rows = self.emb.rows();
        let xv = rows.get(x);
        let dist: Vec<f32> = self
            .set
            .clone()
            .map(|y| crate::embeddings::euclidean(xv, rows.get(y)))
            .collect();
        let d_min = dist.iter().copied().fold(f32::INFINITY, f32::min);
        let z: f64 = dist.iter().map(|&d| Self::weight(eps, d, d_min)).sum();
        let mut order: Vec<u32> = (0..dist.len() as u32).collect();
        let by_dist = |a: &u32, b: &u32| {
            dist[*a as usize]
                .total_cmp(&dist[*b as usize])
                .then(a.cmp(b))
        };
        let k = TOP.min(order.len());
        if k < order.len() {
            order.select_nth_unstable_by(k, by_dist);
        }
        let rest_max = order
            .get(k)
            .map_or(0.0, |&i| Self::weight(eps, dist[i as usize], d_min));
        order.truncate(k);
        order.sort_unstable_by(by_dist);
        let mut acc = 0.0;
        let cum = order
            .iter()
            .map(|&i| {
                acc += Self::weight(eps, dist[i as usize], d_min);
                acc
            })
            .collect();
        let boundary = order.last().map_or((f32::NEG_INFINITY, 0), |&i| {
            (dist[i as usize], i + self.set.start)
        });
        let top: Vec<u32> = order.iter().map(|&i| i + self.set.start).collect();
        TokenTable {
            top,
            cum,
            boundary,
            z,
            rest_max,
            d_min,
        }
    }

    fn table(&self, x: u32, eps: f64) -> Arc<TokenTable> {
        self.cache
            .get_with((x, eps.to_bits()), || Arc::new(self.build(x, eps)))
    }

    /// Draws one output for input row `x` at privacy parameter `eps >= 0`.
    pub fn sample(&self, x: u32, eps: f64, rng: &mut dyn RngCore) -> u32 {
        let t = self.table(x, eps);
        let u = rng.random::<f64>() * t.z;
        let top_mass = t.cum.last().copied().unwrap_or(0.0);
        if u < top_mass || t.rest_max == 0.0 {
            let i = t.cum.partition_point(|&c| c <= u).min(t.top.len() - 1);
            return t.top[i];
        }
        let rows = self.emb.rows();
        loop {
            let y = rng.random_range(self.set.clone());
            let d = rows.distance(x, y);
            if (d, y) <= t.boundary {
                continue; // in `top`: its mass was accounted for above
            }
            let w = Self::weight(eps, d, t.d_min);
            if rng.random::<f64>() * t.rest_max < w {
                return y;
            }
        }
    }

    /// Draws uniformly from the output set (out-of-vocabulary inputs).
    pub fn uniform(&self, rng: &mut dyn RngCore) -> u32 {
        rng.random_range(self.set.clone())
    }

    /// The exact probability of every output (index `i` is row
    /// `set.start + i`). One pass over the set; used by tests and audits.
    pub fn probabilities(&self, x: u32, eps: f64) -> Vec<f64> {
        let t = self.table(x, eps);
        let rows = self.emb.rows();
        self.set
            .clone()
            .map(|y| Self::weight(eps, rows.distance(x, y), t.d_min) / t.z)
            .collect()
    }

    /// The share of the probability mass held by the cached top outputs of
    /// `x` (the rest is drawn by rejection); tests use it to make sure both
    /// paths are exercised.
    pub fn top_mass(&self, x: u32, eps: f64) -> f64 {
        let t = self.table(x, eps);
        t.cum.last().copied().unwrap_or(0.0) / t.z
    }

    /// Number of cached token tables (for metrics).
    pub fn cached_tables(&self) -> u64 {
        self.cache.run_pending_tasks();
        self.cache.entry_count()
    }
}
