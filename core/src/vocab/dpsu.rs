//! Differentially private set union over the words of a column.
//!
//! The algorithm is the thresholded baseline that Gopi, Gulhane, Kulkarni,
//! Shen, Shokouhi and Yekhanin, *Differentially Private Set Union* (ICML
//! 2020), analyse in Section 3 (after Korolova, Kenthapadi, Mishra and
//! Ntoulas, *Releasing Search Queries and Clicks Privately*, WWW 2009):
//!
//! 1. every value (one per row; a row is the unit of privacy) contributes
//!    the set of its distinct words that the embedding knows, so a word
//!    repeated 1,000 times in a value counts once;
//! 2. a value with more than `k = max_words_per_value` such words keeps
//!    `k` of them, chosen by a pseudo-random order seeded from the value's
//!    own words (a function of the value alone, so the bound holds for any
//!    neighbour, and the same value always contributes the same words);
//! 3. each word's count (the number of values that contributed it) gets
//!    independent noise: Laplace with scale `b = k / eps` (one value moves
//!    at most `k` counts by 1: L1 sensitivity `k`), or Gaussian with the
//!    smallest `sigma` for which the analytic Gaussian mechanism (Balle and
//!    Wang, ICML 2018, Theorem 8) with L2 sensitivity `sqrt(k)` is
//!    `(eps, delta / 2)`-DP;
//! 4. a word is released when its noisy count exceeds the threshold `T`.
//!
//! The threshold covers the words only one neighbour has. Adding a value
//! brings at most `k` new words, each with count 1; all of them must stay
//! below `T` except with probability `delta` (Laplace) or `delta / 2`
//! (Gaussian, the other half going to the noise):
//!
//! - Laplace: `T = 1 + b * ln(1 / (2 * (1 - (1 - delta)^(1/k))))`, since a
//!   count of 1 passes with `Pr[Lap(b) > T - 1] = exp(-(T - 1) / b) / 2`;
//! - Gaussian: `T = 1 + sigma * Phi^-1((1 - delta / 2)^(1/k))`.
//!
//! These are Gopi et al.'s `rho_Lap` and `rho_Gauss` for weights that are
//! all 1 (their counts scaled by `k`), at the worst case `t = k`. The noisy
//! counts of words both neighbours have are the Laplace (or Gaussian)
//! mechanism on a vector of L1 sensitivity `k` (L2 `sqrt(k)`), so the whole
//! release, set and noisy counts, is `(eps, delta)`-DP per value.
//!
//! Only words the embedding knows are counted (a public filter applied to
//! each value before the bound), so no contribution is spent on a word
//! that could never be sampled.

use std::collections::HashMap;

use rand::{Rng, RngCore, SeedableRng};
use sha2::{Digest, Sha256};

use crate::embeddings::{Embeddings, VocabKind};
use crate::error::{Error, Result};
use crate::mechanisms::check_eps;
use crate::rng::RandomMode;
use crate::text::Segmented;

/// Default bound on the distinct words one value contributes.
pub const DEFAULT_MAX_WORDS_PER_VALUE: usize = 32;
/// Largest accepted bound on the words one value contributes.
pub const MAX_WORDS_PER_VALUE: usize = 100_000;

/// The noise added to the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Noise {
    /// Laplace noise, scale `k / eps`: pure eps for the counts, delta for
    /// the threshold alone.
    Laplace,
    /// Gaussian noise (analytic Gaussian mechanism): smaller noise for
    /// large `k`, delta split between the noise and the threshold.
    Gaussian,
}

impl Noise {
    /// The name used in parameters and assets.
    pub fn name(self) -> &'static str {
        match self {
            Noise::Laplace => "laplace",
            Noise::Gaussian => "gaussian",
        }
    }
}

impl std::str::FromStr for Noise {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "laplace" => Ok(Noise::Laplace),
            "gaussian" => Ok(Noise::Gaussian),
            other => Err(Error::invalid(
                "noise",
                format!("\"{other}\" is not one of 'laplace', 'gaussian'"),
            )),
        }
    }
}

/// The parameters of one release.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReleaseParams {
    /// Privacy parameter (> 0).
    pub eps: f64,
    /// Probability bound of the threshold (and of the Gaussian noise), in
    /// (0, 0.5); choose it below 1 / (number of values).
    pub delta: f64,
    /// Distinct words one value contributes at most (`k`).
    pub max_words_per_value: usize,
    /// The noise.
    pub noise: Noise,
}

