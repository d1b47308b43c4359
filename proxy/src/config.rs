//! The TOML configuration: unknown keys are rejected, secrets may come
//! from the environment, rules are validated when the file is loaded.
//!
//! ```toml
//! listen = "127.0.0.1:6432"
//! key = "..."                 # or env DPTEXT_PROXY_KEY
//! assets_dir = "/var/lib/dptext/assets"   # optional
//!
//! [upstream]                  # host may be a unix-socket directory
//! host = "127.0.0.1"
//! port = 5432
//! user = "postgres"
//! password = "..."            # or env DPTEXT_PROXY_UPSTREAM_PASSWORD
//! dbname = "clinic"
//! sslmode = "prefer"          # disable | prefer | require | verify-ca | verify-full
//! sslrootcert = "ca.pem"      # for verify-ca / verify-full
//!
//! [[user]]
//! name = "analyst"
//! password = "..."
//! masked = true
//!
//! [[rule]]
//! table = "public.records"
//! column = "note"
//! mechanism = "santext"
//! params = { eps = 3.0 }
//!
//! [masking]
//! expressions = "sanitize"    # or "refuse"
//! default_mechanism = "santext"
//! default_params = { eps = 3.0 }
//!
//! [tls]                       # optional
//! cert = "server.crt"
//! key = "server.key"
//! required = false
//!
//! [metrics]                   # optional
//! listen = "127.0.0.1:9187"
//!
//! [limits]
//! max_message_bytes = 67108864
//! max_sessions = 256
//! idle_timeout_secs = 0
//! ```

use std::path::Path;

use dptext_core::mechanisms::MechanismSpec;
use serde::Deserialize;

use crate::error::{ProxyError, Result};

/// Environment variable holding the key (wins over the file).
pub const KEY_ENV: &str = "DPTEXT_PROXY_KEY";
/// Environment variable holding the upstream password (wins over the file).
pub const UPSTREAM_PASSWORD_ENV: &str = "DPTEXT_PROXY_UPSTREAM_PASSWORD";

/// A secret from the file or the environment: its `Debug` shows `***`,
/// so that printing a configuration never prints a key or a password.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address the proxy listens on.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Secret for keyed sanitization (at least 16 bytes).
    #[serde(default)]
    pub key: Option<Secret>,
    /// Assets directory (default: as `dptext assets path`).
    #[serde(default)]
    pub assets_dir: Option<String>,
    /// Sanitization worker threads (default: the number of cores).
    #[serde(default)]
    pub workers: Option<usize>,
    /// Where the masked LM of NDD runs: `"cpu"` (default) or `"cuda"` (a
    /// build with the `cuda` feature and ONNX Runtime's GPU library in
    /// `DPTEXT_ORT_LIB`; falls back to the CPU with one warning). The
    /// detection model always runs on the CPU.
    #[serde(default)]
    pub device: Option<String>,
    /// Directory of the masked LM that NDD uses (default: `<assets>/mlm`,
    /// the project's model), as `dptext.mlm_model`; relative to the
    /// proxy's working directory. Checked at load: it must exist.
    #[serde(default)]
    pub mlm_model: Option<String>,
    /// The real server.
    pub upstream: Upstream,
    /// Client users.
    #[serde(default, rename = "user")]
    pub users: Vec<User>,
    /// Column rules.
    #[serde(default, rename = "rule")]
    pub rules: Vec<RuleConfig>,
    /// What masked sessions do with unruled text.
    #[serde(default)]
    pub masking: Masking,
    /// Limits.
    #[serde(default)]
    pub limits: Limits,
    /// TLS for client connections.
    #[serde(default)]
    pub tls: Option<Tls>,
    /// Prometheus metrics endpoint.
    #[serde(default)]
    pub metrics: Option<Metrics>,
}

/// TLS for client connections (rustls).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    /// PEM certificate chain.
    pub cert: String,
    /// PEM private key.
    pub key: String,
    /// Refuse clients that do not ask for TLS.
    #[serde(default)]
    pub required: bool,
}

