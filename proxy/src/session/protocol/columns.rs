//! Which columns of a result are protected, and what that makes of the
//! server's errors while it answers.

use std::sync::Arc;

use crate::analysis::OutputColumn;
use crate::error::{ProxyError, Result};
use crate::session::catalog::SessionCatalog;
use crate::wire;

/// The protected columns of a result: position and rule label, in
/// column order.
pub type Protected = Vec<(usize, Arc<str>)>;

/// Which columns of a result are protected: by the analysis, and by the
/// origin (table OID, column number) its RowDescription names.
pub fn protected_columns(
    output: &[OutputColumn],
    origins: &[(u32, i16)],
    catalog: &SessionCatalog,
) -> Protected {
    let mut out = Vec::new();
    for (i, col) in output.iter().enumerate() {
        let by_analysis = match col {
            OutputColumn::Protected(p) => Some(p.rule.clone()),
            OutputColumn::Plain | OutputColumn::Opaque { .. } => None,
        };
        let by_origin = origins.get(i).and_then(|o| catalog.origins.get(o).cloned());
        if let Some(rule) = by_analysis.or(by_origin) {
            out.push((i, Arc::from(rule.as_str())));
        }
    }
    out
}

/// A description or row (`what`) whose width differs from the analysis
/// ends the session.
pub fn check_width(what: &str, expected: usize, got: usize) -> Result<()> {
    if expected == got {
        return Ok(());
    }
    Err(ProxyError::Protocol(format!(
        "a {what} of {got} columns where the analysis expected {expected}: the catalog changed; reconnect"
    )))
}

/// What the server is answering, as far as raw protected values go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answering {
    /// Nothing that outputs a protected column.
    Plain,
    /// A statement or portal with protected output whose rows the server
    /// sends as it makes them (a select, a cursor's portal).
    Streamed,
    /// A `FETCH` or `EXECUTE` (or a portal bound from one): it runs what
    /// its name stands for at that moment, which may not be what the
    /// analysis saw, and the server stores all its rows before it sends
    /// the first. Taken to output protected columns.
    Stored,
}

/// Whether an ErrorResponse of a statement answered as `what` may be
/// relayed, the session kept: one of a class PostgreSQL raises before a
/// statement runs (an aborted or wrong transaction state, 25; an unknown
/// or taken statement or cursor name, 26 and 34; a client whose
/// transaction failed goes on sending into it), and, for a statement
/// whose rows are streamed, of class 42 too (analysis, privileges, a name
/// a `regclass` cast of a value does not find): there a row that fits is
/// sent, and judged, before any later row's error. Not for a stored
/// statement: it builds every row before it sends one, so a later row's
/// class-42 error would tell that an earlier, padded row fit. Any other
/// error ends the session.
pub fn relayed_error(what: Answering, body: &[u8]) -> bool {
    let code = server_sqlstate(body);
    let classes: &[&str] = match what {
        Answering::Plain => return true,
        Answering::Streamed => &["25", "26", "34", "42"],
        Answering::Stored => &["25", "26", "34"],
    };
    classes.iter().any(|c| code.starts_with(c))
}

/// The SQLSTATE of an ErrorResponse, for the proxy's own log.
pub fn server_sqlstate(body: &[u8]) -> String {
    wire::error_code(body).unwrap_or_default()
}

/// One schema of the search path probe's answer (a DataRow of one text
/// field).
pub fn probe_row(body: &[u8]) -> Result<String> {
    let fields = wire::parse_data_row(body)?;
    match fields.as_slice() {
        [Some(v)] => String::from_utf8(v.to_vec()).ok(),
        _ => None,
    }
    .ok_or_else(|| ProxyError::Protocol("the search path came back unreadable".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(code: &str) -> Vec<u8> {
        wire::error("ERROR", code, "m").body
    }

    #[test]
    fn errors_of_protected_results_are_relayed_by_class_only() {
        for code in ["22012", "54000", "XX000", "42P01"] {
            assert!(relayed_error(Answering::Plain, &error_of(code)));
        }
        assert!(relayed_error(Answering::Streamed, &error_of("42P01")));
        assert!(!relayed_error(Answering::Stored, &error_of("42P01")));
        for what in [Answering::Streamed, Answering::Stored] {
            for code in ["25P02", "26000", "34000"] {
                assert!(relayed_error(what, &error_of(code)), "{what:?} {code}");
            }
            for code in ["22012", "54000", "57014", ""] {
                assert!(!relayed_error(what, &error_of(code)), "{what:?} {code}");
            }
        }
    }

    #[test]
    fn widths_that_differ_end_the_session() {
        assert!(check_width("row", 2, 2).is_ok());
        let e = check_width("row", 2, 3).err().map(|e| e.to_string());
        assert!(e.is_some_and(|m| m.contains("the catalog changed")));
    }
}
