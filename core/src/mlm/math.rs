//! Softmax and divergences straight from a row of logits, in one or two
//! passes over the vocabulary.
//!
//! NDD compares two 30,000-entry distributions per masked copy, so the
//! host side of a model call is dominated by exponentials: with `libm`'s
//! `exp` on `f64` it took as long as the model itself. Here the
//! exponential is a polynomial in `f32` (Cephes' `expf`, within 2 ulp on
//! the range that matters) written so that the compiler vectorises it, and
//! sums run in `f32` lanes over blocks of 256 entries that are added in
//! `f64`, which keeps the sums' relative error near 1e-7.
//!
//! Each function takes the raw logits `z` of the row being scored; the
//! reference distribution is given as log-probabilities.

/// Entries per block summed in `f32` lanes before the block total is
/// added in `f64`.
const BLOCK: usize = 256;
/// Lanes of the per-block accumulators.
const LANES: usize = 8;

/// `e^x` for `f32`, within 2 ulp for `x` in [-87, 88]; 0 below (no
/// subnormals, and `-inf` gives 0), larger ones saturate near 1.7e38, NaN
/// stays NaN.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding 1.5 * 2^23 rounds to the nearest integer and leaves it in
    // the low mantissa bits.
    const MAGIC: f32 = 12_582_912.0;
    let tiny = x < -87.0;
    let x = x.clamp(-87.0, 88.0);
    let t = x * LOG2E + MAGIC;
    let n = t - MAGIC;
    let ni = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_2e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let e = p * r * r + r + 1.0;
    let y = e * f32::from_bits(((ni + 127) << 23) as u32);
    if tiny {
        0.0
    } else {
        y
    }
}

/// The largest entry (`-inf` for an empty slice).
pub fn max(z: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut it = z.chunks_exact(LANES);
    for c in &mut it {
        for l in 0..LANES {
            acc[l] = acc[l].max(c[l]);
        }
    }
    it.remainder().iter().fold(
        acc.iter().copied().fold(f32::NEG_INFINITY, f32::max),
        |a, &b| a.max(b),
    )
}

/// Sums `f(i)` over `0..n` in `f32` lanes per block, blocks added in `f64`.
#[inline(always)]
fn block_sum(n: usize, mut f: impl FnMut(usize) -> f32) -> f64 {
    let mut total = 0.0f64;
    let mut start = 0;
    while start < n {
        let end = (start + BLOCK).min(n);
        let mut acc = [0.0f32; LANES];
        let mut i = start;
        while i + LANES <= end {
            for (l, a) in acc.iter_mut().enumerate() {
                *a += f(i + l);
            }
            i += LANES;
        }
        let mut block: f64 = acc.iter().map(|&a| f64::from(a)).sum();
        while i < end {
            block += f64::from(f(i));
            i += 1;
        }
        total += block;
        start = end;
    }
    total
}

/// Writes `e^(z - max)` into `e` (resized to `z`) and returns `(max, sum)`.
fn shifted_exp(z: &[f32], e: &mut Vec<f32>) -> (f32, f64) {
    let m = max(z);
    e.clear();
    e.resize(z.len(), 0.0);
    for (o, &x) in e.iter_mut().zip(z) {
        *o = exp_f32(x - m);
    }
    (m, block_sum(e.len(), |i| e[i]))
}

/// Appends `log_softmax(z)` to `out`.
pub fn push_log_softmax(z: &[f32], out: &mut Vec<f32>, scratch: &mut Vec<f32>) {
    let (m, s) = shifted_exp(z, scratch);
    let lz = (s.ln() as f32) + m;
    out.extend(z.iter().map(|&x| x - lz));
}

/// `KL(softmax(z) || q)` for `q` given as log-probabilities; never
/// negative. `scratch` is reused between calls.
pub fn kl(z: &[f32], log_q: &[f32], scratch: &mut Vec<f32>) -> f64 {
    debug_assert_eq!(z.len(), log_q.len());
    let (m, s) = shifted_exp(z, scratch);
    let lz = (s.ln() as f32) + m;
    let inv = (1.0 / s) as f32;
    let e = &scratch[..];
    let n = z.len().min(log_q.len());
    // p * (log p - log q), with p = e / s and log p = z - lz; entries with
    // p = 0 add nothing (also where z = -inf).
    let kl = block_sum(n, |i| {
        let t = e[i] * inv * ((z[i] - lz) - log_q[i]);
        if e[i] > 0.0 {
            t
        } else {
            0.0
        }
    });
    // NaN logits (a broken model) must not look like a perfect fit.
    if kl.is_nan() {
        f64::INFINITY
    } else {
        kl.max(0.0)
    }
}