/// The metrics endpoint.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metrics {
    /// Address of the HTTP endpoint serving `/metrics`.
    pub listen: String,
}

fn default_listen() -> String {
    "127.0.0.1:6432".into()
}

/// Where and how the proxy connects upstream.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upstream {
    /// Host name, address, or unix-socket directory (starts with `/`).
    pub host: String,
    /// Port (also names the unix socket file).
    #[serde(default = "default_port")]
    pub port: u16,
    /// The proxy's own user.
    pub user: String,
    /// Its password, if the server asks for one.
    #[serde(default)]
    pub password: Option<Secret>,
    /// Database.
    pub dbname: String,
    /// TLS to the server over TCP, as libpq's `sslmode` (unix sockets never
    /// use TLS, as in libpq).
    #[serde(default)]
    pub sslmode: SslMode,
    /// PEM file of the certificate authorities that sign the server's
    /// certificate; needed for `verify-ca` and `verify-full`. With `require`
    /// it makes the proxy verify like `verify-ca`, as libpq does.
    #[serde(default)]
    pub sslrootcert: Option<String>,
}

/// How the proxy uses TLS to the server (libpq's `sslmode` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SslMode {
    /// Never.
    Disable,
    /// When the server offers it and the handshake succeeds, without
    /// checking its certificate (even with `sslrootcert`, unlike libpq);
    /// plain otherwise (libpq's default).
    #[default]
    Prefer,
    /// Always; the certificate is not checked unless `sslrootcert` is set.
    Require,
    /// Always, with a certificate signed by `sslrootcert`.
    VerifyCa,
    /// Always, with a certificate signed by `sslrootcert` for `host`.
    VerifyFull,
}

fn default_port() -> u16 {
    5432
}

/// A client user.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    /// Login name.
    pub name: String,
    /// Password (SCRAM-SHA-256).
    pub password: Secret,
    /// Whether this user's results are sanitized.
    #[serde(default = "default_true")]
    pub masked: bool,
}

fn default_true() -> bool {
    true
}

/// One column rule.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// `schema.table` (schema defaults to `public`).
    pub table: String,
    /// Column name.
    pub column: String,
    /// Mechanism name.
    pub mechanism: String,
    /// Its parameters.
    #[serde(default = "empty_table")]
    pub params: toml::Value,
}

fn empty_table() -> toml::Value {
    toml::Value::Table(toml::map::Map::new())
}

/// Text columns without a source table in masked sessions.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Expressions {
    /// Sanitize them with the default mechanism (default).
    #[default]
    Sanitize,
    /// Refuse the query.
    Refuse,
}

/// What masked sessions do with text that no rule covers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Masking {
    /// Sanitize or refuse expressions.
    #[serde(default)]
    pub expressions: Expressions,
    /// Mechanism for expressions and notification payloads.
    #[serde(default = "default_mechanism")]
    pub default_mechanism: String,
    /// Its parameters.
    #[serde(default = "default_params")]
    pub default_params: toml::Value,
    /// Read rules from the upstream's `dptext.rules` view too.
    #[serde(default = "default_true")]
    pub upstream_rules: bool,
    /// System catalog columns (`pg_catalog`, `information_schema`):
    /// `"sanitize"` (default) treats their text as computed text, since a
    /// session can write protected text into object names and function
    /// bodies; `"pass"` relays them (tools that introspect the schema), and
    /// opens that channel.
    #[serde(default)]
    pub catalog: Catalog,
}

/// What masked sessions do with text from the system catalogs.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Catalog {
    /// Sanitize like computed text (default).
    #[default]
    Sanitize,
    /// Relay unchanged.
    Pass,
}

impl Default for Masking {
    fn default() -> Self {
        Masking {
            expressions: Expressions::Sanitize,
            default_mechanism: default_mechanism(),
            default_params: default_params(),
            upstream_rules: true,
            catalog: Catalog::Sanitize,
        }
    }
}