impl ReleaseParams {
    /// Checks every parameter's domain.
    ///
    /// ```
    /// use dptext_core::vocab::{Noise, ReleaseParams};
    /// let p = ReleaseParams { eps: 1.0, delta: 1e-6, max_words_per_value: 32, noise: Noise::Laplace };
    /// assert!(p.validate().is_ok());
    /// assert!(ReleaseParams { delta: 0.0, ..p }.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<()> {
        check_eps(self.eps)?;
        if !(self.delta > 0.0 && self.delta < 0.5) {
            return Err(Error::invalid(
                "delta",
                format!(
                    "must be in (0, 0.5), got {}; choose it below 1 / (number of values), e.g. 1e-6",
                    self.delta
                ),
            ));
        }
        if !(1..=MAX_WORDS_PER_VALUE).contains(&self.max_words_per_value) {
            return Err(Error::invalid(
                "max_words_per_value",
                format!(
                    "must be in [1, {MAX_WORDS_PER_VALUE}], got {}",
                    self.max_words_per_value
                ),
            ));
        }
        Ok(())
    }

    /// The noise scale: Laplace `b = k / eps`, or the Gaussian's `sigma`.
    pub fn scale(&self) -> f64 {
        let k = self.max_words_per_value as f64;
        match self.noise {
            Noise::Laplace => k / self.eps,
            Noise::Gaussian => gaussian_sigma(self.eps, self.delta / 2.0, k.sqrt()),
        }
    }

    /// The threshold a noisy count must exceed (module docs).
    pub fn threshold(&self) -> f64 {
        let k = self.max_words_per_value as f64;
        match self.noise {
            Noise::Laplace => {
                // 1 - (1 - delta)^(1/k), without cancellation for tiny delta.
                let p = -((-self.delta).ln_1p() / k).exp_m1();
                1.0 + self.scale() * (1.0 / (2.0 * p)).ln()
            }
            Noise::Gaussian => {
                // Phi^-1(q) with q = (1 - delta/2)^(1/k): the upper-tail
                // quantile of 1 - q.
                let tail = -((-self.delta / 2.0).ln_1p() / k).exp_m1();
                1.0 + self.scale() * upper_quantile(tail)
            }
        }
    }

    /// The canonical parameter string (part of the random stream's context).
    pub fn canonical(&self) -> String {
        format!(
            "eps={:?};delta={:?};max_words_per_value={};noise={}",
            self.eps,
            self.delta,
            self.max_words_per_value,
            self.noise.name()
        )
    }

    /// One draw of the noise.
    pub fn draw(&self, rng: &mut dyn RngCore) -> f64 {
        let s = self.scale();
        match self.noise {
            Noise::Laplace => {
                // Inverse CDF on u in (-1/2, 1/2); u = -1/2 has probability 2^-53.
                let u: f64 = rng.random::<f64>() - 0.5;
                -s * u.signum() * (1.0 - 2.0 * u.abs()).max(f64::MIN_POSITIVE).ln()
            }
            Noise::Gaussian => {
                // Box-Muller; 1 - u is in (0, 1].
                let u1: f64 = 1.0 - rng.random::<f64>();
                let u2: f64 = rng.random::<f64>();
                s * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
            }
        }
    }
}

/// What a release produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Release {
    /// The released words, largest noisy count first (ties by embedding
    /// row): the order is the column's own frequency order, which SanText+
    /// uses for its sensitive set.
    pub words: Vec<String>,
    /// The threshold that was applied.
    pub threshold: f64,
    /// The noise scale (Laplace `b` or Gaussian `sigma`).
    pub scale: f64,
    /// Values read (exact: for the builder, not released).
    pub values: u64,
    /// Values that had more than `k` known words and were cut to `k`
    /// (exact: for the builder, not released).
    pub truncated: u64,
    /// Distinct known words counted (exact: for the builder, not released).
    pub candidates: usize,
}

/// Counts the distinct known words of each value, one value at a time;
/// [`Counter::finish`] adds the noise and applies the threshold.
#[derive(Debug)]
pub struct Counter<'e> {
    emb: &'e Embeddings,
    params: ReleaseParams,
    counts: HashMap<u32, u64>,
    values: u64,
    truncated: u64,
    ids: Vec<u32>,
}

impl<'e> Counter<'e> {
    /// A counter over the words of `emb` (a word embedding: GloVe).
    pub fn new(emb: &'e Embeddings, params: ReleaseParams) -> Result<Self> {
        params.validate()?;
        if emb.kind() != VocabKind::Word {
            return Err(Error::invalid(
                "embedding",
                "a vocabulary is drawn over a word embedding ('glove'), not WordPiece pieces",
            ));
        }
        Ok(Counter {
            emb,
            params,
            counts: HashMap::new(),
            values: 0,
            truncated: 0,
            ids: Vec::new(),
        })
    }

