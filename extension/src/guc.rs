//! Every `dptext.*` setting, in one place.
//!
//! | setting | type | default | who may set it | meaning |
//! |---|---|---|---|---|
//! | `dptext.assets_dir` | text | `''` (then `$DPTEXT_ASSETS` of the server, then its user's cache dir) | superuser | where `dptext assets fetch` installed the assets |
//! | `dptext.seed` | int | `-1` (off) | superuser | reproducible mode: outputs are a function of (seed, input, parameters) |
//! | `dptext.key` | text | `''` (off) | superuser; never shown | keyed mode: outputs are a function of (key, input, parameters); wins over the seed |
//! | `dptext.key_file` | text | `''` (off) | superuser | keyed mode with the key read from this file (mode 600), read once per session; `dptext.key` wins |
//! | `dptext.max_input_bytes` | int | 67108864 | superuser | larger inputs are refused with SQLSTATE 54000 |
//! | `dptext.glove_words` | int | 50000 | superuser | size of the GloVe vocabulary (most frequent words) |
//! | `dptext.cache_mb` | int | 64 | superuser | byte budget of each vocabulary's per-token cache |
//! | `dptext.max_detect_bytes` | int | 1048576 | superuser | largest text `detect_pii` accepts (54000 beyond) |
//! | `dptext.mlm_model` | text | `''` (the default model in `<assets>/mlm`) | superuser | directory of the masked LM for NDD: `model.onnx`, `tokenizer.json`, `config.json` (docs/install.md, "Bring your own model") |
//! | `dptext.device` | text | `'cpu'` | superuser | where models run: `cpu` or `cuda` (needs the `cuda` build and a GPU ONNX Runtime; falls back to the CPU with one warning) |
//! | `dptext.mlm_batch` | int | 64 | superuser | masked copies per model call |
//! | `dptext.label_admins` | text | `''` (superusers only) | superuser | comma-separated roles whose members (besides superusers) may set and remove `SECURITY LABEL FOR dptext` labels |
//! | `dptext.deny_unlabelled_text` | bool | off | superuser (per database or role: `ALTER DATABASE/ROLE ... SET`) | masked sessions may not read a text-like column (text, varchar, char, name, citext, json, jsonb, xml, domains and arrays of them) that has neither a rule nor an `ALLOW` label; a value a masked session chose itself counts as on |
//! | `dptext.custext_build` | bool | off | superuser | let a backend build a CusText mapping missing from the disk cache (minutes of CPU); off: an error names `dptext custext-map` |
//!
//! The engine settings map onto core's one settings type,
//! [`dptext_core::EngineConfig`] ([`engine_config`]), and their boot values
//! are core's `DEFAULT_*` constants, not literals of their own (a
//! `#[pg_test]` compares `pg_settings.boot_val` with them).

use std::cell::RefCell;
use std::ffi::CString;
use std::path::{Path, PathBuf};

use dptext_core::engine::{self, EngineConfig};
use dptext_core::runtime::Device;
use dptext_core::RandomMode;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

use crate::pg;

pub(crate) static ASSETS_DIR: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(None);
pub(crate) static SEED: GucSetting<i32> = GucSetting::<i32>::new(-1);
pub(crate) static KEY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub(crate) static KEY_FILE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
// The engine settings' boot values are core's defaults (dptext_core::engine).
pub(crate) static MAX_INPUT_BYTES: GucSetting<i32> =
    GucSetting::<i32>::new(int(engine::DEFAULT_MAX_INPUT_BYTES as u64));
pub(crate) static GLOVE_WORDS: GucSetting<i32> =
    GucSetting::<i32>::new(int(engine::DEFAULT_GLOVE_WORDS as u64));
pub(crate) static CACHE_MB: GucSetting<i32> =
    GucSetting::<i32>::new(int(engine::DEFAULT_CACHE_BYTES >> 20));