fn default_mechanism() -> String {
    "santext".into()
}

fn default_params() -> toml::Value {
    let mut m = toml::map::Map::new();
    m.insert("eps".into(), toml::Value::Float(3.0));
    toml::Value::Table(m)
}

/// Limits protecting the proxy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Largest message accepted from a client, in bytes.
    #[serde(default = "default_max_message")]
    pub max_message_bytes: usize,
    /// Concurrent client sessions.
    #[serde(default = "default_max_sessions")]
    pub max_sessions: usize,
    /// Seconds a session may stay idle (0: no limit).
    #[serde(default)]
    pub idle_timeout_secs: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: default_max_message(),
            max_sessions: default_max_sessions(),
            idle_timeout_secs: 0,
        }
    }
}

fn default_max_message() -> usize {
    64 << 20
}
fn default_max_sessions() -> usize {
    256
}

fn json_of(v: &toml::Value) -> Result<serde_json::Value> {
    serde_json::to_value(v).map_err(|e| ProxyError::Config(e.to_string()))
}

impl RuleConfig {
    /// `(schema, table)`.
    pub fn qualified(&self) -> (String, String) {
        match self.table.split_once('.') {
            Some((s, t)) => (s.to_string(), t.to_string()),
            None => ("public".to_string(), self.table.clone()),
        }
    }

    /// The validated mechanism.
    pub fn spec(&self) -> Result<MechanismSpec> {
        MechanismSpec::parse(&self.mechanism, &json_of(&self.params)?)
            .map_err(|e| ProxyError::Config(format!("rule {}.{}: {e}", self.table, self.column)))
    }
}

impl Masking {
    /// The validated default mechanism.
    pub fn spec(&self) -> Result<MechanismSpec> {
        MechanismSpec::parse(&self.default_mechanism, &json_of(&self.default_params)?)
            .map_err(|e| ProxyError::Config(format!("masking.default_mechanism: {e}")))
    }
}

