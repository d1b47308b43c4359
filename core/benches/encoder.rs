//! The sentence encoder's speed: 64 texts of about 30 words embedded with
//! one ONNX Runtime thread and with two, in the same process, best of 5
//! runs each; prints sentences/s of each and their ratio.
//!
//! ```sh
//! DPTEXT_ASSETS=target/assets cargo bench -p dptext-core --bench encoder
//! ```

use std::time::Instant;

use dptext_core::encoder::SentenceEncoder;
use dptext_core::EngineConfig;

const WORDS: [&str; 12] = [
    "patient",
    "reported",
    "chest",
    "pain",
    "radiating",
    "to",
    "the",
    "left",
    "arm",
    "after",
    "exertion",
    "today",
];

fn texts() -> Vec<String> {
    (0..64)
        .map(|i| {
            (0..30)
                .map(|j| WORDS[(i * 7 + j * 5) % WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn rate(threads: usize, texts: &[&str]) -> f64 {
    let mut config = EngineConfig::new(dptext_core::assets::resolve_dir(None));
    config.model_threads = threads;
    let encoder = match SentenceEncoder::open(&config) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("no sentence encoder ({e}): run scripts/setup.sh or scripts/build-encoder");
            std::process::exit(1);
        }
    };
    encoder.embed(texts).expect("warm-up");
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        encoder.embed(texts).expect("embed");
        best = best.min(t.elapsed().as_secs_f64());
    }
    texts.len() as f64 / best
}

fn main() {
    let owned = texts();
    let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
    let one = rate(1, &texts);
    let two = rate(2, &texts);
    println!("encoder, 64 texts of 30 words, best of 5:");
    println!("  1 thread : {one:.0} sentences/s");
    println!("  2 threads: {two:.0} sentences/s ({:.2}x)", two / one);
}
