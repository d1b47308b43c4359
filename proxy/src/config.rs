//! The TOML configuration: unknown keys are rejected, secrets may come
//! from the environment, everything that can be checked without
//! connecting is checked when the file is loaded.
//!
//! ```toml
//! listen = "127.0.0.1:6432"
//! key = "..."                 # or env DPTEXT_PROXY_KEY
//!
//! [upstream]                  # host may be a unix-socket directory
//! host = "127.0.0.1"
//! port = 5432
//! dbname = "clinic"
//! sslmode = "prefer"          # disable | prefer | require | verify-ca | verify-full
//! sslrootcert = "ca.pem"      # for verify-ca / verify-full
//! connect_timeout_secs = 10
//!
//! [[user]]
//! name = "analyst"
//! password = "..."
//! masked = true
//! upstream_user = "analyst_masked"
//! upstream_password = "..."   # or env DPTEXT_PROXY_UPSTREAM_PASSWORD_ANALYST
//!
//! [tls]                       # optional
//! cert = "server.crt"
//! key = "server.key"
//! required = false
//!
//! [metrics]                   # optional
//! listen = "127.0.0.1:9187"
//!
//! [masking]                   # optional: see crate::mode
//! mode = "database"           # or "proxy"
//!
//! [engine]                    # optional, proxy mode: dptext_core::EngineConfig
//! assets_dir = "/var/lib/dptext/assets"
//! device = "cpu"              # or "cuda"
//! glove_words = 50000
//!
//! [limits]
//! max_message_bytes = 67108864
//! max_sessions = 256
//! max_pending = 64
//! startup_timeout_secs = 10
//! idle_timeout_secs = 0
//! ```

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use crate::error::{ProxyError, Result};

/// Environment variable holding the key (wins over the file).
pub const KEY_ENV: &str = "DPTEXT_PROXY_KEY";
/// Prefix of the environment variables holding upstream passwords: the
/// client user's name follows, see [`User::password_env`].
pub const UPSTREAM_PASSWORD_ENV_PREFIX: &str = "DPTEXT_PROXY_UPSTREAM_PASSWORD_";
/// Fewest bytes a key may have.
pub const MIN_KEY_BYTES: usize = 16;

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
    /// Address the proxy listens on (default `127.0.0.1:6432`).
    #[serde(default = "default_listen")]
    pub listen: String,
    /// The proxy's own secret (at least 16 bytes): the SCRAM salts of
    /// client users derive from it. Default: a random one per process.
    #[serde(default)]
    pub key: Option<Secret>,
    /// The real server.
    pub upstream: Upstream,
    /// Client users.
    #[serde(default, rename = "user")]
    pub users: Vec<User>,
    /// Limits.
    #[serde(default)]
    pub limits: Limits,
    /// TLS for client connections.
    #[serde(default)]
    pub tls: Option<Tls>,
    /// Prometheus metrics endpoint.
    #[serde(default)]
    pub metrics: Option<Metrics>,
    /// The masking mode of masked users ([`crate::mode`]).
    #[serde(default)]
    pub masking: crate::mode::Masking,
    /// `[engine]`: proxy mode's engine settings, core's
    /// [`dptext_core::EngineConfig`] (every key optional, with core's
    /// defaults; an unknown key is an error). [`Config::parse`] moves them
    /// into [`crate::mode::Masking::engine`], where the sanitizer reads them.
    #[serde(default)]
    engine: dptext_core::EngineConfig,
    /// Proxy mode: protected columns and their rules.
    #[serde(default, rename = "rule")]
    pub rules: Vec<crate::mode::RuleConfig>,
    /// Proxy mode: relations relayed as they are.
    #[serde(default)]
    pub sanitized: Vec<crate::mode::Sanitized>,
}

/// TLS for client connections (rustls).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    /// PEM certificate chain.
    pub cert: String,
    /// PEM private key.
    pub key: String,
    /// Refuse clients that do not ask for TLS (default false).
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

/// Where the proxy connects upstream. Who it connects as is per user
/// ([`User::upstream_user`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upstream {
    /// Host name, address, or unix-socket directory (starts with `/`).
    pub host: String,
    /// Port (also names the unix socket file; default 5432).
    #[serde(default = "default_port")]
    pub port: u16,
    /// Database.
    pub dbname: String,
    /// TLS to the server over TCP, as libpq's `sslmode` (unix sockets never
    /// use TLS, as in libpq; default `prefer`).
    #[serde(default)]
    pub sslmode: SslMode,
    /// PEM file of the certificate authorities that sign the server's
    /// certificate; needed for `verify-ca` and `verify-full`. With `require`
    /// it makes the proxy verify like `verify-ca`, as libpq does.
    #[serde(default)]
    pub sslrootcert: Option<String>,
    /// Seconds a connection to the server, its start-up and the masking
    /// check may take (default 10).
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_secs: u64,
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

