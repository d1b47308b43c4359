//! Which of a client's start-up parameters reach the upstream session.
//!
//! A masked session's parameters are reduced to an allow-list of display
//! settings: `options` (`-c anything=...`) and every other setting are
//! dropped, whatever their value, so a client cannot start its upstream
//! session with settings its role defaults or the server would not give
//! it. Unmasked sessions get every parameter except the ones the proxy
//! decides itself (user, database, replication, protocol extensions).

use crate::error::{ProxyError, Result};

/// Start-up parameters a masked client may set (compared without regard
/// to case, as PostgreSQL compares setting names).
pub const MASKED_ALLOWED: [&str; 7] = [
    "application_name",
    "client_encoding",
    "DateStyle",
    "IntervalStyle",
    "TimeZone",
    "extra_float_digits",
    "search_path",
];

/// Spellings of UTF8 that PostgreSQL accepts as a client encoding.
pub(crate) fn is_utf8(v: &str) -> bool {
    ["UTF8", "UTF-8", "UNICODE"]
        .iter()
        .any(|u| v.trim().eq_ignore_ascii_case(u))
}

/// The parameters the upstream session starts with, from the client's
/// (`user` and `database` are the proxy's to choose and never pass).
/// A masked client asking for a client encoding other than UTF8 is refused.
pub fn upstream_params(client: &[(String, String)], masked: bool) -> Result<Vec<(String, String)>> {
    let mut kept = Vec::new();
    for (k, v) in client {
        let own =
            matches!(k.as_str(), "user" | "database" | "replication") || k.starts_with("_pq_.");
        let allowed = !masked || MASKED_ALLOWED.iter().any(|a| a.eq_ignore_ascii_case(k));
        if own || !allowed {
            tracing::debug!(parameter = %k, masked, "start-up parameter dropped");
            continue;
        }
        if masked && k.eq_ignore_ascii_case("client_encoding") && !is_utf8(v) {
            return Err(ProxyError::Protocol(format!(
                "masked sessions use client_encoding UTF8, not {v}: set PGCLIENTENCODING=UTF8"
            )));
        }
        kept.push((k.clone(), v.clone()));
    }
    if masked {
        // A synchronized scan starts where another session's scan of the
        // same large table is, at a page boundary: the first rows of an
        // unordered read would tell where pages begin, which follows from
        // the stored values' lengths. Masked sessions cannot set it back
        // (not an allowed setting).
        kept.push(("synchronize_seqscans".into(), "off".into()));
    }
    Ok(kept)
}

/// Refuses a StartupMessage that names a database other than the one
/// the proxy serves (`[upstream] dbname`), rather than connect it to that
/// one silently. No `database` parameter, or an empty one, takes the
/// served database.
pub fn check_database(client: &[(String, String)], served: &str) -> Result<()> {
    match client.iter().find(|(k, _)| k == "database") {
        Some((_, asked)) if !asked.is_empty() && asked != served => {
            Err(ProxyError::OtherDatabase {
                asked: asked.clone(),
                served: served.to_string(),
            })
        }
        _ => Ok(()),
    }
}

/// What a proxy-mode session adds to [`upstream_params`]: no parallel
/// query. A Gather interleaves the rows its workers send as their queues
/// fill, and a queue holds fewer rows the longer the raw values they
/// carry, so the order of an unordered read would follow raw lengths.
/// (Database mode sanitizes before any worker sends a row, so it keeps
/// parallel plans.) Masked clients cannot set it back: not an allowed
/// setting, and start-up parameters override role and database defaults.
pub fn proxy_mode_params(params: &mut Vec<(String, String)>) {
    params.retain(|(k, _)| !k.eq_ignore_ascii_case("max_parallel_workers_per_gather"));
    params.push(("max_parallel_workers_per_gather".into(), "0".into()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_database_is_refused_by_name() {
        let p = |db: &str| {
            vec![
                ("user".to_string(), "a".to_string()),
                ("database".to_string(), db.to_string()),
            ]
        };
        assert!(check_database(&p("clinic"), "clinic").is_ok());
        assert!(check_database(&p(""), "clinic").is_ok());
        assert!(check_database(&[("user".into(), "a".into())], "clinic").is_ok());
        let e = check_database(&p("postgres"), "clinic").unwrap_err();
        assert_eq!(e.sqlstate(), "3D000");
        let m = e.to_string();
        assert!(
            m.contains("\"postgres\"") && m.contains("dbname=clinic"),
            "{m}"
        );
    }

    fn params(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn masked_sessions_keep_only_the_allow_list() {
        let client = params(&[
            ("user", "analyst"),
            ("database", "clinic"),
            ("options", "-c search_path=evil -c dptext.key="),
            ("application_name", "psql"),
            ("datestyle", "ISO, MDY"),
            ("TimeZone", "UTC"),
            ("client_encoding", "utf8"),
            ("role", "postgres"),
            ("session_authorization", "postgres"),
            ("dptext.key", ""),
            ("replication", "database"),
            ("_pq_.extension", "x"),
            ("search_path", "public"),
        ]);
        assert_eq!(
            upstream_params(&client, true).unwrap(),
            params(&[
                ("application_name", "psql"),
                ("datestyle", "ISO, MDY"),
                ("TimeZone", "UTC"),
                ("client_encoding", "utf8"),
                ("search_path", "public"),
                ("synchronize_seqscans", "off"),
            ])
        );
        // A client cannot turn synchronized scans back on.
        let on = params(&[("synchronize_seqscans", "on")]);
        assert_eq!(
            upstream_params(&on, true).unwrap(),
            params(&[("synchronize_seqscans", "off")])
        );
    }

    #[test]
    fn proxy_mode_sessions_have_no_parallel_query() {
        let mut p = params(&[
            ("application_name", "bi"),
            ("MAX_PARALLEL_WORKERS_PER_GATHER", "8"),
        ]);
        proxy_mode_params(&mut p);
        assert_eq!(
            p,
            params(&[
                ("application_name", "bi"),
                ("max_parallel_workers_per_gather", "0")
            ])
        );
    }

    #[test]
    fn unmasked_sessions_keep_all_but_the_proxys_own() {
        let client = params(&[
            ("user", "admin"),
            ("database", "x"),
            ("options", "-c work_mem=64MB"),
            ("client_encoding", "LATIN1"),
            ("replication", "true"),
        ]);
        assert_eq!(
            upstream_params(&client, false).unwrap(),
            params(&[
                ("options", "-c work_mem=64MB"),
                ("client_encoding", "LATIN1")
            ])
        );
    }

    #[test]
    fn masked_sessions_refuse_other_encodings() {
        let e = upstream_params(&params(&[("client_encoding", "LATIN1")]), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("client_encoding UTF8"), "{e}");
        for ok in ["UTF8", "utf-8", "Unicode"] {
            upstream_params(&params(&[("client_encoding", ok)]), true).unwrap();
        }
    }
}
