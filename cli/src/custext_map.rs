//! `dptext custext-map`: build (or check) a cached CusText mapping.

use std::path::Path;

use anyhow::Result;
use dptext_core::mechanisms::{custext, CusTextSpec, MechanismSpec, Words};
use dptext_core::Engine;

use crate::engine_flags::EngineFlags;
use crate::progress;

/// Which mapping to build.
#[derive(clap::Args)]
pub struct CustextMapArgs {
    /// Output set size K.
    #[arg(long, default_value_t = 20)]
    k: i64,
    /// aggressive, balanced or conservative.
    #[arg(long, default_value = "balanced")]
    mapping: String,
    /// euclidean or cosine.
    #[arg(long, default_value = "euclidean")]
    metric: String,
    /// glove or wordpiece.
    #[arg(long, default_value = "glove")]
    embedding: String,
    #[command(flatten)]
    pub(crate) engine: EngineFlags,
}

/// Loads or builds the mapping and prints one line about it.
pub fn run(dir: &Path, a: &CustextMapArgs) -> Result<()> {
    let spec = MechanismSpec::custext(
        1.0,
        a.k,
        &a.mapping,
        &a.metric,
        "record",
        true,
        &a.embedding,
    )?;
    let MechanismSpec::CusText(CusTextSpec {
        k,
        mapping,
        metric,
        words: Words { embedding, .. },
        ..
    }) = spec
    else {
        anyhow::bail!("not a custext specification");
    };
    let engine = Engine::new(a.engine.config(dir));
    let vocab = engine.vocabulary(embedding)?;
    let emb = vocab.embeddings();
    let cache = dir.join("custext");
    let file = custext::cache_file(&cache, emb, k, mapping, metric);
    let started = std::time::Instant::now();
    // A bar over the vocabulary's words (about 40 s for GloVe 50k on 2
    // cores); nothing is drawn when the cached mapping is read.
    let bar = progress::items(
        emb.len() as u64,
        &format!("CusText mapping of {} (k {k})", emb.name()),
    );
    let m = custext::Mapping::load_or_build_with_progress(
        emb,
        &cache,
        k,
        mapping,
        metric,
        true,
        &|done, _| bar.set_position(done as u64),
    );
    bar.finish_and_clear();
    let m = m?;
    outln!(
        "{}: {} tokens, k {k}, {} mapping, {} metric: {} output sets, {:.2}% of tokens have adjacent tokens, {:.1}s ({})",
        emb.name(),
        emb.len(),
        mapping.name(),
        metric.name(),
        m.set_count(),
        100.0 * m.adjacent_share(),
        started.elapsed().as_secs_f64(),
        file.display()
    );
    Ok(())
}
