//! Refusals: each goes to the client just before the ReadyForQuery of
//! the Sync the proxy sent in its place; stored portals; the catalog read
//! again for a relation it did not know.

use super::*;

/// The refusal's SQLSTATE, sent with the ReadyForQuery after it.
fn refused_at_ready(m: &mut Machine) -> String {
    let steps = server(m, ready(b'I'));
    assert_eq!(steps.len(), 3, "{steps:?}");
    assert_eq!(steps[1..], ["client Z", "flush"]);
    steps[0].clone()
}

#[test]
fn a_refused_query_is_answered_after_the_proxys_sync() {
    let mut m = machine();
    assert_eq!(client(&mut m, query("LISTEN chan")), ["server S"]);
    assert!(m.awaiting());
    assert_eq!(refused_at_ready(&mut m), "client E 42501");
    // A Query is not part of a batch: the next message is not skipped.
    plain_query(&mut m);
}

#[test]
fn a_syntax_error_is_refused_with_its_own_sqlstate() {
    let mut m = machine();
    assert_eq!(client(&mut m, query("SELEC 1")), ["server S"]);
    assert_eq!(refused_at_ready(&mut m), "client E 42601");
}

#[test]
fn a_refused_message_skips_the_rest_of_its_batch_up_to_the_clients_sync() {
    let mut m = machine();
    assert_eq!(client(&mut m, parse("", "SELECT id FROM t")), ["server P"]);
    assert_eq!(
        client(&mut m, parse("x", "SELECT note || 'x' FROM t")),
        ["server S"]
    );
    assert!(client(&mut m, bind("", "x")).is_empty());
    assert!(client(&mut m, execute("", 0)).is_empty());
    assert!(client(&mut m, sync()).is_empty());
    // The messages before the refused one are answered first.
    relayed(&mut m, vec![parse_complete()]);
    assert_eq!(refused_at_ready(&mut m), "client E 42501");
    assert!(!m.awaiting());
    // The next batch is read again.
    assert_eq!(client(&mut m, parse("", "SELECT id FROM t")), ["server P"]);
}

#[test]
fn a_terminate_is_not_skipped() {
    let mut m = machine();
    client(&mut m, parse("x", "LISTEN chan"));
    assert_eq!(
        client(&mut m, Frame::new(b'X', Vec::new())),
        ["server X", "end"]
    );
}

#[test]
fn a_function_call_is_refused_and_the_session_goes_on() {
    let mut m = machine();
    assert_eq!(client(&mut m, Frame::new(b'F', vec![0; 10])), ["server S"]);
    assert_eq!(refused_at_ready(&mut m), "client E 42501");
    plain_query(&mut m);
}

#[test]
fn copy_data_and_unknown_messages_end_the_session() {
    for tag in [b'd', b'c', b'f', b'p', b'?'] {
        let steps = client(&mut machine(), Frame::new(tag, Vec::new()));
        let what = format!("does not relay client message '{}'", char::from(tag));
        assert!(closed_with(&steps, &what), "{steps:?}");
    }
    // So does a message that cannot be read.
    let steps = client(&mut machine(), Frame::new(b'C', b"Xname\0".to_vec()));
    assert!(closed_with(&steps, "neither S nor P"), "{steps:?}");
    let steps = client(&mut machine(), Frame::new(b'Q', b"no end".to_vec()));
    assert!(closed_with(&steps, "too short"), "{steps:?}");
}

#[test]
fn parameter_types_the_session_does_not_trust_are_refused() {
    let mut m = machine();
    assert_eq!(
        client(&mut m, parse_typed("", "SELECT id FROM t", &[25, 0])),
        ["server P"]
    );
    client(&mut m, sync());
    relayed(&mut m, vec![parse_complete()]);
    server(&mut m, ready(b'I'));
    assert_eq!(
        client(&mut m, parse_typed("", "SELECT id FROM t", &[25, 99999])),
        ["server S"]
    );
    assert_eq!(refused_at_ready(&mut m), "client E 42501");
}

#[test]
fn a_query_inside_an_unfinished_batch_is_refused() {
    let mut m = machine();
    client(&mut m, parse("", "SELECT id FROM t"));
    assert_eq!(client(&mut m, query("SELECT id FROM t")), ["server S"]);
    // The refusal closed the server's batch: a Query now is read.
    assert_eq!(client(&mut m, query("SELECT id FROM t")), ["server Q"]);
    relayed(&mut m, vec![parse_complete()]);
    assert_eq!(refused_at_ready(&mut m), "client E 42501");
    relayed(&mut m, vec![row_description(&[1]), complete("SELECT 0")]);
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
}

