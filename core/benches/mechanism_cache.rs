//! Per-call cost of getting a mechanism: built for every value (what the
//! extension's dedicated functions did) against [`Engine::mechanism`]'s
//! cache, in the same process, on short values where the difference
//! shows most. Prints values/s of each and their ratio per mechanism.
//!
//! ```sh
//! DPTEXT_ASSETS=target/assets cargo bench -p dptext-core --bench mechanism_cache
//! ```

use std::time::Instant;

use dptext_core::mechanisms::MechanismSpec;
use dptext_core::{Engine, EngineConfig, RandomMode};

const VALUES: [&str; 4] = [
    "fever and cough since Tuesday",
    "denies chest pain",
    "Seen by Dr. Lopez on 3/14",
    "follow up in two weeks",
];

/// Values/s of `calls` values through `spec`, best of 3 runs.
fn rate(engine: &Engine, spec: &MechanismSpec, calls: usize, cached: bool) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        for i in 0..calls {
            let mode = RandomMode::Seeded(i as u64);
            let text = VALUES[i % VALUES.len()];
            let out = if cached {
                let m = engine.mechanism(spec).expect("mechanism");
                engine.run(m.as_ref(), text, &mode, &[])
            } else {
                let m = engine.build(spec).expect("build");
                engine.run(m.as_ref(), text, &mode, &[])
            };
            std::hint::black_box(out.expect("sanitize"));
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    calls as f64 / best
}

fn main() {
    let mut config = EngineConfig::new(dptext_core::assets::resolve_dir(None));
    config.model_threads = 1;
    let engine = Engine::new(config);
    println!(
        "{:<14} {:>8} {:>14} {:>14} {:>7}",
        "mechanism", "calls", "built/call /s", "cached /s", "ratio"
    );
    for (name, params, calls) in [
        ("santext", serde_json::json!({"eps": 3}), 20_000),
        ("santext_plus", serde_json::json!({"eps": 3}), 20_000),
        ("custext", serde_json::json!({"eps": 3, "k": 20}), 20_000),
        ("deidentify", serde_json::json!({}), 400),
    ] {
        let spec = MechanismSpec::parse(name, &params).expect("valid parameters");
        // Warm-up: vocabularies, mappings and models load here, not below.
        if let Err(e) = engine.sanitize(&spec, VALUES[0], &RandomMode::Seeded(0)) {
            eprintln!("skipping {name}: {e}");
            continue;
        }
        let built = rate(&engine, &spec, calls, false);
        let cached = rate(&engine, &spec, calls, true);
        println!(
            "{name:<14} {calls:>8} {built:>14.0} {cached:>14.0} {:>6.2}x",
            cached / built
        );
    }
}
