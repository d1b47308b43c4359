//! The masking check: before a masked user's session starts, the proxy
//! proves that its upstream role is masked at the source.
//!
//! The proxy opens a control connection of its own as the user's upstream
//! role, with fixed start-up parameters (never the client's: a client
//! option could otherwise change what the check sees), makes sure the
//! extension's `dptext.session_masking()` is the extension's own function,
//! calls it, and lets the session start only when the database reports the
//! session masked (`masked`) and keyed (`keyed`). Anything else, an error
//! included, refuses the session with a message saying what to fix.

use serde::Deserialize;

use crate::config;
use crate::error::{ProxyError, Result};
use crate::upstream::{self, Login};

/// The control connection's start-up parameters. `search_path` keeps role
/// defaults (`ALTER ROLE ... SET search_path`) from changing what the
/// check's names resolve to; start-up parameters win over role defaults.
const CONTROL_PARAMS: [(&str, &str); 5] = [
    ("application_name", "dptext-proxy masking check"),
    ("client_encoding", "UTF8"),
    ("DateStyle", "ISO"),
    ("search_path", "pg_catalog"),
    ("default_transaction_read_only", "on"),
];

/// The extension's version, and whether `dptext.session_masking()` exists
/// and belongs to the extension (a look-alike that a role created in a
/// schema named `dptext` must not pass).
const EXTENSION_SQL: &str = "\
SELECT e.extversion, EXISTS (SELECT 1 FROM pg_catalog.pg_depend d \
  WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass \
    AND d.objid = pg_catalog.to_regprocedure('dptext.session_masking()') \
    AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass \
    AND d.refobjid = e.oid AND d.deptype = 'e') \
FROM pg_catalog.pg_extension e WHERE e.extname = 'dptext'";

const MASKING_SQL: &str = "SELECT dptext.session_masking()::pg_catalog.text";

/// What `dptext.session_masking()` reports about the calling session.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SessionMasking {
    /// The login or current role is labelled `MASKED`.
    pub masked: bool,
    /// A key is in force, so masked reads are allowed.
    pub keyed: bool,
    /// Which key, when keyed (an identifier, not the key).
    #[serde(default)]
    pub key_id: Option<String>,
    /// The session's login role.
    pub login_role: String,
    /// Its current role.
    #[serde(default)]
    pub current_role: String,
    /// The role is a superuser.
    #[serde(default)]
    pub superuser: bool,
    /// How many tables the role may write.
    #[serde(default)]
    pub writable_tables: i64,
    /// The extension's version.
    #[serde(default)]
    pub version: String,
}

/// What the control connection found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// The database has no extension `dptext`.
    NoExtension,
    /// The extension (of this version) has no `dptext.session_masking()`.
    NoFunction {
        /// `pg_extension.extversion`.
        version: String,
    },
    /// The function's report.
    Reported(SessionMasking),
}

/// Asks the upstream, as `login`, over a control connection of its own.
pub async fn probe(cfg: &config::Upstream, login: &Login) -> Result<Probe> {
    on_control(cfg, login, |mut up| async move {
        let failed = |what: &str, e: String| ProxyError::Upstream(format!("{what}: {e}"));
        let rows = up
            .query(EXTENSION_SQL)
            .await?
            .map_err(|e| failed("reading pg_extension", e))?;
        let Some(row) = rows.first() else {
            return Ok(Probe::NoExtension);
        };
        let version = row.first().cloned().flatten().unwrap_or_default();
        if row.get(1).cloned().flatten().as_deref() != Some("t") {
            return Ok(Probe::NoFunction { version });
        }
        let rows = up
            .query(MASKING_SQL)
            .await?
            .map_err(|e| failed("calling dptext.session_masking()", e))?;
        let text = rows
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .ok_or_else(|| {
                ProxyError::Upstream("dptext.session_masking() returned nothing".into())
            })?;
        let report = serde_json::from_str(&text).map_err(|e| {
            ProxyError::Upstream(format!("dptext.session_masking() returned {text}: {e}"))
        })?;
        Ok(Probe::Reported(report))
    })
    .await
}

/// `ask` over a control connection of its own as `login`, all of it within
/// `upstream.connect_timeout_secs`.
async fn on_control<T, F, Fut>(cfg: &config::Upstream, login: &Login, ask: F) -> Result<T>
where
    F: FnOnce(upstream::Upstream) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let params: Vec<(String, String)> = CONTROL_PARAMS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let limit = std::time::Duration::from_secs(cfg.connect_timeout_secs);
    let run = async {
        let up = upstream::connect(cfg, login, &params).await?;
        ask(up).await
    };
    tokio::time::timeout(limit, run).await.map_err(|_| {
        ProxyError::Upstream(format!(
            "no answer within {} s (upstream.connect_timeout_secs)",
            cfg.connect_timeout_secs
        ))
    })?
}

