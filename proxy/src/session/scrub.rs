//! What proxy mode lets through of the server's errors and notices: the
//! severity, the SQLSTATE and a message that cannot quote data.
//!
//! Every other field goes (detail, hint, context, position, internal
//! query, schema, table, column, type and constraint names, file, line,
//! routine): detail and context quote values, the rest is of no use to a
//! masked user. The message stays only for SQLSTATEs whose messages
//! PostgreSQL builds from the statement's own names, types, settings and
//! the session's state, never from a value it reads or computes
//! ([`MESSAGE_KEPT`]); any other gets a fixed message naming the SQLSTATE
//! (and its condition, for the usual ones).
//!
//! A class is not enough: the input functions of `regclass`, `regproc`,
//! `regtype`, `regrole`, `regnamespace` and the other name types, which
//! casts and implicit coercions (`pg_partition_root(text_col)`) run on
//! table values, fail with `relation "north" does not exist` (42P01),
//! `function ... does not exist` (42883), `type`, `role` or `text search
//! configuration ... does not exist` (42704), `schema ... does not exist`
//! (3F000), `cross-database references are not implemented: ...`
//! (0A000); `tsquery`, `tsvector` and `jsonpath` input report syntax
//! errors quoting their input (42601); `to_tsvector` reports a value's
//! length (54000). Those codes lose their message whatever raised them,
//! syntax errors and missing objects of the statement included (the proxy
//! refuses most of those itself first, with a message of its own).

use crate::error::Result;
use crate::wire::{self, Frame};

/// SQLSTATEs, and classes (two characters), whose messages PostgreSQL
/// builds from the statement's names and types, the session's state and
/// its settings, never from a value read or computed at run time:
/// transaction state (25), statement and cursor names (26, 34, the
/// client's own), transaction rollback (40), insufficient resources (53),
/// operator intervention (57), connection exceptions (08); of class 42,
/// privileges (42501) and the parse analysis errors that name columns,
/// aliases, types, collations and parameters the statement wrote (42804,
/// 42803, 42846, 42P02, 42P08, 42P09, 42P10, 42P18, 42P19, 42P20, 42P21,
/// 42P22, 42702); of classes 54 and 55, statement complexity (54001),
/// column and argument counts (54011, 54023) and locks (55P03).
const MESSAGE_KEPT: &[&str] = &[
    "25", "26", "34", "40", "53", "57", "08", "42501", "42804", "42803", "42846", "42P02", "42P08",
    "42P09", "42P10", "42P18", "42P19", "42P20", "42P21", "42P22", "42702", "54001", "54011",
    "54023", "55P03",
];

/// Condition names of the SQLSTATEs whose messages are withheld most
/// often, so that a withheld message still says what went wrong.
const CONDITIONS: &[(&str, &str)] = &[
    ("0A000", "feature_not_supported"),
    ("22001", "string_data_right_truncation"),
    ("22003", "numeric_value_out_of_range"),
    ("22007", "invalid_datetime_format"),
    ("22008", "datetime_field_overflow"),
    ("22012", "division_by_zero"),
    ("22023", "invalid_parameter_value"),
    ("22P02", "invalid_text_representation"),
    ("3D000", "invalid_catalog_name"),
    ("3F000", "invalid_schema_name"),
    ("42601", "syntax_error"),
    ("42602", "invalid_name"),
    ("42703", "undefined_column"),
    ("42704", "undefined_object"),
    ("42725", "ambiguous_function"),
    ("42809", "wrong_object_type"),
    ("42883", "undefined_function"),
    ("42P01", "undefined_table"),
    ("54000", "program_limit_exceeded"),
    ("55000", "object_not_in_prerequisite_state"),
];

/// Whether the message of an error or notice of `sqlstate` is relayed.
fn message_kept(sqlstate: &str) -> bool {
    sqlstate.len() == 5
        && sqlstate.is_ascii()
        && MESSAGE_KEPT.iter().any(|c| sqlstate.starts_with(c))
}

/// The message that stands for a withheld one.
fn withheld(sqlstate: &str) -> String {
    let condition = CONDITIONS
        .iter()
        .find(|(code, _)| *code == sqlstate)
        .map(|(_, name)| format!(" ({name})"))
        .unwrap_or_default();
    format!(
        "the server reported SQLSTATE {sqlstate}{condition}; dptext-proxy withholds its message \
         in proxy mode (it may quote data)"
    )
}

