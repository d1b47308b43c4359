//! The extended protocol: Parse, Bind, Describe, Execute (whole and with
//! a row limit), Close, and what the server confirms of them.

use super::*;

/// Parse, Bind and Execute of `sql` on the unnamed statement and
/// portal, then Sync: what goes to the server.
fn unnamed_batch(m: &mut Machine, sql: &str, max_rows: i32) {
    assert_eq!(client(m, parse("", sql)), ["server P"]);
    assert_eq!(client(m, bind("", "")), ["server B"]);
    // The proxy describes the portal first, for its columns' origins.
    assert_eq!(client(m, execute("", max_rows)), ["server D", "server E"]);
    assert_eq!(client(m, sync()), ["server S"]);
}

#[test]
fn an_execute_is_described_first_and_that_answer_stays_in_the_proxy() {
    let mut m = machine();
    let sent = client_frames(&mut m, execute("p", 0));
    // Describe('P', "p"), then the Execute.
    assert_eq!(sent[0].body, [b"Pp\0".as_slice()].concat());
    assert_eq!((sent[0].tag, sent[1].tag), (b'D', b'E'));
}

#[test]
fn a_plain_batch_is_relayed_but_the_proxys_description() {
    let mut m = machine();
    unnamed_batch(&mut m, "SELECT id FROM t", 0);
    relayed(&mut m, vec![parse_complete(), bind_complete()]);
    assert!(server(&mut m, row_description(&[1])).is_empty());
    assert_eq!(m.row_read(BackendTag::DataRow), None);
    relayed(&mut m, vec![data_row(&[Some("1")]), complete("SELECT 1")]);
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    assert!(!m.awaiting());
}

#[test]
fn a_protected_portal_is_sanitized_whichever_protocol_asked() {
    let mut m = machine();
    unnamed_batch(&mut m, "SELECT id, note FROM t", 0);
    relayed(&mut m, vec![parse_complete(), bind_complete()]);
    assert!(server(&mut m, row_description(&[1, 2])).is_empty());
    assert!(m.row_read(BackendTag::DataRow).is_some());
    assert!(server(&mut m, data_row(&[Some("1"), Some("raw")])).is_empty());
    assert_eq!(
        server(&mut m, complete("SELECT 1")),
        ["sanitize 1", "client C"]
    );
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
}

#[test]
fn a_column_is_protected_by_its_origin_too() {
    // The analysis sees a plain column; the server's description names a
    // protected column as its origin.
    let mut m = machine();
    unnamed_batch(&mut m, "SELECT id FROM t", 0);
    relayed(&mut m, vec![parse_complete(), bind_complete()]);
    server(&mut m, row_description(&[2]));
    let plan = m.row_read(BackendTag::DataRow);
    assert_eq!(plan.map(|p| p.protected), Some(vec![0]));
}

#[test]
fn a_suspended_portal_is_executed_again_and_described_again() {
    let mut m = machine();
    assert_eq!(client(&mut m, parse("", "SELECT id FROM t")), ["server P"]);
    assert_eq!(client(&mut m, bind("", "")), ["server B"]);
    for _ in 0..2 {
        assert_eq!(client(&mut m, execute("", 1)), ["server D", "server E"]);
    }
    client(&mut m, sync());
    relayed(&mut m, vec![parse_complete(), bind_complete()]);
    assert!(server(&mut m, row_description(&[1])).is_empty());
    relayed(&mut m, vec![data_row(&[Some("1")]), portal_suspended()]);
    // The second Execute: its own description, then the rest.
    assert!(server(&mut m, row_description(&[1])).is_empty());
    relayed(&mut m, vec![data_row(&[Some("2")]), complete("SELECT 1")]);
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    assert!(!m.awaiting());
}

#[test]
fn a_suspended_protected_portal_flushes_its_rows_at_the_suspension() {
    let mut m = machine();
    unnamed_batch(&mut m, "SELECT note FROM t", 1);
    relayed(&mut m, vec![parse_complete(), bind_complete()]);
    server(&mut m, row_description(&[2]));
    assert!(server(&mut m, data_row(&[Some("raw")])).is_empty());
    assert_eq!(
        server(&mut m, portal_suspended()),
        ["sanitize 1", "client s"]
    );
    assert_eq!(m.row_read(BackendTag::DataRow), None);
}