/// A session with `PREPARE p AS SELECT id, note FROM t` completed.
fn prepared() -> Machine {
    let mut m = machine();
    client(&mut m, query("PREPARE p AS SELECT id, note FROM t"));
    assert_eq!(server(&mut m, complete("PREPARE")), ["client C"]);
    server(&mut m, ready(b'I'));
    m
}

#[test]
fn a_stored_portal_is_never_read_in_part() {
    // proxy_mode_stored_portal.py, "row_limit".
    let mut m = prepared();
    client(&mut m, parse("", "EXECUTE p"));
    client(&mut m, bind("", ""));
    assert_eq!(client(&mut m, execute("", 1)), ["server S"]);
    assert!(client(&mut m, sync()).is_empty());
    relayed(&mut m, vec![parse_complete(), bind_complete()]);
    assert_eq!(refused_at_ready(&mut m), "client E 42501");
    // "named_portal": a named portal could be read in part by SQL FETCH.
    client(&mut m, parse("s", "EXECUTE p"));
    assert_eq!(client(&mut m, bind("q", "s")), ["server S"]);
    relayed(&mut m, vec![parse_complete()]);
    assert_eq!(refused_at_ready(&mut m), "client E 42501");
}

#[test]
fn a_stored_portal_executed_whole_is_sanitized_and_any_error_ends_the_session() {
    // proxy_mode_stored_portal.py, "whole".
    let mut m = prepared();
    client(&mut m, parse("", "EXECUTE p"));
    client(&mut m, bind("", ""));
    assert_eq!(client(&mut m, execute("", 0)), ["server D", "server E"]);
    client(&mut m, sync());
    relayed(&mut m, vec![parse_complete(), bind_complete()]);
    assert!(server(&mut m, row_description(&[1, 2])).is_empty());
    assert!(server(&mut m, data_row(&[Some("1"), Some("raw")])).is_empty());
    assert_eq!(
        server(&mut m, complete("SELECT 1")),
        ["sanitize 1", "client C"]
    );
    server(&mut m, ready(b'I'));
    // Executed again, a class-42 error (relayed for a streamed result)
    // ends the session: the server stored every row first.
    client(&mut m, bind("", ""));
    client(&mut m, execute("", 0));
    client(&mut m, sync());
    relayed(&mut m, vec![bind_complete()]);
    assert_eq!(server(&mut m, error("42P01")), ["fail 54000"]);
}

#[test]
fn a_relation_unknown_to_the_catalog_is_looked_for_again_once_when_idle() {
    let mut m = machine();
    assert_eq!(client(&mut m, query("SELECT id FROM fresh")), ["reload"]);
    // The catalog read again knows it: the held Query goes on.
    let steps: Vec<String> = m
        .on_catalog(Some(catalog(&["fresh"])))
        .into_iter()
        .map(|s| match s {
            ClientStep::ToServer(f) => format!("server {}", char::from(f.tag)),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(steps, ["server Q"]);
    relayed(&mut m, vec![row_description(&[1]), complete("SELECT 0")]);
    server(&mut m, ready(b'I'));
    // Within the interval, no second read: refused, saying when.
    assert_eq!(client(&mut m, query("SELECT id FROM later")), ["server S"]);
    assert_eq!(refused_at_ready(&mut m), "client E 42501");
}

#[test]
fn a_failed_read_of_the_catalog_refuses_the_held_message() {
    let mut m = machine();
    assert_eq!(
        client(&mut m, parse("", "SELECT id FROM fresh")),
        ["reload"]
    );
    let steps = m.on_catalog(None);
    assert!(matches!(steps.as_slice(), [ClientStep::ToServer(f)] if f.tag == b'S'));
    assert!(client(&mut m, sync()).is_empty());
    assert_eq!(refused_at_ready(&mut m), "client E 42501");
}

#[test]
fn no_catalog_read_inside_a_transaction_block() {
    let mut m = machine();
    client(&mut m, query("BEGIN"));
    server(&mut m, complete("BEGIN"));
    server(&mut m, ready(b'T'));
    assert_eq!(client(&mut m, query("SELECT id FROM fresh")), ["server S"]);
    let steps = m.on_server(ready(b'T'));
    let message = steps.iter().find_map(|s| match s {
        ServerStep::ToClient(f) if f.tag == b'E' => wire::parse_fields(&f.body)
            .ok()
            .and_then(|f| f.into_iter().find(|(c, _)| *c == b'M')),
        _ => None,
    });
    assert!(
        message.is_some_and(|(_, m)| m.contains("outside a transaction block")),
        "the refusal says when the catalog is read again"
    );
}