pub(crate) static MAX_DETECT_BYTES: GucSetting<i32> =
    GucSetting::<i32>::new(int(engine::DEFAULT_MAX_DETECT_BYTES as u64));
pub(crate) static CUSTEXT_BUILD: GucSetting<bool> =
    GucSetting::<bool>::new(engine::DEFAULT_BUILD_MAPPINGS);
pub(crate) static MLM_MODEL: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub(crate) static DEVICE: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(match engine::DEFAULT_DEVICE {
        Device::Cpu => c"cpu",
        Device::Cuda => c"cuda",
    }));
pub(crate) static MLM_BATCH: GucSetting<i32> =
    GucSetting::<i32>::new(int(engine::DEFAULT_MLM_BATCH as u64));
pub(crate) static DENY_UNLABELLED_TEXT: GucSetting<bool> = GucSetting::<bool>::new(false);
pub(crate) static LABEL_ADMINS: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(None);
pub(crate) static DETECT_THRESHOLD: GucSetting<f64> = GucSetting::<f64>::new(0.0);
pub(crate) static MODEL_THREADS: GucSetting<i32> =
    GucSetting::<i32>::new(int(engine::DEFAULT_MODEL_THREADS as u64));
pub(crate) static STORE: GucSetting<bool> = GucSetting::<bool>::new(true);
pub(crate) static STORE_CACHE_MB: GucSetting<i32> = GucSetting::<i32>::new(64);

/// A core default as an `int` setting's boot value; one beyond `i32`
/// fails the build.
const fn int(v: u64) -> i32 {
    assert!(
        v <= i32::MAX as u64,
        "a default beyond an int setting's range"
    );
    v as i32
}