/// The fields of an ErrorResponse or NoticeResponse body as proxy mode
/// relays them.
pub fn scrub(tag: u8, body: &[u8]) -> Result<Frame> {
    let fields = wire::parse_fields(body)?;
    let get = |code: u8| {
        fields
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, v)| v.clone())
    };
    let severity = get(b'S').unwrap_or_else(|| "ERROR".into());
    let sqlstate = get(b'C').unwrap_or_else(|| "XX000".into());
    let message = match get(b'M') {
        Some(m) if message_kept(&sqlstate) => m,
        _ => withheld(&sqlstate),
    };
    let mut out = vec![(b'S', severity)];
    if let Some(v) = get(b'V') {
        out.push((b'V', v));
    }
    out.push((b'C', sqlstate));
    out.push((b'M', message));
    Ok(Frame::new(tag, wire::fields_body(&out)))
}

/// Whether a NoticeResponse is of a severity below NOTICE (`LOG`,
/// `DEBUG1`..`DEBUG5`), which PostgreSQL sends only when
/// `client_min_messages` asks for it: messages meant for a server log,
/// about anything the server did (temporary files, plans, locks).
/// Proxy mode drops them. Read from the untranslated severity (`V`),
/// else the localized one (`S`); a notice without either is kept.
pub fn below_notice(body: &[u8]) -> bool {
    let Ok(fields) = wire::parse_fields(body) else {
        return true;
    };
    severity(&fields).is_some_and(|v| v == "LOG" || v.starts_with("DEBUG"))
}

/// Whether an ErrorResponse is `FATAL` or `PANIC` (the server ends the
/// session after it); one that cannot be parsed is not.
pub fn ends_session(body: &[u8]) -> bool {
    wire::parse_fields(body)
        .is_ok_and(|fields| severity(&fields).is_some_and(|v| v == "FATAL" || v == "PANIC"))
}

