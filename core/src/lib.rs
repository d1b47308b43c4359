//! `dptext-core`: differentially private text sanitization, as a library.
//!
//! The layers, bottom up:
//!
//! - [`text`]: words with byte offsets, and re-assembly that keeps the
//!   original layout and casing;
//! - [`embeddings`]: frequency-ordered vocabularies with vectors (GloVe
//!   words, BERT WordPieces);
//! - [`rng`]: the random sources (OS, seeded, keyed);
//! - [`mechanisms`]: SanText and SanText+ behind one [`mechanisms::Mechanism`]
//!   trait; each call returns its text and its [`cost::Cost`];
//! - [`detect`]: typed PII spans from the ONNX token classifier and rule
//!   recognizers;
//! - [`assets`]: the pinned manifest, the runtime layout and verification;
//! - [`rules`]: masking rules as written in security labels;
//! - [`engine`]: what front ends call: lazy loading, parameter validation,
//!   input limits per mechanism, the right random stream per call;
//! - [`cancel`]: the cancellation check every long loop calls;
//! - [`vocab`]: vocabularies drawn from private data with differential
//!   privacy (set union), saved as named assets;
//! - [`encoder`]: sentence embeddings (all-MiniLM-L6-v2) that measure how
//!   much meaning a sanitized text keeps.
//!
//! The crate has no PostgreSQL and no async dependency; the extension, the
//! proxy and the CLI are thin front ends over [`Engine`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod assets;
pub mod cancel;
pub mod cost;
pub mod detect;
pub mod embeddings;
pub mod encoder;
pub mod engine;
pub mod error;
pub mod mechanisms;
pub mod mlm;
pub mod progress;
pub mod rng;
pub mod rules;
pub mod runtime;
pub mod store;
pub mod text;
pub mod vocab;

pub use engine::{Engine, EngineConfig};
pub use error::{Error, ErrorKind, Result};
pub use rng::RandomMode;
