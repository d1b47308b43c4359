//! Exact K-nearest-neighbour search over the vocabulary for Alg. 1, by
//! Euclidean distance or cosine similarity, spread over threads.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::Metric;
use crate::embeddings::Embeddings;
use crate::error::Result;

/// The vectors prepared for one metric's nearest-neighbour search.
pub(super) struct Space<'a> {
    emb: &'a Embeddings,
    metric: Metric,
    /// Unit vectors (cosine only).
    unit: Vec<f32>,
}

impl<'a> Space<'a> {
    pub(super) fn new(emb: &'a Embeddings, metric: Metric) -> Self {
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
    pub(super) fn key(&self, x: u32, y: u32) -> f32 {
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
    pub(super) fn knn(&self, x: u32, k: usize, keep: impl Fn(u32) -> bool) -> Vec<u32> {
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

    /// The `k` nearest of every row, on `threads` threads, telling
    /// `on_rows` how many rows are done (see [`Space::knn_of_rows`]).
    pub(super) fn all_knn(
        &self,
        k: usize,
        threads: usize,
        on_rows: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<Vec<u32>>> {
        self.knn_of_rows(self.emb.len(), k, threads, on_rows)
    }

    /// The `k` nearest of rows `0..n`, on `threads` threads (the calling
    /// thread one of them). Rows are taken in blocks from a shared counter;
    /// the calling thread asks the cancellation hook between its blocks
    /// and stops the others when it says stop (or unwinds). Between its
    /// blocks it also tells `on_rows` how many rows all threads have
    /// finished (it should be cheap: a rate-limited progress report).
    pub(super) fn knn_of_rows(
        &self,
        n: usize,
        k: usize,
        threads: usize,
        on_rows: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<Vec<u32>>> {
        const BLOCK: usize = 16;
        let threads = threads.clamp(1, 64);
        let next = AtomicUsize::new(0);
        let finished = AtomicUsize::new(0);
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
                    on_rows(finished.load(Ordering::Relaxed));
                }
                let start = next.fetch_add(BLOCK, Ordering::Relaxed);
                if start >= n || stop.load(Ordering::Relaxed) {
                    return Ok(done);
                }
                let end = (start + BLOCK).min(n);
                let rows = (start..end)
                    .map(|x| self.knn(x as u32, k, |_| true))
                    .collect();
                done.push((start, rows));
                finished.fetch_add(end - start, Ordering::Relaxed);
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