impl Config {
    /// Reads, applies environment overrides, and validates.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ProxyError::Config(format!("{}: {e}", path.display())))?;
        let mut c = Self::parse(&text)?;
        if let Ok(k) = std::env::var(KEY_ENV) {
            c.key = Some(Secret(k));
        }
        if let Ok(p) = std::env::var(UPSTREAM_PASSWORD_ENV) {
            c.upstream.password = Some(Secret(p));
        }
        c.validate()?;
        Ok(c)
    }

    /// Parses TOML text (no environment, no validation).
    pub fn parse(text: &str) -> Result<Self> {
        toml::from_str(text).map_err(|e| ProxyError::Config(e.to_string()))
    }

    /// Checks everything that can be checked without connecting.
    pub fn validate(&self) -> Result<()> {
        self.listen
            .parse::<std::net::SocketAddr>()
            .map_err(|e| ProxyError::Config(format!("listen = \"{}\": {e}", self.listen)))?;
        if self.users.is_empty() {
            return Err(ProxyError::Config(
                "no [[user]]: nobody could connect".into(),
            ));
        }
        let mut names = std::collections::HashSet::new();
        for u in &self.users {
            if !names.insert(&u.name) {
                return Err(ProxyError::Config(format!(
                    "user \"{}\" is defined twice",
                    u.name
                )));
            }
            if u.password.expose().is_empty() {
                return Err(ProxyError::Config(format!(
                    "user \"{}\" has an empty password",
                    u.name
                )));
            }
        }
        for r in &self.rules {
            r.spec()?;
        }
        self.masking.spec()?;
        self.device()?;
        if let Some(dir) = &self.mlm_model {
            let p = std::path::Path::new(dir);
            if !p.join("model.onnx").is_file() {
                return Err(ProxyError::Config(format!(
                    "mlm_model = \"{dir}\": no model.onnx there"
                )));
            }
        }
        if let Some(k) = &self.key {
            if k.expose().len() < dptext_core::rng::MIN_KEY_BYTES {
                return Err(ProxyError::Config(format!(
                    "key: must be at least {} bytes",
                    dptext_core::rng::MIN_KEY_BYTES
                )));
            }
        }
        if let Some(t) = &self.tls {
            crate::tls::acceptor(t)?;
        }
        crate::tls::upstream_connector(&self.upstream)?;
        if let Some(m) = &self.metrics {
            m.listen.parse::<std::net::SocketAddr>().map_err(|e| {
                ProxyError::Config(format!("metrics.listen = \"{}\": {e}", m.listen))
            })?;
        }
        if self.limits.max_message_bytes < 1024 {
            return Err(ProxyError::Config(
                "limits.max_message_bytes must be at least 1024".into(),
            ));
        }
        Ok(())
    }

    /// The device the models run on.
    pub fn device(&self) -> Result<dptext_core::runtime::Device> {
        self.device
            .as_deref()
            .unwrap_or("cpu")
            .parse()
            .map_err(|e| ProxyError::Config(format!("{e}")))
    }

    /// The random mode: keyed with the key, else the OS generator.
    pub fn random_mode(&self) -> Result<dptext_core::RandomMode> {
        Ok(dptext_core::RandomMode::from_settings(
            None,
            self.key.as_ref().map(|k| k.expose().as_bytes()),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
listen = "127.0.0.1:6432"
key = "0123456789abcdef0123"
[upstream]
host = "/tmp"
user = "postgres"
dbname = "clinic"
[[user]]
name = "analyst"
password = "secret"
[[rule]]
table = "public.records"
column = "note"
mechanism = "santext"
params = { eps = 3.0 }
"#;

    #[test]
    fn a_good_file_validates() {
        let c = Config::parse(GOOD).unwrap();
        c.validate().unwrap();
        assert_eq!(c.upstream.port, 5432);
        assert!(c.users[0].masked);
        assert_eq!(c.rules[0].qualified(), ("public".into(), "records".into()));
        assert_eq!(c.masking.expressions, Expressions::Sanitize);
    }

    #[test]
    fn device_and_model_directory_are_read_and_checked() {
        use dptext_core::runtime::Device;
        let c = Config::parse(GOOD).unwrap();
        assert_eq!(c.device().unwrap(), Device::Cpu);
        assert_eq!(c.mlm_model, None);
        let mlm = concat!(env!("CARGO_MANIFEST_DIR"), "/../models/mlm");
        let with = GOOD.replace(
            "key =",
            &format!("device = \"cuda\"\nmlm_model = \"{mlm}\"\nkey ="),
        );
        let c = Config::parse(&with).unwrap();
        c.validate().unwrap();
        assert_eq!(c.device().unwrap(), Device::Cuda);
        assert_eq!(c.mlm_model.as_deref(), Some(mlm));
        let c = Config::parse(&with.replace(mlm, "/nonexistent/mlm")).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("mlm_model") && e.contains("no model.onnx"),
            "{e}"
        );
        let c = Config::parse(&GOOD.replace("key =", "device = \"tpu\"\nkey =")).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("device") && e.contains("tpu"), "{e}");
    }

    #[test]
    fn secrets_do_not_print() {
        let c = Config::parse(GOOD).unwrap();
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("0123456789abcdef0123") && !shown.contains("secret"),
            "{shown}"
        );
    }

    #[test]
    fn unknown_keys_and_bad_rules_are_refused() {
        let e = Config::parse(&GOOD.replace("listen =", "lisen ="))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `lisen`"), "{e}");
        let c = Config::parse(&GOOD.replace("eps = 3.0", "eps = -1.0")).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("rule public.records.note") && e.contains("must be > 0"),
            "{e}"
        );
        let c = Config::parse(&GOOD.replace("0123456789abcdef0123", "short")).unwrap();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("at least 16 bytes"));
        let c = Config::parse(&GOOD.replace("127.0.0.1:6432", "nowhere")).unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("listen"));
    }
}
