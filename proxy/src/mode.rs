//! The masking mode of masked users, and proxy mode's own rules.
//!
//! ```toml
//! [masking]
//! mode = "proxy"              # or "database" (the default)
//! workers = 0                 # sanitizing threads (0: one per core)
//! batch_rows = 256            # rows of a result sanitized together
//! trusted_owners = ["etl"]    # proxy mode: roles whose relations are read
//!
//! [engine]                    # proxy mode: the engine's settings (docs/proxy.md)
//! assets_dir = "/var/lib/dptext/assets"
//! device = "cpu"              # or "cuda"
//!
//! [[rule]]                    # proxy mode: a protected column and its rule
//! table = "public.records"
//! column = "note"
//! rule = "santext(eps => 3)"  # what follows MASKED WITH in a label
//!
//! [[sanitized]]               # proxy mode: relayed as it is
//! relation = "analytics.records_safe"
//! ```
//!
//! - **database** (default): a masked user's upstream role must be labelled
//!   `MASKED` in a database with the dptext extension and a key; the
//!   database masks at the source and the proxy relays rows unchanged.
//! - **proxy**: the upstream needs no extension. Every statement of a
//!   masked session is parsed and allowed only in shapes where protected
//!   columns are bare output columns ([`crate::analysis`]); the proxy then
//!   sanitizes those columns itself, keyed by the proxy's `key`.
//!
//! Proxy mode's engine settings are core's one settings type,
//! [`dptext_core::EngineConfig`], read from the `[engine]` table with
//! core's defaults. `assets_dir` and `device` were once keys of
//! `[masking]`; they are still read there (giving one in both tables is an
//! error), and `[engine]` is their place now.

use std::path::PathBuf;

use dptext_core::EngineConfig;
use serde::Deserialize;

use crate::error::{ProxyError, Result};

/// Which mode masked users' sessions run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The database masks at the source (roles labelled `MASKED`).
    #[default]
    Database,
    /// The proxy allows safe statement shapes and sanitizes itself.
    Proxy,
}

/// `[masking]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Masking {
    /// The mode (default `database`).
    #[serde(default)]
    pub mode: Mode,
    /// The old place of `[engine] assets_dir`, still read (none by default).
    #[serde(default)]
    pub assets_dir: Option<PathBuf>,
    /// The old place of `[engine] device`, still read (none by default).
    #[serde(default)]
    pub device: Option<String>,
    /// Proxy mode: sanitizing threads (0, the default: one per core).
    #[serde(default)]
    pub workers: usize,
    /// Proxy mode: rows of one result sanitized together (default 256).
    #[serde(default = "default_batch_rows")]
    pub batch_rows: usize,
    /// Proxy mode: a JSON file of custom recognizers, allow list and score
    /// threshold for detection (`deidentify` and `ndd` rules), the format
    /// of the CLI's `--recognizers` (docs/detection.md); none by default.
    #[serde(default)]
    pub recognizers: Option<PathBuf>,
    /// Proxy mode: upstream roles, beyond superusers and the owners of
    /// protected and sanitized relations, whose relations masked sessions
    /// may read (an owner may change its relation during a session so
    /// that reading it runs its code); none by default.
    #[serde(default)]
    pub trusted_owners: Vec<String>,
    /// Proxy mode's engine settings: the `[engine]` table, with the old
    /// keys above applied ([`Masking::resolve_engine`], which
    /// [`crate::config::Config::parse`] calls).
    #[serde(skip)]
    pub engine: EngineConfig,
}

impl Default for Masking {
    fn default() -> Self {
        Masking {
            mode: Mode::default(),
            assets_dir: None,
            device: None,
            workers: 0,
            batch_rows: default_batch_rows(),
            recognizers: None,
            trusted_owners: Vec::new(),
            engine: EngineConfig::default(),
        }
    }
}

impl Masking {
    /// Sets [`Masking::engine`]: `engine` (the `[engine]` table) with the
    /// old `[masking]` keys `assets_dir` and `device` applied. `in_engine`
    /// says whether `[engine]` gave a key; a key given in both tables is
    /// an error.
    pub fn resolve_engine(
        &mut self,
        mut engine: EngineConfig,
        in_engine: impl Fn(&str) -> bool,
    ) -> Result<()> {
        let both = |key: &str| {
            ProxyError::Config(format!(
                "[masking] {key} and [engine] {key} are both given: keep [engine] {key} \
                 ([masking] is its old place)"
            ))
        };
        if let Some(dir) = &self.assets_dir {
            if in_engine("assets_dir") {
                return Err(both("assets_dir"));
            }
            engine.assets_dir = dptext_core::assets::resolve_dir(Some(dir));
        }
        if let Some(device) = &self.device {
            if in_engine("device") {
                return Err(both("device"));
            }
            engine.device = device.parse().map_err(|_| {
                ProxyError::Config(format!(
                    "[masking] device = \"{device}\": use \"cpu\" or \"cuda\" (in [engine])"
                ))
            })?;
        }
        self.engine = engine;
        Ok(())
    }
}

fn default_batch_rows() -> usize {
    256
}

/// `[[rule]]`: a protected column in proxy mode.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// `schema.table` (a bare name means `public`).
    pub table: String,
    /// The column.
    pub column: String,
    /// The rule, as after `MASKED WITH` in a label: `santext(eps => 3)`,
    /// `deidentify(strategy => typed_placeholder) THEN santext_plus(eps => 3)`.
    pub rule: String,
}

/// `[[sanitized]]`: a relation that already holds sanitized values (a view
/// or table built by `dptext.create_sanitized_view`, or by hand), relayed
/// as it is in proxy mode.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sanitized {
    /// `schema.relation` (a bare name means `public`).
    pub relation: String,
}

