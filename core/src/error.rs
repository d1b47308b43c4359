//! The one error type of `dptext-core`.
//!
//! Front ends map each error's kind ([`Error::kind`]) to their own
//! vocabulary: the extension and the proxy to a SQLSTATE, each from one
//! table of its own, the CLI to a message and an exit code.

use std::path::PathBuf;

/// Everything that can go wrong inside the core.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter is outside its domain (eps <= 0, NaN, p outside [0, 1], ...).
    #[error("invalid value for parameter \"{name}\": {reason}")]
    InvalidParameter {
        /// The parameter's name as the user wrote it.
        name: &'static str,
        /// What was wrong and what is allowed.
        reason: String,
    },

    /// A mechanism name that the core does not know.
    #[error(
        "unknown mechanism \"{0}\": expected one of {list}",
        list = crate::mechanisms::registry::MECHANISMS.join(", ")
    )]
    UnknownMechanism(String),

    /// An asset (model, embedding, library) is not installed where it was looked for.
    #[error("asset \"{asset}\" is missing at {path}: run `dptext assets fetch` (or set DPTEXT_ASSETS / dptext.assets_dir)")]
    MissingAsset {
        /// The asset's name in the manifest.
        asset: String,
        /// Where it was expected.
        path: PathBuf,
    },

    /// An asset that a repository script builds, not `dptext assets fetch`,
    /// is missing (the sentence encoder: `scripts/build-encoder`).
    #[error("asset \"{asset}\" is missing at {path}: build it with `{command}` (scripts/setup.sh runs it), or set DPTEXT_ASSETS to an assets directory that has it")]
    AssetNotBuilt {
        /// The asset's directory name.
        asset: String,
        /// Where it was expected.
        path: PathBuf,
        /// The command that builds it, from the repository root.
        command: String,
    },

    /// An asset is present but does not match what the manifest promises.
    #[error(
        "asset \"{asset}\" at {path} is corrupt ({reason}): run `dptext assets fetch --force`"
    )]
    CorruptAsset {
        /// The asset's name in the manifest.
        asset: String,
        /// The offending file.
        path: PathBuf,
        /// What did not match.
        reason: String,
    },

    /// The input is larger than the configured limit.
    #[error("input of {size} bytes exceeds the limit of {limit} bytes")]
    InputTooLarge {
        /// Size of the input in bytes.
        size: usize,
        /// The configured limit in bytes.
        limit: usize,
    },

    /// The model runtime failed (loading ONNX Runtime, a session, a run).
    #[error("model error: {0}")]
    Model(String),

    /// An I/O error with the path it happened on.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A JSON document (manifest, parameters) could not be read.
    #[error("invalid json: {0}")]
    Json(#[from] serde_json::Error),

    /// The caller's cancellation hook asked the call to stop
    /// ([`crate::cancel`]).
    #[error("canceled")]
    Cancelled,

    /// A CusText mapping is not in the disk cache and this engine may not
    /// build it ([`crate::EngineConfig::build_mappings`]). Each front end
    /// says how to build it (the CLI's `dptext custext-map`, a setting).
    #[error("custext mapping for k = {k}, mapping {strategy}, metric {metric}, embedding {embedding} is not built (expected at {path})")]
    MappingNotBuilt {
        /// Output set size.
        k: usize,
        /// Mapping strategy name.
        strategy: &'static str,
        /// Metric name.
        metric: &'static str,
        /// Embedding set name (`glove`, `wordpiece`).
        embedding: &'static str,
        /// Where the cache file is expected.
        path: PathBuf,
    },
}

/// What kind of failure an [`Error`] is: front ends map kinds to their own
/// vocabulary (SQLSTATEs, exit codes) and hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A parameter, mechanism name or JSON document is invalid.
    InvalidParameter,
    /// An asset is not installed.
    MissingAsset,
    /// A CusText mapping is not built.
    MappingNotBuilt,
    /// An asset does not match the manifest.
    CorruptAsset,
    /// An input exceeds a configured limit.
    InputTooLarge,
    /// The model runtime failed.
    Model,
    /// An I/O error.
    Io,
    /// The call was cancelled by its caller.
    Cancelled,
}

impl Error {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidParameter { .. } | Error::UnknownMechanism(_) | Error::Json(_) => {
                ErrorKind::InvalidParameter
            }
            Error::MissingAsset { .. } | Error::AssetNotBuilt { .. } => ErrorKind::MissingAsset,
            Error::MappingNotBuilt { .. } => ErrorKind::MappingNotBuilt,
            Error::CorruptAsset { .. } => ErrorKind::CorruptAsset,
            Error::InputTooLarge { .. } => ErrorKind::InputTooLarge,
            Error::Model(_) => ErrorKind::Model,
            Error::Io { .. } => ErrorKind::Io,
            Error::Cancelled => ErrorKind::Cancelled,
        }
    }

    /// The command line that builds a missing CusText mapping, for front
    /// ends whose users have the CLI.
    pub fn custext_map_command(&self) -> Option<String> {
        match self {
            Error::MappingNotBuilt {
                k,
                strategy,
                metric,
                embedding,
                ..
            } => Some(format!(
                "dptext custext-map --k {k} --mapping {strategy} --metric {metric} --embedding {embedding}"
            )),
            _ => None,
        }
    }

    /// A hint for the user that holds in every front end, when there is
    /// one (front ends add their own: the setting or flag to change).
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            Error::MissingAsset { .. } => Some(
                "run `dptext assets fetch` and point dptext.assets_dir (or DPTEXT_ASSETS) at the result",
            ),
            Error::CorruptAsset { .. } => Some("run `dptext assets fetch --force`"),
            Error::InputTooLarge { .. } => Some("raise the limit or split the text"),
            _ => None,
        }
    }

    /// This error once more, for each further value of a batch that it
    /// failed: a cancel stays a cancel and a model error keeps its message;
    /// any other error (they carry sources that cannot be copied) becomes
    /// a model error with this one's message.
    pub(crate) fn again(&self) -> Self {
        match self {
            Error::Cancelled => Error::Cancelled,
            Error::Model(m) => Error::Model(m.clone()),
            other => Error::Model(other.to_string()),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidParameter {
            name,
            reason: reason.into(),
        }
    }
}

/// Result alias of the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;