#[test]
fn the_clients_describe_of_a_statement_is_relayed_whole() {
    let mut m = machine();
    client(&mut m, parse("s", "SELECT id, note FROM t"));
    assert_eq!(
        client(&mut m, describe(Target::Statement, "s")),
        ["server D"]
    );
    client(&mut m, sync());
    relayed(
        &mut m,
        vec![
            parse_complete(),
            parameter_description(),
            row_description(&[1, 2]),
        ],
    );
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    // A statement without rows: NoData.
    client(&mut m, parse("n", "BEGIN"));
    client(&mut m, describe(Target::Statement, "n"));
    client(&mut m, sync());
    relayed(
        &mut m,
        vec![parse_complete(), parameter_description(), no_data()],
    );
    assert_eq!(server(&mut m, ready(b'T')), ["client Z", "flush"]);
}

#[test]
fn the_clients_describe_of_a_portal_is_relayed_and_its_execute_described_again() {
    let mut m = machine();
    client(&mut m, parse("", "SELECT id FROM t"));
    client(&mut m, bind("q", ""));
    assert_eq!(client(&mut m, describe(Target::Portal, "q")), ["server D"]);
    client(&mut m, execute("q", 0));
    client(&mut m, sync());
    relayed(
        &mut m,
        vec![parse_complete(), bind_complete(), row_description(&[1])],
    );
    // The proxy's own Describe before the Execute.
    assert!(server(&mut m, row_description(&[1])).is_empty());
    relayed(&mut m, vec![data_row(&[Some("1")]), complete("SELECT 1")]);
    server(&mut m, ready(b'I'));
    assert!(!m.awaiting());
}

#[test]
fn a_parse_the_server_refuses_does_not_replace_the_statement_it_keeps() {
    let mut m = machine();
    client(&mut m, parse("s1", "SELECT id FROM t"));
    client(&mut m, sync());
    relayed(&mut m, vec![parse_complete()]);
    server(&mut m, ready(b'I'));
    // The name is taken: 42P05, and nothing recorded.
    client(&mut m, parse("s1", "SELECT note FROM t"));
    client(&mut m, sync());
    assert_eq!(server(&mut m, error("42P05")), ["client E 42P05"]);
    server(&mut m, ready(b'I'));
    client(&mut m, bind("", "s1"));
    client(&mut m, execute("", 0));
    client(&mut m, sync());
    relayed(&mut m, vec![bind_complete()]);
    server(&mut m, row_description(&[1]));
    // The plain statement the server kept: its rows are relayed as they are.
    assert_eq!(m.row_read(BackendTag::DataRow), None);
}

#[test]
fn a_closed_statement_is_forgotten_once_the_server_confirms_it() {
    let mut m = machine();
    client(&mut m, parse("s", "SELECT id FROM t"));
    assert_eq!(client(&mut m, close(Target::Statement, "s")), ["server C"]);
    client(&mut m, sync());
    relayed(&mut m, vec![parse_complete(), close_complete()]);
    server(&mut m, ready(b'I'));
    // A Bind of it the server would refuse; one it accepted would be out
    // of place.
    client(&mut m, bind("", "s"));
    client(&mut m, sync());
    let steps = server(&mut m, bind_complete());
    assert!(closed_with(&steps, "has not seen parsed"), "{steps:?}");
}

#[test]
fn a_portal_of_a_declare_executed_by_the_extended_protocol_is_a_cursor() {
    let mut m = machine();
    client(&mut m, query("BEGIN"));
    server(&mut m, complete("BEGIN"));
    server(&mut m, ready(b'T'));
    unnamed_batch(&mut m, "DECLARE k CURSOR FOR SELECT note FROM t", 0);
    relayed(&mut m, vec![parse_complete(), bind_complete()]);
    assert!(server(&mut m, no_data()).is_empty());
    assert_eq!(server(&mut m, complete("DECLARE CURSOR")), ["client C"]);
    server(&mut m, ready(b'T'));
    // Executing the cursor's portal: its rows are protected.
    client(&mut m, execute("k", 0));
    client(&mut m, sync());
    server(&mut m, row_description(&[2]));
    let plan = m.row_read(BackendTag::DataRow);
    assert_eq!(plan.map(|p| p.protected), Some(vec![0]));
}

#[test]
fn the_clients_terminate_goes_on_and_ends_the_session() {
    let mut m = machine();
    assert_eq!(
        client(&mut m, Frame::new(b'X', Vec::new())),
        ["server X", "end"]
    );
}

