//! ONNX Runtime: the process-wide environment and session building, with
//! the device choice and its CPU fallback.
//!
//! `ort` loads `libonnxruntime` dynamically (the library fetched as an
//! asset, or one the user points at), once per process. Sessions ask for a
//! [`Device`]; CUDA needs the `cuda` cargo feature and a GPU build of the
//! library, and when its provider cannot start the session runs on the CPU
//! with one warning (see [`crate::mlm::MaskedLm::fallback`]).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// Where a model runs. In settings files it is a string, read as
/// [`Device::from_str`](std::str::FromStr) reads it (`"cpu"`, `"cuda"`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub enum Device {
    /// The CPU (default).
    #[default]
    Cpu,
    /// An NVIDIA GPU through ONNX Runtime's CUDA execution provider.
    Cuda,
}

impl std::str::FromStr for Device {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" | "" => Ok(Device::Cpu),
            "cuda" | "gpu" => Ok(Device::Cuda),
            other => Err(Error::invalid(
                "device",
                format!("\"{other}\" is not one of 'cpu', 'cuda'"),
            )),
        }
    }
}

impl TryFrom<String> for Device {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}

impl From<Device> for String {
    fn from(d: Device) -> String {
        d.name().to_string()
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Device {
    /// The name used in settings.
    pub fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
        }
    }
}

pub(crate) fn model_err(what: impl std::fmt::Display) -> Error {
    Error::Model(what.to_string())
}

/// Environment variable naming another ONNX Runtime library (e.g. the GPU
/// build from `onnxruntime-gpu`), used instead of the assets' one.
pub const ORT_LIB_ENV: &str = "DPTEXT_ORT_LIB";

/// The library to load: `$DPTEXT_ORT_LIB` when set, else `default`.
pub fn ort_lib(default: &Path) -> std::path::PathBuf {
    std::env::var_os(ORT_LIB_ENV).map_or_else(|| default.to_path_buf(), std::path::PathBuf::from)
}

/// The process-wide ONNX Runtime environment, loaded from `lib` (or
/// `$DPTEXT_ORT_LIB`) on first use; later calls get the first library.
pub(crate) fn environment(lib: &Path) -> Result<&'static ort::environment::Environment> {
    static ENV: OnceLock<std::result::Result<ort::environment::Environment, String>> =
        OnceLock::new();
    let lib = ort_lib(lib);
    let lib = lib.as_path();
    ENV.get_or_init(|| {
        ort::init_from(lib)
            .map_err(|e| e.to_string())
            .and_then(|b| b.with_name("dptext").build().map_err(|e| e.to_string()))
    })
    .as_ref()
    .map_err(|e| model_err(format!("loading ONNX Runtime from {}: {e}", lib.display())))
}

static FALLBACKS: AtomicUsize = AtomicUsize::new(0);

/// How many times a session asked for a device and fell back to the CPU in
/// this process (each fallback logs one warning).
pub fn fallback_count() -> usize {
    FALLBACKS.load(Ordering::Relaxed)
}

/// A built session and the device it really runs on.
pub(crate) struct Built {
    pub session: ort::session::Session,
    pub device: Device,
    /// Why the requested device was not used, when it was not.
    pub fallback: Option<String>,
}

/// Builds a session for `model` on `device` with `threads` intra-op threads.
/// The input names of `session`, after checking that it has each of
/// `needed` (the error names the model file and what it has).
pub(crate) fn input_names(
    session: &ort::session::Session,
    model: &Path,
    needed: &[&str],
) -> Result<Vec<String>> {
    let inputs: Vec<String> = session
        .inputs()
        .iter()
        .map(|i| i.name().to_string())
        .collect();
    for need in needed {
        if !inputs.iter().any(|n| n == need) {
            return Err(model_err(format!(
                "{} has no input {need} (inputs: {inputs:?})",
                model.display()
            )));
        }
    }
    Ok(inputs)
}

pub(crate) fn build_session(
    lib: &Path,
    model: &Path,
    threads: usize,
    device: Device,
) -> Result<Built> {
    let env = environment(lib)?;
    let builder = ort::session::Session::builder(env)
        .map_err(model_err)?
        .with_intra_threads(threads.max(1))
        .map_err(|e| model_err(e.to_string()))?;
    let (mut builder, fallback) = match device {
        Device::Cpu => (builder, None),
        Device::Cuda => with_cuda(builder),
    };
    if let Some(reason) = &fallback {
        FALLBACKS.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(model = %model.display(), %reason, "CUDA unavailable, running on the CPU");
    }
    let session = builder.commit_from_file(model).map_err(model_err)?;
    Ok(Built {
        session,
        device: if fallback.is_some() {
            Device::Cpu
        } else {
            device
        },
        fallback,
    })
}

#[cfg(feature = "cuda")]
fn with_cuda(
    mut builder: ort::session::builder::SessionBuilder,
) -> (ort::session::builder::SessionBuilder, Option<String>) {
    use ort::ep::{ExecutionProvider, CUDA};
    // Full fp32 matrix products: TF32 would make a row's result depend on
    // the shapes of its batch, and NDD must not change with the batching.
    let ep = CUDA::default().with_tf32(false);
    match CUDA::is_available() {
        Ok(true) => match ep.register(&mut builder) {
            Ok(()) => (builder, None),
            Err(e) => (
                builder,
                Some(format!("the CUDA provider did not start: {e}")),
            ),
        },
        Ok(false) => (
            builder,
            Some(
                "this ONNX Runtime library has no CUDA provider (use onnxruntime-gpu's library)"
                    .into(),
            ),
        ),
        Err(e) => (builder, Some(format!("cannot list the providers: {e}"))),
    }
}

#[cfg(not(feature = "cuda"))]
fn with_cuda(
    builder: ort::session::builder::SessionBuilder,
) -> (ort::session::builder::SessionBuilder, Option<String>) {
    (
        builder,
        Some("dptext was built without the `cuda` feature".into()),
    )
}