/// Registers the settings; called once from `_PG_init`.
pub fn init() {
    GucRegistry::define_string_guc(
        c"dptext.assets_dir",
        c"Directory of the dptext assets (models, embeddings).",
        c"Filled by `dptext assets fetch`. Empty: $DPTEXT_ASSETS of the server process, then the server user's cache directory.",
        &ASSETS_DIR,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"dptext.seed",
        c"Seed for reproducible sanitization (-1: off).",
        c"With a seed, every function's output is a function of (seed, input, parameters), for tests and audits.",
        &SEED,
        -1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    pg::settings::define_secret_guc(
        c"dptext.key",
        c"Secret key for keyed sanitization (never shown).",
        c"With a key, asking for the same value again returns the same output, which defeats averaging attacks. SHOW and pg_settings display ******** instead.",
        &KEY,
    );
    GucRegistry::define_string_guc(
        c"dptext.key_file",
        c"File holding the secret key for keyed sanitization.",
        c"The safest way to set a key: the path is not secret, the file (mode 600, owned by the server's user) is read once per session. dptext.key wins when both are set.",
        &KEY_FILE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"dptext.max_input_bytes",
        c"Largest text accepted by the sanitization functions, in bytes.",
        c"Larger inputs raise SQLSTATE 54000.",
        &MAX_INPUT_BYTES,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"dptext.glove_words",
        c"Number of most frequent GloVe words in the vocabulary.",
        c"SanText draws outputs from this vocabulary; larger is slower and rarer.",
        &GLOVE_WORDS,
        100,
        400_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"dptext.detect_threshold",
        c"Detected spans scoring below this are not PII (0 keeps every span).",
        c"Raising it trades recall for precision: a span under the threshold is left in the clear by deidentify and ndd_distort. Superuser only.",
        &DETECT_THRESHOLD,
        0.0,
        1.0,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"dptext.max_detect_bytes",
        c"Largest text detect_pii accepts, in bytes.",
        c"The model reads every token, so detection costs far more per byte than the word mechanisms. Larger inputs raise SQLSTATE 54000.",
        &MAX_DETECT_BYTES,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"dptext.custext_build",
        c"Let a backend build a CusText mapping that is not cached on disk.",
        c"Building takes minutes of every core for a 50,000-word vocabulary. Off: a missing mapping is an error naming the dptext custext-map command that builds it.",
        &CUSTEXT_BUILD,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"dptext.mlm_model",
        c"Directory of the masked language model used by NDD.",
        c"Holds model.onnx, tokenizer.json and config.json. Empty: the project's default model in <assets>/mlm.",
        &MLM_MODEL,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"dptext.device",
        c"Where models run: cpu or cuda.",
        c"cuda needs dptext built with the cuda feature and a GPU build of ONNX Runtime; otherwise the model runs on the CPU after one warning.",
        &DEVICE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"dptext.mlm_batch",
        c"Masked copies per masked-LM call.",
        c"Larger batches use more memory (vocabulary size x 4 bytes per row) and fewer calls.",
        &MLM_BATCH,
        1,
        4096,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"dptext.deny_unlabelled_text",
        c"Masked sessions may not read text columns that have no dptext rule.",
        c"Deny by default: a text-like column (text, varchar, char, name, citext, json, jsonb, xml, their domains and arrays) read by a masked session needs a MASKED WITH rule, or the label ALLOW that declares it safe to read raw. Set it per database or per role (ALTER DATABASE/ROLE ... SET); a value a masked session chose itself counts as on.",
        &DENY_UNLABELLED_TEXT,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"dptext.label_admins",
        c"Roles whose members may set and remove dptext security labels, besides superusers.",
        c"Comma-separated role names. A label is a masking rule every masked session trusts, and outputs under one key are the same for the same value and rule in every table, so a role able to label a table of its own guesses could compare their masked text with a protected column's: only these roles and superusers may label.",
        &LABEL_ADMINS,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"dptext.model_threads",
        c"Threads each model call of this session may use.",
        c"The detection model's intra-op threads, and masked-LM sessions run side by side. Raise it for a session that warms a table (dptext.warm) on an otherwise idle server; every backend that runs models uses this many.",
        &MODEL_THREADS,
        1,
        256,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"dptext.store",
        c"Serve keyed outputs of model-based rules from dptext.store, the computed-once store.",
        c"On: masked reads, apply_rule and sanitized copies look a value up by its keyed tag before running the models, and file what they compute (when the transaction may write). Off: every value is computed. Outputs are the same either way.",
        &STORE,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"dptext.store_cache_mb",
        c"Memory of each backend's copy of recently served store entries, in MB.",
        c"Repeated reads in one session are served from it without an index lookup; 0 turns it off.",
        &STORE_CACHE_MB,
        0,
        4096,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"dptext.cache_mb",
        c"Memory budget of each per-token distribution cache, in MB.",
        c"",
        &CACHE_MB,
        1,
        65_536,
        GucContext::Suset,
        GucFlags::default(),
    );
}

fn string(s: &GucSetting<Option<CString>>) -> Option<String> {
    s.get()
        .map(|c| c.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
}

/// The engine configuration the settings describe: core's settings type,
/// the `dptext.*` settings mapped onto it (settings without a `dptext.*`
/// counterpart keep core's defaults: one model thread per backend).
pub fn engine_config() -> EngineConfig {
    let dir = dptext_core::assets::resolve_dir(string(&ASSETS_DIR).map(PathBuf::from).as_deref());
    let count = |s: &GucSetting<i32>| s.get().max(1) as usize;
    EngineConfig {
        glove_words: count(&GLOVE_WORDS),
        cache_bytes: (CACHE_MB.get().max(1) as u64) << 20,
        max_input_bytes: count(&MAX_INPUT_BYTES),
        max_detect_bytes: count(&MAX_DETECT_BYTES),
        build_mappings: CUSTEXT_BUILD.get(),
        mlm_model: string(&MLM_MODEL).map(PathBuf::from),
        // An unknown device is reported when a model is used (device()).
        device: device().unwrap_or_default(),
        mlm_batch: count(&MLM_BATCH),
        model_threads: count(&MODEL_THREADS),
        ..EngineConfig::new(dir)
    }
}

/// The `dptext.device` setting, validated.
pub fn device() -> dptext_core::Result<dptext_core::runtime::Device> {
    string(&DEVICE).unwrap_or_default().parse()
}

thread_local! {
    /// The key read from `dptext.key_file`, per path, for this session.
    static KEY_FROM_FILE: RefCell<Option<(String, Vec<u8>)>> = const { RefCell::new(None) };
}

fn key_from_file(path: &str) -> dptext_core::Result<Vec<u8>> {
    KEY_FROM_FILE.with(|slot| {
        let mut slot = slot.borrow_mut();
        if let Some((p, k)) = slot.as_ref() {
            if p == path {
                return Ok(k.clone());
            }
        }
        let k = dptext_core::rng::read_key_file(Path::new(path))?;
        *slot = Some((path.to_string(), k.clone()));
        Ok(k)
    })
}

/// The random mode the settings describe: `dptext.key`, else the key in
/// `dptext.key_file`, else `dptext.seed`, else the OS generator.
pub fn random_mode() -> dptext_core::Result<RandomMode> {
    let seed = u64::try_from(SEED.get()).ok();
    let key = match string(&KEY) {
        Some(k) => Some(k.into_bytes()),
        None => string(&KEY_FILE).map(|p| key_from_file(&p)).transpose()?,
    };
    RandomMode::from_settings(seed, key.as_deref())
}

/// True when `dptext.key` holds a value (never the value itself).
pub fn key_is_set() -> bool {
    string(&KEY).is_some()
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use dptext_core::engine as defaults;
    use pgrx::prelude::*;

    /// The engine settings' boot values are core's defaults
    /// (`dptext_core::engine::DEFAULT_*`), and at those values the settings
    /// map onto core's default settings: no default of their own.
    #[pg_test]
    fn engine_settings_boot_values_are_core_defaults() {
        let boot = |name: &str| {
            Spi::get_one::<String>(&format!(
                "SELECT boot_val FROM pg_settings WHERE name = 'dptext.{name}'"
            ))
            .expect("pg_settings reads")
        };
        for (name, expected) in [
            ("glove_words", defaults::DEFAULT_GLOVE_WORDS.to_string()),
            (
                "max_input_bytes",
                defaults::DEFAULT_MAX_INPUT_BYTES.to_string(),
            ),
            (
                "max_detect_bytes",
                defaults::DEFAULT_MAX_DETECT_BYTES.to_string(),
            ),
            (
                "cache_mb",
                (defaults::DEFAULT_CACHE_BYTES >> 20).to_string(),
            ),
            ("mlm_batch", defaults::DEFAULT_MLM_BATCH.to_string()),
            ("device", defaults::DEFAULT_DEVICE.name().to_string()),
            (
                "custext_build",
                if defaults::DEFAULT_BUILD_MAPPINGS {
                    "on"
                } else {
                    "off"
                }
                .to_string(),
            ),
        ] {
            assert_eq!(boot(name), Some(expected), "dptext.{name}");
        }
        Spi::run("RESET ALL").expect("RESET ALL runs");
        let c = super::engine_config();
        assert_eq!(c, dptext_core::EngineConfig::new(c.assets_dir.clone()));
    }
}

/// `dptext.deny_unlabelled_text`, failing closed: a value the session
/// chose itself (a `SET` by a role granted SET on it, a start-up option)
/// counts as on, since a masked session could otherwise turn it off.
pub fn deny_unlabelled_text() -> bool {
    DENY_UNLABELLED_TEXT.get() || pg::settings::chosen_by_session("dptext.deny_unlabelled_text")
}

/// `dptext.label_admins`: the roles (besides superusers) whose members
/// may set and remove dptext labels; empty when unset.
pub fn label_admins() -> String {
    string(&LABEL_ADMINS).unwrap_or_default()
}