/// The severity of a parsed ErrorResponse or NoticeResponse: the
/// untranslated one (`V`), else the localized one (`S`).
fn severity(fields: &[(u8, String)]) -> Option<&str> {
    fields
        .iter()
        .find(|(c, _)| *c == b'V')
        .or_else(|| fields.iter().find(|(c, _)| *c == b'S'))
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(f: &Frame) -> Vec<(u8, String)> {
        wire::parse_fields(&f.body).unwrap_or_default()
    }

    #[test]
    fn data_exceptions_lose_their_message_and_every_extra_field() {
        let body = wire::fields_body(&[
            (b'S', "ERROR".into()),
            (b'V', "ERROR".into()),
            (b'C', "22P02".into()),
            (
                b'M',
                "invalid input syntax for type integer: \"Maria Lopez\"".into(),
            ),
            (b'D', "Maria Lopez".into()),
            (b'W', "SQL function x".into()),
            (b't', "records".into()),
        ]);
        let f = scrub(b'E', &body).unwrap_or_else(|e| panic!("{e}"));
        let text = format!("{:?}", fields(&f));
        assert!(!text.contains("Maria"), "{text}");
        assert!(text.contains("22P02"), "{text}");
        assert_eq!(fields(&f).len(), 4, "{text}");
    }

    fn message_of(sqlstate: &str, message: &str) -> String {
        let body = wire::fields_body(&[
            (b'S', "ERROR".into()),
            (b'C', sqlstate.into()),
            (b'M', message.into()),
        ]);
        let f = scrub(b'E', &body).unwrap_or_else(|e| panic!("{e}"));
        fields(&f)
            .into_iter()
            .find(|(c, _)| *c == b'M')
            .map(|(_, m)| m)
            .unwrap_or_default()
    }

    /// Messages PostgreSQL's input functions build from the value they
    /// read, of classes whose other messages name objects: withheld.
    #[test]
    fn name_and_syntax_errors_that_quote_input_lose_their_message() {
        for (sqlstate, message) in [
            ("42P01", "relation \"Maria Lopez\" does not exist"),
            ("42883", "function \"Maria Lopez\" does not exist"),
            ("42704", "role \"Maria\" does not exist"),
            (
                "42703",
                "column \"Maria Lopez\" of relation \"t\" does not exist",
            ),
            ("42601", "syntax error in tsquery: \"Maria Lopez\""),
            ("42602", "invalid name syntax"),
            ("42725", "more than one function named \"Maria\""),
            ("3F000", "schema \"Maria\" does not exist"),
            ("3D000", "database \"Maria\" does not exist"),
            (
                "0A000",
                "cross-database references are not implemented: a.Maria.c.d",
            ),
            (
                "54000",
                "string is too long for tsvector (1048577 bytes, max 1048575 bytes)",
            ),
            ("55000", "Maria"),
        ] {
            let m = message_of(sqlstate, message);
            assert!(
                !m.contains("Maria") && !m.contains("1048577"),
                "{sqlstate}: {m}"
            );
            assert!(m.contains(sqlstate), "{m}");
        }
        assert!(message_of("42P01", "x").contains("(undefined_table)"));
    }

    #[test]
    fn statement_errors_keep_their_message() {
        for (sqlstate, message) in [
            (
                "42803",
                "column \"t.id\" must appear in the GROUP BY clause",
            ),
            (
                "42804",
                "argument of WHERE must be type boolean, not type integer",
            ),
            ("25P02", "current transaction is aborted"),
            ("57014", "canceling statement due to statement timeout"),
            (
                "40001",
                "could not serialize access due to concurrent update",
            ),
            ("54001", "stack depth limit exceeded"),
        ] {
            assert_eq!(message_of(sqlstate, message), message);
        }
        // Not a SQLSTATE: withheld.
        assert!(message_of("4250", "x").starts_with("the server reported"));
    }

    #[test]
    fn access_errors_keep_their_message() {
        let body = wire::fields_body(&[
            (b'S', "ERROR".into()),
            (b'C', "42501".into()),
            (b'M', "permission denied for table secrets".into()),
            (b'H', "ask someone".into()),
        ]);
        let f = scrub(b'N', &body).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.tag, b'N');
        let m: Vec<_> = fields(&f);
        assert!(m.contains(&(b'M', "permission denied for table secrets".into())));
        assert!(!m.iter().any(|(c, _)| *c == b'H'));
    }

    #[test]
    fn only_fatal_and_panic_errors_end_the_session() {
        let error = |fields: &[(u8, &str)]| {
            let f: Vec<(u8, String)> = fields.iter().map(|(c, v)| (*c, (*v).to_owned())).collect();
            wire::fields_body(&f)
        };
        assert!(ends_session(&error(&[(b'S', "FATAL"), (b'C', "57P01")])));
        // The untranslated severity wins over a localized one.
        assert!(ends_session(&error(&[
            (b'S', "SCHWERWIEGEND"),
            (b'V', "FATAL")
        ])));
        assert!(ends_session(&error(&[(b'V', "PANIC")])));
        assert!(!ends_session(&error(&[(b'S', "ERROR"), (b'V', "ERROR")])));
        assert!(!ends_session(&error(&[(b'C', "57014")])));
        assert!(!ends_session(b"not fields"));
    }

    #[test]
    fn log_and_debug_notices_are_told_apart() {
        let notice = |fields: &[(u8, &str)]| {
            let f: Vec<(u8, String)> = fields.iter().map(|(c, v)| (*c, (*v).to_owned())).collect();
            wire::fields_body(&f)
        };
        assert!(below_notice(&notice(&[
            (b'S', "LOG"),
            (b'V', "LOG"),
            (b'C', "00000")
        ])));
        assert!(below_notice(&notice(&[(b'S', "DEBUG"), (b'V', "DEBUG2")])));
        // The untranslated severity decides.
        assert!(below_notice(&notice(&[(b'S', "PROTOKOLL"), (b'V', "LOG")])));
        assert!(!below_notice(&notice(&[
            (b'S', "HINWEIS"),
            (b'V', "NOTICE")
        ])));
        assert!(!below_notice(&notice(&[
            (b'S', "WARNING"),
            (b'C', "01000")
        ])));
        // A notice that does not parse is dropped.
        assert!(below_notice(b"\x53"));
    }
}
