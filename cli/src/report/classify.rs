//! The papers' utility protocol with a linear classifier: train on
//! sanitized values, test on original ones, and compare with the same
//! classifier trained on the originals.
//!
//! The features are the sentence encoder's vectors; the classifier is a
//! ridge (L2-regularised least squares) one-versus-rest linear model with
//! a bias, solved exactly (Cholesky), so it needs no learning rate or
//! epochs and gives the same answer on every run.

use std::collections::BTreeMap;

/// Regularisation strength of the ridge solve.
const LAMBDA: f64 = 1.0;

/// A seeded split of `n` items into (train, test) index lists: about 70%
/// train, at least one of each.
pub fn split(n: usize, seed: u64) -> (Vec<usize>, Vec<usize>) {
    use rand::seq::SliceRandom;
    let mut idx: Vec<usize> = (0..n).collect();
    let mut rng = dptext_core::RandomMode::Seeded(seed).rng_for(&[b"dptext eval split"]);
    idx.shuffle(&mut rng);
    if n < 2 {
        return (idx, Vec::new());
    }
    let train = (((n as f64) * 0.7).round() as usize).clamp(1, n - 1);
    let test = idx.split_off(train);
    (idx, test)
}

/// A trained linear classifier.
#[derive(Debug)]
pub struct Linear {
    classes: Vec<String>,
    /// (dim + 1) x classes, row-major; the last row is the bias.
    weights: Vec<f64>,
    dim: usize,
}

impl Linear {
    /// Trains on `x` (vectors of one width) with labels `y`. `None` when
    /// there are fewer than two classes or no example.
    pub fn train(x: &[&[f32]], y: &[&str]) -> Option<Linear> {
        let classes: Vec<String> = y
            .iter()
            .map(|s| s.to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if classes.len() < 2 || x.is_empty() || x.len() != y.len() {
            return None;
        }
        let class_of: BTreeMap<&str, usize> = classes
            .iter()
            .enumerate()
            .map(|(i, c)| (c.as_str(), i))
            .collect();
        let dim = x[0].len();
        let d = dim + 1;
        let c = classes.len();
        // A = X^T X + lambda I (bias unregularised), B = X^T Y with Y in {-1, 1}.
        let mut a = vec![0.0f64; d * d];
        let mut b = vec![0.0f64; d * c];
        let mut row = vec![0.0f64; d];
        for (xi, yi) in x.iter().zip(y) {
            if xi.len() != dim {
                return None;
            }
            for (r, v) in row.iter_mut().zip(xi.iter()) {
                *r = f64::from(*v);
            }
            row[dim] = 1.0;
            for p in 0..d {
                let rp = row[p];
                if rp == 0.0 {
                    continue;
                }
                for q in p..d {
                    a[p * d + q] += rp * row[q];
                }
            }
            let k = class_of[yi];
            for p in 0..d {
                for j in 0..c {
                    b[p * c + j] += row[p] * if j == k { 1.0 } else { -1.0 };
                }
            }
        }
        for p in 0..d {
            for q in 0..p {
                a[p * d + q] = a[q * d + p];
            }
            if p < dim {
                a[p * d + p] += LAMBDA;
            } else {
                a[p * d + p] += 1e-9;
            }
        }
        let l = cholesky(&a, d)?;
        let mut weights = vec![0.0; d * c];
        let mut col = vec![0.0; d];
        for j in 0..c {
            for p in 0..d {
                col[p] = b[p * c + j];
            }
            let w = solve(&l, d, &col);
            for p in 0..d {
                weights[p * c + j] = w[p];
            }
        }
        Some(Linear {
            classes,
            weights,
            dim,
        })
    }

    /// The predicted class of one vector.
    pub fn predict(&self, x: &[f32]) -> &str {
        let c = self.classes.len();
        let mut best = (f64::NEG_INFINITY, 0);
        for j in 0..c {
            let mut s = self.weights[self.dim * c + j];
            for (p, v) in x.iter().enumerate().take(self.dim) {
                s += f64::from(*v) * self.weights[p * c + j];
            }
            if s > best.0 {
                best = (s, j);
            }
        }
        &self.classes[best.1]
    }

    /// Share of `x` predicted as `y`.
    pub fn accuracy(&self, x: &[&[f32]], y: &[&str]) -> f64 {
        if x.is_empty() {
            return 0.0;
        }
        let right = x
            .iter()
            .zip(y)
            .filter(|(xi, yi)| self.predict(xi) == **yi)
            .count();
        right as f64 / x.len() as f64
    }
}

/// Lower-triangular L with L L^T = a (`None`: not positive definite).
fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            if i == j {
                if s <= 0.0 || !s.is_finite() {
                    return None;
                }
                l[i * n + i] = s.sqrt();
            } else {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    Some(l)
}

/// Solves L L^T w = b.
fn solve(l: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut z = vec![0.0; n];
    for i in 0..n {
        let mut s = b[i];
        for k in 0..i {
            s -= l[i * n + k] * z[k];
        }
        z[i] = s / l[i * n + i];
    }
    let mut w = vec![0.0; n];
    for i in (0..n).rev() {
        let mut s = z[i];
        for k in i + 1..n {
            s -= l[k * n + i] * w[k];
        }
        w[i] = s / l[i * n + i];
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separable_classes_are_learnt_and_noise_is_not() {
        // Two clusters in 3-d, labelled by cluster.
        let mut x: Vec<Vec<f32>> = Vec::new();
        let mut y = Vec::new();
        for i in 0..40 {
            let t = i as f32 / 40.0;
            if i % 2 == 0 {
                x.push(vec![1.0 + t * 0.1, 0.2, -0.1 * t]);
                y.push("a");
            } else {
                x.push(vec![-1.0 + t * 0.1, 0.1, 0.1 * t]);
                y.push("b");
            }
        }
        let xs: Vec<&[f32]> = x.iter().map(Vec::as_slice).collect();
        let m = Linear::train(&xs, &y).unwrap();
        assert_eq!(m.accuracy(&xs, &y), 1.0);
        assert_eq!(m.predict(&[0.9, 0.0, 0.0]), "a");
        // Labels that do not depend on x: about chance on new points.
        let flipped: Vec<&str> = y
            .iter()
            .map(|l| if *l == "a" { "b" } else { "a" })
            .collect();
        assert_eq!(m.accuracy(&xs, &flipped), 0.0);
        assert!(Linear::train(&xs, &vec!["a"; 40]).is_none());
    }

    #[test]
    fn the_split_is_seeded_and_disjoint() {
        let (tr, te) = split(10, 3);
        assert_eq!(tr.len(), 7);
        assert_eq!(te.len(), 3);
        assert_eq!(split(10, 3), (tr.clone(), te.clone()));
        let mut all: Vec<usize> = tr.into_iter().chain(te).collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        let (tr, te) = split(2, 1);
        assert_eq!((tr.len(), te.len()), (1, 1));
    }
}