fn default_connect_timeout() -> u64 {
    10
}

/// A client user and the upstream login it maps to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    /// Login name.
    pub name: String,
    /// Password (SCRAM-SHA-256).
    pub password: Secret,
    /// Whether this user may only see masked data (default true): its
    /// upstream role must be labelled `MASKED` in a database with the
    /// extension and a key, checked at every session start.
    #[serde(default = "default_true")]
    pub masked: bool,
    /// The upstream role this user's sessions log in as.
    pub upstream_user: String,
    /// Its password, when the server asks for one; the environment
    /// variable [`User::password_env`] wins.
    #[serde(default)]
    pub upstream_password: Option<Secret>,
    /// Allow other users with `shared_upstream = true` to use the same
    /// upstream role (default false: each user needs its own). Masked and
    /// unmasked users never share one.
    #[serde(default)]
    pub shared_upstream: bool,
}

fn default_true() -> bool {
    true
}

impl User {
    /// The environment variable that holds this user's upstream password:
    /// `DPTEXT_PROXY_UPSTREAM_PASSWORD_` and the client user's name in
    /// upper case, every character other than `A-Z` and `0-9` written as
    /// `_` (user `data-team` reads `DPTEXT_PROXY_UPSTREAM_PASSWORD_DATA_TEAM`).
    pub fn password_env(&self) -> String {
        let mut v = UPSTREAM_PASSWORD_ENV_PREFIX.to_string();
        v.extend(self.name.chars().map(|c| {
            let c = c.to_ascii_uppercase();
            if c.is_ascii_uppercase() || c.is_ascii_digit() {
                c
            } else {
                '_'
            }
        }));
        v
    }
}

/// Limits protecting the proxy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Largest message accepted from a client or relayed from the server,
    /// in bytes, judged by its declared length before any of it is read
    /// (default 64 MiB).
    #[serde(default = "default_max_message")]
    pub max_message_bytes: usize,
    /// Concurrent authenticated sessions (default 256); follows reloads.
    #[serde(default = "default_max_sessions")]
    pub max_sessions: usize,
    /// Connections still in start-up or authentication (default 64),
    /// counted apart from `max_sessions`; when all are taken, a new
    /// connection closes the one that has waited longest. Follows reloads.
    #[serde(default = "default_max_pending")]
    pub max_pending: usize,
    /// Seconds from accepting a connection to the end of the client's
    /// authentication (default 10), however many requests it sends.
    #[serde(default = "default_startup_timeout")]
    pub startup_timeout_secs: u64,
    /// Seconds a client may stay silent while none of its queries runs
    /// (0, the default: no limit).
    #[serde(default)]
    pub idle_timeout_secs: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: default_max_message(),
            max_sessions: default_max_sessions(),
            max_pending: default_max_pending(),
            startup_timeout_secs: default_startup_timeout(),
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
fn default_max_pending() -> usize {
    64
}
fn default_startup_timeout() -> u64 {
    10
}

