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

/// The cache of token tables shared by every sampler of a vocabulary,
/// keyed by (first row of the output set, input row, eps bits) and bounded
/// by bytes.
pub(crate) type TableCache = Cache<(u32, u32, u64), Arc<TokenTable>>;

/// Builds a [`TableCache`] holding at most `bytes` bytes of tables.
pub(crate) fn table_cache(bytes: u64) -> TableCache {
    Cache::builder()
        .weigher(|_k: &(u32, u32, u64), v: &Arc<TokenTable>| v.bytes())
        .max_capacity(bytes.max(1 << 16))
        .build()
}

/// The cached summary of one token's output distribution.
#[derive(Debug)]
pub(crate) struct TokenTable {
    /// Top outputs, most likely first.
    top: Vec<u32>,
    /// Cumulative weights of `top`.
    cum: Vec<f64>,
    /// The last member of `top` in the (distance, row) order: a row is in
    /// `top` exactly when its (distance, row) pair is not greater.
    boundary: (f32, u32),
    /// Sum of the weights of `top`.
    top_mass: f64,
    /// Sum of all weights over the output set: `top_mass` plus the rest's
    /// weights summed in the same pass, so that the rest is drawn with
    /// probability `(z - top_mass) / z` up to one rounding.
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
    cache: TableCache,
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
    /// A sampler whose outputs are the rows in `set` (non-empty), keeping
    /// its per-token tables in `cache`.
    pub(crate) fn new(emb: Arc<Embeddings>, set: Range<u32>, cache: TableCache) -> Self {
        debug_assert!(set.start < set.end && set.end as usize <= emb.len());
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
        let rest_mass: f64 = order[k..]
            .iter()
            .map(|&i| Self::weight(eps, dist[i as usize], d_min))
            .sum();
        order.truncate(k);
        order.sort_unstable_by(by_dist);
        let mut acc = 0.0;
        let cum: Vec<f64> = order
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
        let top_mass = cum.last().copied().unwrap_or(0.0);
        TokenTable {
            top,
            cum,
            top_mass,
            z: top_mass + rest_mass,
            boundary,
            rest_max,
            d_min,
        }
    }

    fn table(&self, x: u32, eps: f64) -> Arc<TokenTable> {
        self.cache.get_with((self.set.start, x, eps.to_bits()), || {
            Arc::new(self.build(x, eps))
        })
    }

    /// Draws one output for input row `x` at privacy parameter `eps >= 0`.
    pub fn sample(&self, x: u32, eps: f64, rng: &mut dyn RngCore) -> u32 {
        let t = self.table(x, eps);
        let u = rng.random::<f64>() * t.z;
        if u < t.top_mass {
            // The first entry whose cumulative weight exceeds u; it exists
            // because u < top_mass, and it has a positive weight.
            let i = t.cum.partition_point(|&c| c <= u).min(t.top.len() - 1);
            return t.top[i];
        }
        // Reached with probability rest_mass / z > 0 only, so rest_max > 0
        // and the loop ends: every rest row is accepted with positive
        // probability.
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
        t.top_mass / t.z
    }
}
