//! Proxy mode's model throughput without a database: rows per second of a
//! `deidentify` rule and an `ndd` rule run by the proxy's sanitizing pool
//! ([`Sanitizer::run`], batches of `batch_rows` values split across the
//! workers, exactly what a masked session's result goes through), against
//! one engine calling the same mechanism value by value (what one backend
//! does for `SELECT deidentify(note)` / `SELECT ndd_distort(note)`), in the
//! same process, on the same device.
//!
//! It exists for machines that have a GPU but no PostgreSQL
//! (`scripts/gpu-check` runs it there); `bench/proxy_mode.sh` measures the
//! same comparison through a real proxy and database on the CPU.
//!
//! ```sh
//! DPTEXT_ASSETS=target/assets cargo bench -p dptext-proxy --bench models
//! # options (env): DPTEXT_DEVICE (cpu|cuda, default cpu),
//! # PM_BENCH_WORKERS (comma-separated pool sizes, default: one per core),
//! # PM_BENCH_BATCH (rows per batch, default the proxy's batch_rows, 256),
//! # PM_BENCH_DEID_ROWS (default 480), PM_BENCH_NDD_ROWS (default 96),
//! # PM_BENCH_DETECT_BATCH (windows per detection-model call, default the
//! # engine's detect_batch, 4), DPTEXT_MLM_DIR (the masked LM, default models/mlm),
//! # DPTEXT_DEMO_DATA (the notes, default sql/demo_data.sql),
//! # DPTEXT_ORT_LIB (another ONNX Runtime library)
//! ```
//!
//! Prints, per rule and pool size, both rates and their ratio.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use dptext_core::mechanisms::MechanismSpec;
use dptext_core::runtime::Device;
use dptext_core::{Engine, EngineConfig, RandomMode};
use dptext_proxy::mode::{ColumnRule, Masking};
use dptext_proxy::sanitize::Sanitizer;

/// The demo notes: each row of sql/demo_data.sql is `(id, 'patient',
/// 'note')`; the note is the last quoted string of its line.
fn notes() -> Vec<String> {
    let path = std::env::var("DPTEXT_DEMO_DATA")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../sql/demo_data.sql").into());
    let sql = std::fs::read_to_string(&path).expect("sql/demo_data.sql (or DPTEXT_DEMO_DATA)");
    sql.lines()
        .filter_map(|line| {
            let end = line.rfind("')")?;
            let body = &line[..end];
            // The opening quote: the last one not doubled.
            let bytes = body.as_bytes();
            let mut i = end;
            while i > 0 {
                i -= 1;
                if bytes[i] == b'\'' {
                    if i > 0 && bytes[i - 1] == b'\'' {
                        i -= 1;
                        continue;
                    }
                    return Some(body[i + 1..].replace("''", "'"));
                }
            }
            None
        })
        .filter(|n| n.len() > 20)
        .collect()
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let device: Device = std::env::var("DPTEXT_DEVICE")
        .unwrap_or_else(|_| "cpu".into())
        .parse()
        .expect("DPTEXT_DEVICE: cpu or cuda");
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let pools: Vec<usize> = std::env::var("PM_BENCH_WORKERS")
        .unwrap_or_else(|_| cores.to_string())
        .split(',')
        .filter_map(|w| w.trim().parse().ok())
        .filter(|&w| w > 0)
        .collect();
    let batch = env_usize("PM_BENCH_BATCH", Masking::default().batch_rows).max(1);
    let notes = notes();
    assert!(!notes.is_empty(), "no notes read");
    let mut config = EngineConfig::default();
    config.device = device;
    config.detect_batch = env_usize("PM_BENCH_DETECT_BATCH", config.detect_batch).max(1);
    config.mlm_model = Some(
        std::env::var_os("DPTEXT_MLM_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models/mlm"))
            }),
    );
    let key = b"proxy models benchmark key, not secret".to_vec();
    let mode = RandomMode::Keyed(dptext_core::rng::Secret::new(key.clone()));
    println!(
        "device {device:?}, {} notes, batches of {batch}, detection windows per call {}, {cores} cores",
        notes.len(),
        config.detect_batch
    );
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    for (name, rows) in [
        ("deidentify", env_usize("PM_BENCH_DEID_ROWS", 480)),
        ("ndd", env_usize("PM_BENCH_NDD_ROWS", 96)),
    ] {
        let spec = MechanismSpec::parse(name, &serde_json::json!({})).expect("rule");
        let values: Vec<String> = (0..rows).map(|i| notes[i % notes.len()].clone()).collect();

        // One backend: one engine, one value per call.
        let engine = Engine::new(config.clone());
        let m = engine.mechanism(&spec).expect("mechanism");
        engine
            .run(m.as_ref(), &values[0], &mode, &[])
            .expect("warm-up");
        let t = Instant::now();
        for v in &values {
            engine.run(m.as_ref(), v, &mode, &[]).expect("sanitize");
        }
        let per_row = rows as f64 / t.elapsed().as_secs_f64();
        drop(engine);
        println!("{name}: per row, one engine: {per_row:.1} rows/s ({rows} rows)");

        for &workers in &pools {
            let masking = Masking {
                workers,
                batch_rows: batch,
                engine: config.clone(),
                ..Masking::default()
            };
            let rule = ColumnRule {
                schema: "public".into(),
                table: "t".into(),
                column: "note".into(),
                spec: spec.clone(),
                text: name.into(),
            };
            let sanitizer =
                Sanitizer::start(&masking, std::slice::from_ref(&rule), &key).expect("pool");
            let label: Arc<str> = Arc::from(rule.label());
            let items = |vs: &[String]| -> Vec<(Arc<str>, String)> {
                vs.iter().map(|v| (label.clone(), v.clone())).collect()
            };
            // Warm-up: one value per worker, so every worker loads its models.
            let warm: Vec<String> = (0..workers).map(|i| values[i % rows].clone()).collect();
            runtime
                .block_on(sanitizer.run(items(&warm)))
                .expect("warm-up");
            let t = Instant::now();
            let mut out = 0;
            for chunk in values.chunks(batch) {
                out += runtime
                    .block_on(sanitizer.run(items(chunk)))
                    .expect("sanitize")
                    .len();
            }
            let pooled = rows as f64 / t.elapsed().as_secs_f64();
            assert_eq!(out, rows);
            println!(
                "{name}: proxy pool, {workers} worker(s): {pooled:.1} rows/s; ratio to per row {:.2}",
                pooled / per_row
            );
            // Every model session that asked for the device and ran on the
            // CPU instead (0 means every figure above is the device's).
            println!(
                "sessions fallen back to the CPU so far: {}",
                dptext_core::runtime::fallback_count()
            );
        }
    }
}