#[test]
fn a_closed_portal_is_forgotten_once_the_server_confirms_it() {
    let mut m = machine();
    client(&mut m, parse("", "SELECT note FROM t"));
    client(&mut m, bind("k", ""));
    assert_eq!(client(&mut m, close(Target::Portal, "k")), ["server C"]);
    client(&mut m, sync());
    relayed(
        &mut m,
        vec![parse_complete(), bind_complete(), close_complete()],
    );
    server(&mut m, ready(b'I'));
    // An Execute of it the server would refuse; a description of it
    // would be out of place.
    client(&mut m, execute("k", 0));
    client(&mut m, sync());
    let steps = server(&mut m, row_description(&[2]));
    assert!(closed_with(&steps, "has not seen bound"), "{steps:?}");
}

#[test]
fn a_close_the_server_fails_keeps_what_it_named() {
    let mut m = machine();
    client(&mut m, parse("s", "SELECT note FROM t"));
    client(&mut m, sync());
    relayed(&mut m, vec![parse_complete()]);
    server(&mut m, ready(b'I'));
    client(&mut m, close(Target::Statement, "s"));
    client(&mut m, sync());
    assert_eq!(server(&mut m, error("57014")), ["client E 57014"]);
    server(&mut m, ready(b'I'));
    // Still known: a Bind of it is followed, its rows protected.
    client(&mut m, bind("", "s"));
    client(&mut m, execute("", 0));
    client(&mut m, sync());
    relayed(&mut m, vec![bind_complete()]);
    assert!(server(&mut m, row_description(&[2])).is_empty());
    let plan = m.row_read(BackendTag::DataRow);
    assert_eq!(plan.map(|p| p.protected), Some(vec![0]));
}

#[test]
fn an_empty_parse_runs_nothing_and_its_execute_gets_an_empty_query_response() {
    let mut m = machine();
    assert_eq!(client(&mut m, parse("s", "")), ["server P"]);
    assert_eq!(
        client(&mut m, describe(Target::Statement, "s")),
        ["server D"]
    );
    assert_eq!(client(&mut m, bind("", "s")), ["server B"]);
    assert_eq!(client(&mut m, execute("", 0)), ["server D", "server E"]);
    assert_eq!(client(&mut m, sync()), ["server S"]);
    relayed(
        &mut m,
        vec![
            parse_complete(),
            parameter_description(),
            no_data(),
            bind_complete(),
        ],
    );
    // The proxy's own Describe of the portal: no columns, kept.
    assert!(server(&mut m, no_data()).is_empty());
    assert_eq!(m.row_read(BackendTag::DataRow), None);
    assert_eq!(server(&mut m, empty_query_response()), ["client I"]);
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    assert!(!m.awaiting());
    plain_query(&mut m);
}

#[test]
fn a_cancelled_portal_is_muted_up_to_the_ready_for_query_of_its_sync() {
    let mut m = machine();
    assert_eq!(
        client(&mut m, parse("", "SELECT id, note FROM t")),
        ["server P"]
    );
    client(&mut m, bind("", ""));
    client(&mut m, execute("", 0));
    // A second portal in the same batch, which the server runs anyway.
    client(&mut m, parse("", "SELECT id FROM t"));
    client(&mut m, bind("", ""));
    client(&mut m, execute("", 0));
    client(&mut m, sync());
    relayed(&mut m, vec![parse_complete(), bind_complete()]);
    server(&mut m, row_description(&[1, 2]));
    server(&mut m, data_row(&[Some("1"), Some("raw")]));
    assert_eq!(server_steps(m.cancel()), ["client E 57014", "flush"]);
    for f in [
        data_row(&[Some("2"), Some("raw")]),
        complete("SELECT 2"),
        parse_complete(),
        bind_complete(),
        row_description(&[1]),
        data_row(&[Some("1")]),
        complete("SELECT 1"),
    ] {
        let tag = char::from(f.tag);
        assert!(server(&mut m, f).is_empty(), "{tag}");
    }
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    assert!(!m.awaiting());
    // The server confirmed the second statement: it is followed.
    client(&mut m, bind("", ""));
    client(&mut m, execute("", 0));
    client(&mut m, sync());
    relayed(&mut m, vec![bind_complete()]);
    assert!(server(&mut m, row_description(&[1])).is_empty());
    assert_eq!(m.row_read(BackendTag::DataRow), None);
}