/// The Hellinger distance between `softmax(z)` and `q` (log-probabilities),
/// in [0, 1].
pub fn hellinger(z: &[f32], log_q: &[f32], scratch: &mut Vec<f32>) -> f64 {
    debug_assert_eq!(z.len(), log_q.len());
    let (_, s) = shifted_exp(z, scratch);
    let inv_sqrt = (1.0 / s.sqrt()) as f32;
    let e = &scratch[..];
    let n = z.len().min(log_q.len());
    // H^2 = 1/2 sum (sqrt p - sqrt q)^2, which avoids 1 - sum sqrt(p q)
    // cancelling when the distributions are close.
    let h2 = 0.5
        * block_sum(n, |i| {
            let d = e[i].sqrt() * inv_sqrt - exp_f32(0.5 * log_q[i]);
            d * d
        });
    // NaN logits (a broken model): the largest distance, not a fit.
    if h2.is_nan() {
        1.0
    } else {
        h2.clamp(0.0, 1.0).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_a_few_ulp_of_libm() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let want = f64::from(x).exp();
            let got = f64::from(exp_f32(x));
            worst = worst.max(((got - want) / want).abs());
            x += 0.0137;
        }
        // 2 ulp of f32 is 2.4e-7.
        assert!(worst < 2.4e-7, "worst relative error {worst:e}");
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(-1000.0), 0.0);
    }

    /// The `f64` textbook formulas the fast ones must match.
    fn reference(z: &[f32], log_q: &[f32]) -> (f64, f64) {
        let m = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let s: f64 = z.iter().map(|&x| f64::from(x - m).exp()).sum();
        let lp: Vec<f64> = z.iter().map(|&x| f64::from(x - m) - s.ln()).collect();
        let kl: f64 = lp
            .iter()
            .zip(log_q)
            .map(|(&p, &q)| p.exp() * (p - f64::from(q)))
            .sum();
        let bc: f64 = lp
            .iter()
            .zip(log_q)
            .map(|(&p, &q)| (0.5 * (p + f64::from(q))).exp())
            .sum();
        (kl.max(0.0), (1.0 - bc.min(1.0)).max(0.0).sqrt())
    }

    #[test]
    fn divergences_match_f64_formulas_on_vocabulary_sized_rows() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        for spread in [0.5f32, 3.0, 12.0] {
            let v = 30_522;
            let z: Vec<f32> = (0..v).map(|_| rng.random::<f32>() * spread * 4.0).collect();
            let zq: Vec<f32> = z
                .iter()
                .map(|&x| x + (rng.random::<f32>() - 0.5) * spread)
                .collect();
            let mut scratch = Vec::new();
            let mut log_q = Vec::new();
            push_log_softmax(&zq, &mut log_q, &mut scratch);
            let (want_kl, want_h) = reference(&z, &log_q);
            let got_kl = kl(&z, &log_q, &mut scratch);
            let got_h = hellinger(&z, &log_q, &mut scratch);
            // Tolerance: 1e-4 relative for KL, whose terms take the
            // difference of two f32 log-probabilities (as the log-probs are
            // stored); 1e-5 for Hellinger.
            assert!(
                (got_kl - want_kl).abs() <= 1e-4 * want_kl.max(1e-3),
                "kl {got_kl} vs {want_kl} (spread {spread})"
            );
            assert!(
                (got_h - want_h).abs() <= 1e-5 * want_h.max(1e-3),
                "hellinger {got_h} vs {want_h} (spread {spread})"
            );
            // Identical distributions: 0 (up to rounding).
            let mut log_p = Vec::new();
            push_log_softmax(&z, &mut log_p, &mut scratch);
            assert!(kl(&z, &log_p, &mut scratch) < 1e-6);
            assert!(hellinger(&z, &log_p, &mut scratch) < 1e-3);
        }
    }

    #[test]
    fn infinite_and_nan_logits_are_handled() {
        let mut scratch = Vec::new();
        let z = vec![2.0f32, 1.0, f32::NEG_INFINITY, 0.5];
        let mut log_q = Vec::new();
        push_log_softmax(&[1.0, 2.0, -3.0, 0.5], &mut log_q, &mut scratch);
        // -inf logit: probability 0, the other terms count.
        let got = kl(&z, &log_q, &mut scratch);
        let finite: Vec<f32> = vec![2.0, 1.0, -200.0, 0.5];
        let want = kl(&finite, &log_q, &mut scratch);
        assert!(got > 0.1 && (got - want).abs() < 1e-6, "{got} vs {want}");
        // The reference has -inf where the row has mass: infinite.
        let mut lq_inf = log_q.clone();
        lq_inf[0] = f32::NEG_INFINITY;
        assert_eq!(kl(&z, &lq_inf, &mut scratch), f64::INFINITY);
        // NaN logits: not a perfect fit.
        let nan = vec![f32::NAN, 1.0, 0.0, 0.5];
        assert_eq!(kl(&nan, &log_q, &mut scratch), f64::INFINITY);
        assert_eq!(hellinger(&nan, &log_q, &mut scratch), 1.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert!(exp_f32(f32::NAN).is_nan());
    }

    #[test]
    fn log_softmax_sums_to_one() {
        let z: Vec<f32> = (0..1000).map(|i| (i % 37) as f32 * 0.3 - 4.0).collect();
        let mut out = Vec::new();
        push_log_softmax(&z, &mut out, &mut Vec::new());
        let total: f64 = out.iter().map(|&l| f64::from(l).exp()).sum();
        assert!((total - 1.0).abs() < 1e-6, "{total}");
    }
}