/// A `schema.name` split in two; a bare name is in `public`. Names are
/// taken as written (PostgreSQL's quoting rules do not apply in the
/// configuration): `Public.Records` names a table created with quotes.
pub fn qualified(name: &str) -> Result<(String, String)> {
    let parts: Vec<&str> = name.split('.').collect();
    match parts.as_slice() {
        [n] if !n.is_empty() => Ok(("public".into(), (*n).into())),
        [s, n] if !s.is_empty() && !n.is_empty() => Ok(((*s).into(), (*n).into())),
        _ => Err(ProxyError::Config(format!(
            "\"{name}\": give a relation as name or schema.name"
        ))),
    }
}

/// A checked proxy-mode rule.
#[derive(Debug, Clone)]
pub struct ColumnRule {
    /// Schema of the table.
    pub schema: String,
    /// The table.
    pub table: String,
    /// The column.
    pub column: String,
    /// The rule's mechanism, parameters filled in.
    pub spec: dptext_core::mechanisms::MechanismSpec,
    /// The rule as written (for messages).
    pub text: String,
}

impl ColumnRule {
    /// The rule's canonical label text, what the sanitizer knows it by.
    pub fn label(&self) -> String {
        label(&self.spec)
    }
}

/// The canonical label text of a rule (`MASKED WITH ...`, every
/// parameter written out): the same rule written two ways has one label.
pub fn label(spec: &dptext_core::mechanisms::MechanismSpec) -> String {
    dptext_core::rules::Rule {
        spec: spec.clone(),
        group_column: None,
    }
    .to_label()
}

/// Parses and checks every `[[rule]]`: names, the rule's syntax and
/// parameters, one rule per column.
pub fn column_rules(rules: &[RuleConfig]) -> Result<Vec<ColumnRule>> {
    let mut out: Vec<ColumnRule> = Vec::with_capacity(rules.len());
    for r in rules {
        let (schema, table) = qualified(&r.table)?;
        if r.column.is_empty() {
            return Err(ProxyError::Config(format!(
                "[[rule]] for {}: empty column",
                r.table
            )));
        }
        let parsed = dptext_core::rules::parse_column_label(&format!("MASKED WITH {}", r.rule))
            .map_err(|e| {
                ProxyError::Config(format!("[[rule]] {schema}.{table}.{}: {e}", r.column))
            })?;
        if out
            .iter()
            .any(|o| o.schema == schema && o.table == table && o.column == r.column)
        {
            return Err(ProxyError::Config(format!(
                "[[rule]] {schema}.{table}.{} is given twice",
                r.column
            )));
        }
        out.push(ColumnRule {
            schema,
            table,
            column: r.column.clone(),
            spec: parsed.spec,
            text: r.rule.clone(),
        });
    }
    Ok(out)
}

/// Checks `[masking]` against the rest of the configuration: proxy mode
/// needs the proxy's `key` (outputs are keyed by it) and at least one
/// rule or sanitized relation, and its settings must make sense.
pub fn validate(
    m: &Masking,
    rules: &[RuleConfig],
    sanitized: &[Sanitized],
    has_key: bool,
) -> Result<()> {
    column_rules(rules)?;
    for s in sanitized {
        qualified(&s.relation)?;
    }
    m.engine
        .validate()
        .map_err(|e| ProxyError::Config(format!("[engine] {e}")))?;
    if m.mode == Mode::Database {
        if !rules.is_empty() || !sanitized.is_empty() || !m.trusted_owners.is_empty() {
            return Err(ProxyError::Config(
                "[[rule]], [[sanitized]] and [masking] trusted_owners apply in proxy mode only: \
                 set [masking] mode = \"proxy\", or declare rules in the database (SECURITY \
                 LABEL FOR dptext ...)"
                    .into(),
            ));
        }
        return Ok(());
    }
    for (i, role) in m.trusted_owners.iter().enumerate() {
        if role.is_empty() {
            return Err(ProxyError::Config(
                "[masking] trusted_owners: a role name is empty".into(),
            ));
        }
        if m.trusted_owners[..i].contains(role) {
            return Err(ProxyError::Config(format!(
                "[masking] trusted_owners: role \"{role}\" is given twice"
            )));
        }
    }
    if !has_key {
        return Err(ProxyError::Config(
            "[masking] mode = \"proxy\" needs the proxy's key (key = ..., or DPTEXT_PROXY_KEY): \
             the proxy's outputs are keyed by it"
                .into(),
        ));
    }
    if m.batch_rows == 0 {
        return Err(ProxyError::Config(
            "[masking] batch_rows must be at least 1".into(),
        ));
    }
    Ok(())
}

/// What `dptext-proxy check` says about the mode.
pub fn describe(m: &Masking, rules: &[RuleConfig], sanitized: &[Sanitized]) -> String {
    match m.mode {
        Mode::Database => "masking mode: database (masked users' upstream roles must be labelled \
                           MASKED in a database with the dptext extension and a key; rows are \
                           relayed as the database masked them)"
            .into(),
        Mode::Proxy => format!(
            "masking mode: proxy (masked users' statements are parsed and allowed only in safe \
             shapes; {} protected column(s) and {} sanitized relation(s) from the configuration, \
             plus dptext.rules where the upstream has it; the proxy sanitizes on {} with {})",
            rules.len(),
            sanitized.len(),
            m.engine.device,
            if m.workers == 0 {
                "a thread per core".to_string()
            } else {
                format!("{} thread(s)", m.workers)
            }
        ),
    }
}