impl Config {
    /// Reads, applies environment overrides, and validates.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ProxyError::Config(format!("{}: {e}", path.display())))?;
        let mut c = Self::parse(&text)?;
        c.apply_env(|name| std::env::var(name).ok());
        c.validate()?;
        Ok(c)
    }

    /// Parses TOML text (no environment, no validation), and settles
    /// proxy mode's engine settings ([`crate::mode::Masking::resolve_engine`]).
    pub fn parse(text: &str) -> Result<Self> {
        let mut c = Self::parse_tables(text)?;
        // Which keys [engine] gave, to refuse one given in [masking] too.
        let tables: toml::Table = toml::from_str(text).unwrap_or_default();
        let engine_table = tables.get("engine").and_then(toml::Value::as_table);
        let engine = c.engine.clone();
        c.masking.resolve_engine(engine, |key| {
            engine_table.is_some_and(|t| t.contains_key(key))
        })?;
        Ok(c)
    }

    fn parse_tables(text: &str) -> Result<Self> {
        toml::from_str(text).map_err(|e| {
            let e = e.to_string();
            if e.contains("unknown field `user`") || e.contains("unknown field `password`") {
                ProxyError::Config(format!(
                    "{e}\n[upstream] no longer holds credentials: give each [[user]] its own \
                     upstream_user and upstream_password"
                ))
            } else {
                ProxyError::Config(e)
            }
        })
    }

    /// Applies the environment (`get` reads one variable): the key and
    /// each user's upstream password.
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) {
        if let Some(k) = get(KEY_ENV) {
            self.key = Some(Secret(k));
        }
        for u in &mut self.users {
            if let Some(p) = get(&u.password_env()) {
                u.upstream_password = Some(Secret(p));
            }
        }
    }

    /// Checks everything that can be checked without connecting or
    /// reading other files (the TLS files: [`crate::tls::check`]).
    pub fn validate(&self) -> Result<()> {
        self.listen
            .parse::<std::net::SocketAddr>()
            .map_err(|e| ProxyError::Config(format!("listen = \"{}\": {e}", self.listen)))?;
        if self.users.is_empty() {
            return Err(ProxyError::Config(
                "no [[user]]: nobody could connect".into(),
            ));
        }
        self.validate_users()?;
        if let Some(k) = &self.key {
            if k.expose().len() < MIN_KEY_BYTES {
                return Err(ProxyError::Config(format!(
                    "key: must be at least {MIN_KEY_BYTES} bytes"
                )));
            }
        }
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
        for (key, value) in [
            ("max_sessions", self.limits.max_sessions as u64),
            ("max_pending", self.limits.max_pending as u64),
            ("startup_timeout_secs", self.limits.startup_timeout_secs),
        ] {
            if value == 0 {
                return Err(ProxyError::Config(format!(
                    "limits.{key} must be at least 1"
                )));
            }
        }
        crate::mode::validate(
            &self.masking,
            &self.rules,
            &self.sanitized,
            self.key.is_some(),
        )?;
        if self.upstream.connect_timeout_secs == 0 {
            return Err(ProxyError::Config(
                "upstream.connect_timeout_secs must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// Names, passwords, and who may share an upstream role: two users
    /// share one only when both say `shared_upstream = true`, and a masked
    /// user never shares with an unmasked one (the unmasked one could set
    /// the role's defaults and read the masked one's statements).
    fn validate_users(&self) -> Result<()> {
        let mut names = std::collections::HashSet::new();
        let mut envs: HashMap<String, &str> = HashMap::new();
        let mut by_role: HashMap<&str, &User> = HashMap::new();
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
            if u.upstream_user.is_empty() {
                return Err(ProxyError::Config(format!(
                    "user \"{}\" has an empty upstream_user",
                    u.name
                )));
            }
            if let Some(other) = envs.insert(u.password_env(), &u.name) {
                return Err(ProxyError::Config(format!(
                    "users \"{other}\" and \"{}\" would both read {}: rename one",
                    u.name,
                    u.password_env()
                )));
            }
            if let Some(first) = by_role.insert(&u.upstream_user, u) {
                let role = &u.upstream_user;
                if first.masked != u.masked {
                    return Err(ProxyError::Config(format!(
                        "users \"{}\" and \"{}\" map to upstream role \"{role}\", one masked and \
                         one not: give each its own upstream_user",
                        first.name, u.name
                    )));
                }
                if !(first.shared_upstream && u.shared_upstream) {
                    return Err(ProxyError::Config(format!(
                        "users \"{}\" and \"{}\" map to the same upstream role \"{role}\": give \
                         each its own upstream_user, or set shared_upstream = true on both",
                        first.name, u.name
                    )));
                }
            }
        }
        Ok(())
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
dbname = "clinic"
[[user]]
name = "analyst"
password = "secret"
upstream_user = "analyst_masked"
upstream_password = "upstream-secret"
[[user]]
name = "data-team"
password = "secret2"
masked = false
upstream_user = "reader"
"#;

    #[test]
    fn a_good_file_validates_with_its_defaults() {
        let c = Config::parse(GOOD).unwrap();
        c.validate().unwrap();
        assert_eq!(c.upstream.port, 5432);
        assert_eq!(c.upstream.sslmode, SslMode::Prefer);
        assert_eq!(c.upstream.connect_timeout_secs, 10);
        assert!(c.users[0].masked && !c.users[0].shared_upstream);
        assert_eq!(c.users[0].upstream_user, "analyst_masked");
        assert_eq!(c.limits.max_message_bytes, 64 << 20);
        assert_eq!(c.limits.max_sessions, 256);
        assert_eq!(c.limits.max_pending, 64);
        assert_eq!(c.limits.startup_timeout_secs, 10);
        assert_eq!(c.limits.idle_timeout_secs, 0);
    }

    #[test]
    fn an_empty_or_missing_engine_table_gives_cores_defaults() {
        let core = dptext_core::EngineConfig::new(dptext_core::assets::resolve_dir(None));
        for text in [GOOD.to_string(), format!("{GOOD}[engine]\n")] {
            let c = Config::parse(&text).unwrap();
            assert_eq!(c.masking.engine, core, "{text}");
        }
    }

    #[test]
    fn the_engine_table_sets_the_engine() {
        let c = Config::parse(&format!(
            "{GOOD}[engine]\nassets_dir = \"/srv/assets\"\nglove_words = 20000\n\
             max_input_bytes = 1000\nmax_detect_bytes = 500\ncache_bytes = 4096\n\
             mlm_batch = 8\nmodel_threads = 2\ndevice = \"cuda\"\nmlm_model = \"/srv/mlm\"\n\
             build_mappings = true\ndetect_batch = 1\n"
        ))
        .unwrap();
        c.validate().unwrap();
        assert_eq!(
            c.masking.engine,
            dptext_core::EngineConfig {
                glove_words: 20_000,
                max_input_bytes: 1000,
                max_detect_bytes: 500,
                cache_bytes: 4096,
                mlm_batch: 8,
                model_threads: 2,
                device: dptext_core::runtime::Device::Cuda,
                mlm_model: Some("/srv/mlm".into()),
                build_mappings: true,
                detect_batch: 1,
                ..dptext_core::EngineConfig::new("/srv/assets".into())
            }
        );
    }

    #[test]
    fn engine_keys_are_checked() {
        let e = Config::parse(&format!("{GOOD}[engine]\nglove_word = 20000\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `glove_word`"), "{e}");
        let e = Config::parse(&format!("{GOOD}[engine]\ndevice = \"tpu\"\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("tpu"), "{e}");
        let c = Config::parse(&format!("{GOOD}[engine]\nmlm_batch = 0\n")).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("[engine]") && e.contains("mlm_batch"), "{e}");
    }

    #[test]
    fn the_old_masking_keys_still_set_the_engine_but_not_twice() {
        let c = Config::parse(&format!(
            "{GOOD}[masking]\nassets_dir = \"/old/assets\"\ndevice = \"cuda\"\n"
        ))
        .unwrap();
        assert_eq!(
            c.masking.engine.assets_dir,
            std::path::Path::new("/old/assets")
        );
        assert_eq!(c.masking.engine.device, dptext_core::runtime::Device::Cuda);
        for key in ["assets_dir = \"/a\"", "device = \"cpu\""] {
            let e = Config::parse(&format!("{GOOD}[masking]\n{key}\n[engine]\n{key}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("both given"), "{e}");
        }
        let e = Config::parse(&format!("{GOOD}[masking]\ndevice = \"tpu\"\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"tpu\""), "{e}");
    }

    #[test]
    fn upstream_passwords_come_from_per_user_variables() {
        let mut c = Config::parse(GOOD).unwrap();
        assert_eq!(
            c.users[1].password_env(),
            "DPTEXT_PROXY_UPSTREAM_PASSWORD_DATA_TEAM"
        );
        c.apply_env(|name| match name {
            "DPTEXT_PROXY_UPSTREAM_PASSWORD_DATA_TEAM" => Some("from-env".into()),
            "DPTEXT_PROXY_KEY" => Some("a key from the environment".into()),
            _ => None,
        });
        assert_eq!(
            c.users[1].upstream_password.as_ref().map(Secret::expose),
            Some("from-env")
        );
        assert_eq!(
            c.users[0].upstream_password.as_ref().map(Secret::expose),
            Some("upstream-secret"),
            "a user without a variable keeps the file's password"
        );
        assert_eq!(
            c.key.as_ref().map(Secret::expose),
            Some("a key from the environment")
        );
    }

    #[test]
    fn secrets_do_not_print() {
        let c = Config::parse(GOOD).unwrap();
        let shown = format!("{c:?}");
        for s in ["0123456789abcdef0123", "secret", "upstream-secret"] {
            assert!(!shown.contains(s), "{shown}");
        }
    }

    #[test]
    fn users_share_an_upstream_role_only_when_both_say_so_and_both_are_masked_alike() {
        let two = |a: &str, b: &str| {
            format!(
                "[upstream]\nhost = \"/tmp\"\ndbname = \"d\"\n\
                 [[user]]\nname = \"a\"\npassword = \"p\"\nupstream_user = \"r\"\n{a}\n\
                 [[user]]\nname = \"b\"\npassword = \"p\"\nupstream_user = \"r\"\n{b}\n"
            )
        };
        let check = |a: &str, b: &str| Config::parse(&two(a, b)).unwrap().validate();
        let e = check("", "").unwrap_err().to_string();
        assert!(
            e.contains("same upstream role \"r\"") && e.contains("shared_upstream"),
            "{e}"
        );
        let e = check("shared_upstream = true", "").unwrap_err().to_string();
        assert!(e.contains("shared_upstream = true on both"), "{e}");
        check("shared_upstream = true", "shared_upstream = true").unwrap();
        let e = check(
            "shared_upstream = true",
            "shared_upstream = true\nmasked = false",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("one masked and one not"), "{e}");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        let parse_err = |text: &str| Config::parse(text).unwrap_err().to_string();
        let e = parse_err(&GOOD.replace("listen =", "lisen ="));
        assert!(e.contains("unknown field `lisen`"), "{e}");
        // The old shared upstream login: refused with what to do instead.
        let e = parse_err(&GOOD.replace("dbname =", "user = \"postgres\"\ndbname ="));
        assert!(e.contains("upstream_user"), "{e}");
        // Keys of the removed output rewriting.
        let e = parse_err(&format!("{GOOD}[masking]\nexpressions = \"refuse\"\n"));
        assert!(e.contains("unknown field `expressions`"), "{e}");
        // Proxy mode needs the key; rules belong to proxy mode.
        let no_key = GOOD.replace("key = \"0123456789abcdef0123\"\n", "");
        let c = Config::parse(&format!("{no_key}[masking]\nmode = \"proxy\"\n")).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("needs the proxy's key"), "{e}");
        let c = Config::parse(&format!(
            "{GOOD}[[rule]]\ntable = \"t\"\ncolumn = \"c\"\nrule = \"santext(eps => 3)\"\n"
        ))
        .unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("proxy mode only"), "{e}");
        let c = Config::parse(&format!(
            "{GOOD}[masking]\nmode = \"proxy\"\n[[rule]]\ntable = \"t\"\ncolumn = \"c\"\nrule = \"santext(eps => -3)\"\n"
        ))
        .unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("[[rule]] public.t.c"), "{e}");
        // Trusted owners: proxy mode only, named, each once.
        let c = Config::parse(&format!("{GOOD}[masking]\ntrusted_owners = [\"etl\"]\n")).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("trusted_owners apply in proxy mode only"), "{e}");
        let rule = "[[rule]]\ntable = \"t\"\ncolumn = \"c\"\nrule = \"santext(eps => 3)\"\n";
        for (owners, says) in [("\"\"", "is empty"), ("\"etl\", \"etl\"", "given twice")] {
            let c = Config::parse(&format!(
                "{GOOD}[masking]\nmode = \"proxy\"\ntrusted_owners = [{owners}]\n{rule}"
            ))
            .unwrap();
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        let c = Config::parse(&format!(
            "{GOOD}[masking]\nmode = \"proxy\"\ntrusted_owners = [\"etl\", \"ops\"]\n{rule}"
        ))
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.masking.trusted_owners, ["etl", "ops"]);
        let e = parse_err(&GOOD.replace("upstream_user = \"reader\"\n", ""));
        assert!(e.contains("missing field `upstream_user`"), "{e}");
        let c = Config::parse(&GOOD.replace("0123456789abcdef0123", "short")).unwrap();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("at least 16 bytes"));
        for zero in ["max_sessions", "max_pending", "startup_timeout_secs"] {
            let c = Config::parse(&format!("{GOOD}[limits]\n{zero} = 0\n")).unwrap();
            let e = c.validate().unwrap_err().to_string();
            assert!(
                e.contains(&format!("limits.{zero} must be at least 1")),
                "{e}"
            );
        }
        let c = Config::parse(&GOOD.replace("127.0.0.1:6432", "nowhere")).unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("listen"));
        let c = Config::parse(&GOOD.replace("name = \"data-team\"", "name = \"analyst\"")).unwrap();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("defined twice"));
        let c = Config::parse(&GOOD.replace("name = \"data-team\"", "name = \"ANALYST\"")).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("DPTEXT_PROXY_UPSTREAM_PASSWORD_ANALYST"), "{e}");
    }
}
