//! What one masked-LM call costs: per batch size, with the weights warm in
//! the cache and after 32 MB of other memory traffic (as between NDD
//! rounds); and the throughput of 64-row calls with two threads laid out
//! as one session of two intra-op threads or two single-threaded sessions.
//! Each row is one masked copy of a 15-token sentence; the time includes
//! the log-softmax of every row (`MaskedLm::log_probs`).
//!
//! ```sh
//! DPTEXT_ASSETS=$PWD/target/assets cargo bench -p dptext-core --bench mlm_calls
//! # DPTEXT_MLM_DIR=DIR: another model directory (default models/mlm), e.g.
//! # the export before the last-layer shortcut, to compare:
//! #   mkdir -p /tmp/mlm-old && cp models/mlm/{config.json,tokenizer.json} /tmp/mlm-old/ &&
//! #   git show 0e8d9a5:models/mlm/model.onnx > /tmp/mlm-old/model.onnx
//! ```

use std::path::PathBuf;
use std::time::Instant;

use dptext_core::mlm::{MaskedLm, Row};
use dptext_core::runtime::Device;

fn main() {
    let assets = dptext_core::assets::resolve_dir(None);
    let lib = assets.join(dptext_core::detect::model::ORT_LIB);
    let dir = std::env::var_os("DPTEXT_MLM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models/mlm")));
    let load = |sessions, intra| {
        MaskedLm::load_sessions(&lib, &dir, sessions, intra, Device::Cpu, 64)
            .expect("masked LM (run `dptext assets fetch`)")
    };
    let one = load(1, 1);
    let ids = one
        .encode("The patient John Smith was seen at the clinic in Boston on Monday morning.")
        .expect("encode")
        .ids;
    let rows = |n: usize| -> Vec<Row> {
        (0..n)
            .map(|i| {
                let k = i % ids.len();
                let mut r = one.wrap(&ids);
                r[k + 1] = one.config().mask_token_id;
                Row {
                    ids: r,
                    position: k + 1,
                }
            })
            .collect()
    };
    println!("model {}, rows of {} tokens", dir.display(), ids.len() + 2);
    let mut junk = vec![1.0f32; 8 << 20];
    for b in [1usize, 2, 4, 8, 16, 32, 64] {
        let batch = rows(b);
        let n = (2000 / b).max(20);
        for _ in 0..5 {
            one.log_probs(&batch).expect("run");
        }
        let t = Instant::now();
        for _ in 0..n {
            one.log_probs(&batch).expect("run");
        }
        let warm = t.elapsed().as_secs_f64() * 1e3 / n as f64;
        let mut cold = 0.0;
        for i in 0..n {
            junk.iter_mut().for_each(|x| *x += i as f32);
            let t = Instant::now();
            one.log_probs(&batch).expect("run");
            cold += t.elapsed().as_secs_f64();
        }
        let cold = cold * 1e3 / n as f64;
        println!(
            "batch {b:3}: warm {warm:.3} ms/call ({:.3} ms/row), after 32 MB of other traffic {cold:.3} ms/call ({:.3} ms/row)",
            warm / b as f64,
            cold / b as f64
        );
    }
    std::hint::black_box(&junk);
    // Two threads: 128 rows (two 64-row calls) per run.
    let batch = rows(128);
    let time = |m: &MaskedLm| {
        for _ in 0..3 {
            m.log_probs(&batch).expect("run");
        }
        let t = Instant::now();
        for _ in 0..20 {
            m.log_probs(&batch).expect("run");
        }
        t.elapsed().as_secs_f64()
    };
    let base = time(&one);
    let intra = time(&load(1, 2));
    let pool = time(&load(2, 1));
    println!(
        "128 rows in 64-row calls: 1 session x 1 thread {:.1} ms; 1 session x 2 threads {:.1} ms ({:.2}x); 2 sessions x 1 thread {:.1} ms ({:.2}x)",
        base * 50.0,
        intra * 50.0,
        base / intra,
        pool * 50.0,
        base / pool
    );
}
