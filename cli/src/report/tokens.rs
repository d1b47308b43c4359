//! p_0 of single words: the probability that a word mechanism leaves a
//! word unchanged, estimated by drawing it many times (the CusText paper's
//! Table 8 reports it for `happy`, `car`, `she` and `mary`; the SanText
//! paper's N_x is the same quantity).

use anyhow::{bail, Result};
use dptext_core::{Engine, RandomMode};

use super::Config;

/// p_0 of one word under one configuration.
#[derive(Debug, Clone)]
pub struct P0 {
    /// The configuration's plot line.
    pub series: String,
    /// Its point (`eps=3`).
    pub point: String,
    /// The word.
    pub word: String,
    /// Share of draws that returned the word itself.
    pub p0: f64,
    /// Distinct outputs seen (the SanText paper's S_x estimate).
    pub distinct: usize,
}

/// Draws every word `draws` times under every word mechanism of `configs`.
pub fn p0(
    engine: &Engine,
    configs: &[Config],
    words: &[String],
    draws: usize,
    seed: u64,
) -> Result<Vec<P0>> {
    if draws == 0 {
        bail!("--p0-draws must be at least 1");
    }
    let word_configs: Vec<&Config> = configs
        .iter()
        .filter(|c| c.spec.embedding().is_some())
        .collect();
    if word_configs.is_empty() {
        bail!("--p0-words needs a word mechanism (santext, santext_plus or custext)");
    }
    let bar = crate::progress::items(
        (word_configs.len() * words.len() * draws) as u64,
        "p0 of single words",
    );
    let mode = RandomMode::Seeded(seed);
    let mut out = Vec::new();
    for c in word_configs {
        let m = engine.build(&c.spec)?;
        for w in words {
            let mut same = 0;
            let mut seen = std::collections::HashSet::new();
            for d in 0..draws {
                let got = engine
                    .run(
                        m.as_ref(),
                        w,
                        &mode,
                        &[b"dptext eval p0", &(d as u64).to_le_bytes()],
                    )?
                    .text;
                if got == *w {
                    same += 1;
                }
                seen.insert(got);
                bar.inc(1);
            }
            out.push(P0 {
                series: c.series.clone(),
                point: c.point.clone(),
                word: w.clone(),
                p0: same as f64 / draws as f64,
                distinct: seen.len(),
            });
        }
    }
    bar.finish_and_clear();
    Ok(out)
}