    /// Adds one value: each distinct known word once, at most `k` of them.
    pub fn add(&mut self, value: &str) {
        self.values += 1;
        let seg = Segmented::new(value);
        self.ids.clear();
        for w in seg.words() {
            let word = seg.word_str(w);
            let id = self.emb.id(word).or_else(|| {
                word.chars()
                    .any(char::is_uppercase)
                    .then(|| self.emb.id(&word.to_lowercase()))
                    .flatten()
            });
            self.ids.extend(id);
        }
        self.ids.sort_unstable();
        self.ids.dedup();
        let k = self.params.max_words_per_value;
        if self.ids.len() > k {
            self.truncated += 1;
            // A pseudo-random k-subset seeded by the value's own word set.
            let mut h = Sha256::new();
            for id in &self.ids {
                h.update(id.to_le_bytes());
            }
            let seed: [u8; 32] = h.finalize().into();
            let mut rng = rand_chacha::ChaCha8Rng::from_seed(seed);
            for i in 0..k {
                let j = rng.random_range(i..self.ids.len());
                self.ids.swap(i, j);
            }
            self.ids.truncate(k);
        }
        for &id in &self.ids {
            *self.counts.entry(id).or_insert(0) += 1;
        }
    }

    /// Values added so far.
    pub fn values(&self) -> u64 {
        self.values
    }

    /// Adds the noise and keeps the words over the threshold. The random
    /// stream comes from `mode` and a digest of the counts, so in the
    /// seeded and keyed modes the same counts give the same release, and
    /// different counts never share their noise.
    pub fn finish(self, mode: &RandomMode) -> Result<Release> {
        let mut ids: Vec<(u32, u64)> = self.counts.into_iter().collect();
        ids.sort_unstable();
        let mut h = Sha256::new();
        h.update(self.emb.name().as_bytes());
        for (id, c) in &ids {
            h.update(id.to_le_bytes());
            h.update(c.to_le_bytes());
        }
        let digest = h.finalize();
        let canonical = self.params.canonical();
        let mut rng = mode.rng_for(&[b"dptext vocabulary", canonical.as_bytes(), &digest]);
        let threshold = self.params.threshold();
        let mut released: Vec<(f64, u32)> = Vec::new();
        for (i, &(id, c)) in ids.iter().enumerate() {
            crate::cancel::check_every(i, 4096)?;
            let noisy = c as f64 + self.params.draw(&mut rng);
            if noisy > threshold {
                released.push((noisy, id));
            }
        }
        released.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        Ok(Release {
            words: released
                .iter()
                .map(|&(_, id)| self.emb.token(id).to_string())
                .collect(),
            threshold,
            scale: self.params.scale(),
            values: self.values,
            truncated: self.truncated,
            candidates: ids.len(),
        })
    }
}

/// `ln Phi(x)`, the log of the standard normal CDF, from the complementary
/// error function of Numerical Recipes (`erfcc`, relative error below
/// 1.2e-7 everywhere, in log form so that deep tails do not underflow).
fn ln_phi(x: f64) -> f64 {
    // Phi(x) = erfc(-x / sqrt 2) / 2.
    let z = -x / std::f64::consts::SQRT_2;
    let ln_erfc = |z: f64| -> f64 {
        // z >= 0.
        let t = 1.0 / (1.0 + 0.5 * z);
        let poly = -z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77))))))));
        t.ln() + poly
    };
    let erfc = if z >= 0.0 {
        ln_erfc(z)
    } else {
        (2.0 - ln_erfc(-z).exp()).ln()
    };
    erfc - std::f64::consts::LN_2
}

/// The `x` with `Pr[N(0, 1) > x] = p`, for `p` in (0, 1/2], by bisection.
fn upper_quantile(p: f64) -> f64 {
    let target = p.ln();
    let (mut lo, mut hi) = (0.0f64, 40.0f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if ln_phi(-mid) > target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// The smallest `sigma` (to 1e-9 relative) for which the Gaussian mechanism
/// with L2 sensitivity `sens` is `(eps, delta)`-DP, by Balle and Wang's
/// exact condition `Phi(s/2σ - εσ/s) - e^ε Phi(-s/2σ - εσ/s) <= delta`.
fn gaussian_sigma(eps: f64, delta: f64, sens: f64) -> f64 {
    let delta_of = |sigma: f64| {
        let a = sens / (2.0 * sigma);
        let b = eps * sigma / sens;
        ln_phi(a - b).exp() - (eps + ln_phi(-a - b)).exp()
    };
    let mut hi = sens;
    while delta_of(hi) > delta && hi < 1e12 {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    while hi - lo > 1e-9 * hi {
        let mid = (lo + hi) / 2.0;
        if delta_of(mid) > delta {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

#[cfg(test)]
#[path = "dpsu_tests.rs"]
mod tests;