/// The text columns without a dptext rule that `login` may read
/// (`dptext.unlabelled_text_columns`, as `schema.table.column`), and
/// whether `dptext.deny_unlabelled_text` is on for it: what
/// `dptext-proxy check` reports for a masked user in database mode.
pub async fn unlabelled_text(cfg: &config::Upstream, login: &Login) -> Result<(Vec<String>, bool)> {
    on_control(cfg, login, |mut up| async move {
        let rows = up
            .query(
                "SELECT pg_catalog.format('%I.%I.%I', schema_name, table_name, column_name) \
                 FROM dptext.unlabelled_text_columns \
                 WHERE CURRENT_USER OPERATOR(pg_catalog.=) ANY (masked_readers) ORDER BY 1",
            )
            .await?
            .map_err(|e| {
                ProxyError::Upstream(format!("reading dptext.unlabelled_text_columns: {e}"))
            })?;
        let deny = up
            .query("SELECT pg_catalog.current_setting('dptext.deny_unlabelled_text', true)")
            .await?
            .map_err(|e| {
                ProxyError::Upstream(format!("reading dptext.deny_unlabelled_text: {e}"))
            })?;
        let on = deny
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .is_some_and(|v| v == "on");
        Ok((
            rows.into_iter()
                .filter_map(|r| r.into_iter().next().flatten())
                .collect(),
            on,
        ))
    })
    .await
}

/// SQL for a role name as an identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The report when `probe` shows that a session as `role` in `dbname` is
/// masked and keyed; otherwise why not and what to fix.
pub fn verdict<'a>(role: &str, dbname: &str, probe: &'a Probe) -> Result<&'a SessionMasking> {
    let refuse = |why: String| Err(ProxyError::MaskingUnavailable(why));
    match probe {
        Probe::NoExtension => refuse(format!(
            "extension dptext is not installed in database \"{dbname}\", so it cannot mask \
             upstream role \"{role}\": run CREATE EXTENSION dptext there"
        )),
        Probe::NoFunction { version } => refuse(format!(
            "extension dptext {version} in database \"{dbname}\" has no \
             dptext.session_masking(): update it (ALTER EXTENSION dptext UPDATE)"
        )),
        Probe::Reported(r) if r.login_role != role => refuse(format!(
            "the masking check logged in as \"{role}\" but the server reports login role \"{}\"",
            r.login_role
        )),
        Probe::Reported(r) if !r.masked => refuse(format!(
            "upstream role \"{role}\" is not labelled MASKED: run SECURITY LABEL FOR dptext ON \
             ROLE {} IS 'MASKED'",
            ident(role)
        )),
        Probe::Reported(r) if !r.keyed => refuse(format!(
            "no key is in force for upstream role \"{role}\" in database \"{dbname}\", so masked \
             reads would be refused: set dptext.key_file for it (ALTER ROLE {} SET \
             dptext.key_file = '/path/to/key', or in postgresql.conf)",
            ident(role)
        )),
        Probe::Reported(r) => Ok(r),
    }
}

/// The masking check of one session of client user `user`: the report, or
/// a [`ProxyError::MaskingUnavailable`] naming the user and what to fix.
/// Any failure refuses (fail closed).
pub async fn check(cfg: &config::Upstream, login: &Login, user: &str) -> Result<SessionMasking> {
    let refused = |why: String| {
        ProxyError::MaskingUnavailable(format!(
            "dptext-proxy: masked user \"{user}\" refused: {why}"
        ))
    };
    let probe = probe(cfg, login).await.map_err(|e| {
        refused(format!(
            "checking that upstream role \"{}\" is masked failed: {e}",
            login.user
        ))
    })?;
    match verdict(&login.user, &cfg.dbname, &probe) {
        Ok(r) => Ok(r.clone()),
        Err(e) => Err(refused(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(json: &str) -> Probe {
        Probe::Reported(serde_json::from_str(json).unwrap())
    }

    const GOOD: &str = r#"{"masked": true, "keyed": true, "key_id": "ab12", "login_role": "ana",
        "current_role": "ana", "superuser": false, "writable_tables": 0, "version": "0.1.0",
        "some_later_field": 1}"#;

    #[test]
    fn masked_and_keyed_passes() {
        let p = report(GOOD);
        let r = verdict("ana", "clinic", &p).unwrap();
        assert_eq!(r.key_id.as_deref(), Some("ab12"));
    }

    #[test]
    fn every_other_answer_refuses_and_says_what_to_fix() {
        let cases = [
            (Probe::NoExtension, "CREATE EXTENSION dptext"),
            (
                Probe::NoFunction {
                    version: "0.0.9".into(),
                },
                "ALTER EXTENSION dptext UPDATE",
            ),
            (
                report(&GOOD.replace("\"masked\": true", "\"masked\": false")),
                "SECURITY LABEL FOR dptext ON ROLE \"ana\" IS 'MASKED'",
            ),
            (
                report(&GOOD.replace("\"keyed\": true", "\"keyed\": false")),
                "set dptext.key_file",
            ),
            (
                report(&GOOD.replace("\"login_role\": \"ana\"", "\"login_role\": \"x\"")),
                "login role \"x\"",
            ),
        ];
        for (probe, fix) in cases {
            let e = verdict("ana", "clinic", &probe).unwrap_err();
            assert_eq!(e.sqlstate(), "28000");
            assert!(e.to_string().contains(fix), "{e}");
        }
    }

    #[test]
    fn a_report_without_masked_or_keyed_does_not_parse() {
        for drop in ["\"masked\": true,", "\"keyed\": true,"] {
            let r = serde_json::from_str::<SessionMasking>(&GOOD.replace(drop, ""));
            assert!(r.is_err(), "{drop}");
        }
    }

    #[test]
    fn role_names_are_quoted_as_identifiers() {
        assert_eq!(ident("Data \"Team\""), "\"Data \"\"Team\"\"\"");
    }
}
