//! SanText throughput on the real GloVe 50k vocabulary with a warm cache.
//!
//! ```text
//! DPTEXT_ASSETS=target/assets cargo bench -p dptext-core --bench santext
//! ```
//!
//! Three figures: the sampler alone (one draw from a cached token table),
//! the whole mechanism on a clinical note (segmentation, lookup, draws,
//! re-assembly), and the first-use cost of building one token's table.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use dptext_core::embeddings::Embeddings;
use dptext_core::mechanisms::{Mechanism, SanText, Vocabulary};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

const NOTE: &str = "Kathryn Herrera, a 72-year-old woman from Kingston, presented to Northgate \
University Hospital on July 19, 2022 with chest pain radiating to the left arm. Laboratory \
results showed elevated white blood cell count. An ECG showed normal sinus rhythm. Advised to \
avoid strenuous activity and return if symptoms worsen.";

fn load() -> Option<Arc<Vocabulary>> {
    let dir = dptext_core::assets::resolve_dir(None).join(dptext_core::assets::GLOVE_DIR);
    match Embeddings::load(&dir, Some(50_000)) {
        Ok(e) => Some(Arc::new(Vocabulary::new(e, 256 << 20))),
        Err(e) => {
            eprintln!("skipping the SanText benchmark: {e}");
            None
        }
    }
}

fn bench(c: &mut Criterion) {
    let Some(vocab) = load() else { return };
    let m = SanText::new(vocab.clone(), 3.0).expect("valid eps");
    let ids: Vec<u32> = dptext_core::text::Segmented::new(NOTE)
        .words()
        .filter_map(|w| vocab.tokens(&NOTE[w.span.clone()]))
        .flatten()
        .collect();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    // Warm the per-token tables.
    m.sanitize(NOTE, &mut rng, &dptext_core::RandomMode::Os)
        .expect("sanitize");

    let mut g = c.benchmark_group("santext_glove50k_eps3");
    g.throughput(Throughput::Elements(ids.len() as u64));
    g.bench_function("sampler_warm", |b| {
        b.iter(|| {
            for &x in &ids {
                black_box(m.sampler().sample(x, 3.0, &mut rng));
            }
        })
    });
    let words = dptext_core::text::Segmented::new(NOTE).len() as u64;
    g.throughput(Throughput::Elements(words));
    g.bench_function("sanitize_note_warm", |b| {
        b.iter(|| {
            black_box(
                m.sanitize(black_box(NOTE), &mut rng, &dptext_core::RandomMode::Os)
                    .expect("sanitize"),
            )
        })
    });
    g.finish();

    let mut g = c.benchmark_group("santext_glove50k_cold");
    g.sample_size(20);
    let mut eps = 1.0;
    g.bench_function("build_token_table", |b| {
        b.iter(|| {
            // A new eps each time, so the table is never cached.
            eps += 1e-9;
            black_box(m.sampler().sample(ids[0], eps, &mut rng))
        })
    });
    g.finish();
}

fn bench_custext(c: &mut Criterion) {
    use dptext_core::mechanisms::custext::{Level, Mapping, MappingStrategy, Metric};
    use dptext_core::mechanisms::CusText;
    let Some(vocab) = load() else { return };
    let dir = dptext_core::assets::resolve_dir(None).join("custext");
    // The default mapping, as setup.sh builds it (never built here).
    let mapping = match Mapping::load_or_build(
        vocab.embeddings(),
        &dir,
        20,
        MappingStrategy::Balanced,
        Metric::Euclidean,
        false,
    ) {
        Ok(m) => Arc::new(m),
        Err(e) => {
            eprintln!("skipping the CusText benchmark: {e}");
            return;
        }
    };
    let words = dptext_core::text::Segmented::new(NOTE).len() as u64;
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let mut g = c.benchmark_group("custext_glove50k_k20_balanced_eps2");
    g.throughput(Throughput::Elements(words));
    for (name, level) in [("token", Level::Token), ("record", Level::Record)] {
        let m = CusText::new(vocab.clone(), mapping.clone(), 2.0, level, true).expect("valid");
        g.bench_function(format!("sanitize_note_{name}"), |b| {
            b.iter(|| {
                black_box(
                    m.sanitize(black_box(NOTE), &mut rng, &dptext_core::RandomMode::Os)
                        .expect("sanitize"),
                )
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench, bench_custext);
criterion_main!(benches);
