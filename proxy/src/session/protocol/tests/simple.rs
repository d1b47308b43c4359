//! The simple protocol: results plain and protected, errors and notices
//! inside them, cancels, and answers out of place.

use super::*;

#[test]
fn a_plain_query_is_relayed_as_it_comes() {
    let mut m = machine();
    plain_query(&mut m);
    // Settings the server reports go on; notifications do not.
    let mut status = Vec::new();
    wire::put_cstr(&mut status, "TimeZone");
    wire::put_cstr(&mut status, "UTC");
    assert_eq!(server(&mut m, Frame::new(b'S', status)), ["client S"]);
    assert!(server(&mut m, Frame::new(b'A', vec![0; 8])).is_empty());
}

#[test]
fn protected_rows_are_sanitized_in_batches_and_flushed_before_what_follows() {
    let mut m = machine();
    assert_eq!(
        client(&mut m, query("SELECT id, note FROM t")),
        ["server Q"]
    );
    assert!(m.awaiting());
    assert_eq!(server(&mut m, row_description(&[1, 2])), ["client T"]);
    let row = || data_row(&[Some("1"), Some("raw")]);
    assert!(server(&mut m, row()).is_empty());
    assert_eq!(server(&mut m, row()), ["sanitize 2"]);
    assert!(server(&mut m, row()).is_empty());
    // The rows held go before the CommandComplete.
    assert_eq!(
        server(&mut m, complete("SELECT 3")),
        ["sanitize 1", "client C"]
    );
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    assert!(!m.awaiting());
}

#[test]
fn a_batch_names_its_protected_columns_and_their_limit() {
    let mut m = machine();
    client(&mut m, query("SELECT note, id FROM t"));
    server(&mut m, row_description(&[2, 1]));
    server(&mut m, data_row(&[Some("a"), Some("1")]));
    let steps = m.on_server(data_row(&[Some("b"), Some("2")]));
    match steps.as_slice() {
        [ServerStep::Sanitize(b)] => {
            let cols: Vec<(usize, &str)> = b.protected.iter().map(|(i, r)| (*i, &**r)).collect();
            assert_eq!(cols, [(0, "r_note")]);
            assert_eq!(b.limit, 1 << 20);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_relayed_error_inside_a_protected_result_sends_the_rows_before_it() {
    let mut m = machine();
    client(&mut m, query("SELECT id, note FROM t"));
    server(&mut m, row_description(&[1, 2]));
    server(&mut m, data_row(&[Some("1"), Some("raw")]));
    // Class 42 (a name a value's cast did not find): the rows that fit
    // were judged before it.
    assert_eq!(
        server(&mut m, error("42P01")),
        ["sanitize 1", "client E 42P01"]
    );
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    assert_eq!(m.row_read(BackendTag::DataRow), None);
}

#[test]
fn any_other_error_of_a_protected_result_ends_the_session_and_loses_its_batch() {
    for code in ["22012", "54000", "57014", "XX000"] {
        let mut m = machine();
        client(&mut m, query("SELECT id, note FROM t"));
        server(&mut m, row_description(&[1, 2]));
        server(&mut m, data_row(&[Some("1"), Some("raw")]));
        assert_eq!(server(&mut m, error(code)), ["fail 54000"], "{code}");
    }
    // Before any row too: the server may have failed building the first.
    let mut m = machine();
    client(&mut m, query("SELECT id, note FROM t"));
    assert_eq!(server(&mut m, error("54000")), ["fail 54000"]);
}

#[test]
fn a_cancel_of_a_plain_result_is_relayed_and_the_session_goes_on() {
    let mut m = machine();
    client(&mut m, query("SELECT id FROM t"));
    server(&mut m, row_description(&[1]));
    server(&mut m, data_row(&[Some("1")]));
    // The client's CancelRequest goes over its own connection; the
    // session sees the server's 57014.
    assert_eq!(server(&mut m, error("57014")), ["client E 57014"]);
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    plain_query(&mut m);
}

#[test]
fn an_error_ends_the_rest_of_a_multi_statement_query() {
    let mut m = machine();
    assert_eq!(
        client(&mut m, query("SELECT id FROM t; SELECT ward FROM t")),
        ["server Q"]
    );
    server(&mut m, row_description(&[1]));
    assert_eq!(server(&mut m, error("22012")), ["client E 22012"]);
    // The second statement's answer never comes: the ReadyForQuery is
    // the Query's.
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    assert!(!m.awaiting());
}

#[test]
fn notices_are_scrubbed_and_dropped_inside_protected_results() {
    let mut m = machine();
    client(&mut m, query("SELECT id FROM t"));
    assert_eq!(server(&mut m, notice("NOTICE")), ["client N"]);
    // LOG and DEBUG messages are about anything the server did.
    assert!(server(&mut m, notice("LOG")).is_empty());
    assert!(server(&mut m, notice("DEBUG1")).is_empty());
    server(&mut m, row_description(&[1]));
    server(&mut m, complete("SELECT 0"));
    server(&mut m, ready(b'I'));
    client(&mut m, query("SELECT note FROM t"));
    assert!(server(&mut m, notice("NOTICE")).is_empty());
}

#[test]
fn a_result_wider_than_the_analysis_ends_the_session() {
    let mut m = machine();
    client(&mut m, query("SELECT id FROM t"));
    let steps = server(&mut m, row_description(&[1, 2]));
    assert!(closed_with(&steps, "the catalog changed"), "{steps:?}");
    let mut m = machine();
    client(&mut m, query("SELECT id FROM t"));
    server(&mut m, row_description(&[1]));
    let steps = server(&mut m, data_row(&[Some("1"), Some("2")]));
    assert!(closed_with(&steps, "the catalog changed"), "{steps:?}");
}

#[test]
fn answers_out_of_place_end_the_session() {
    // Nothing asked.
    for f in [
        parse_complete(),
        bind_complete(),
        close_complete(),
        complete("SELECT 1"),
        ready(b'I'),
        data_row(&[Some("1")]),
        parameter_description(),
    ] {
        let tag = char::from(f.tag);
        let steps = server(&mut machine(), f);
        assert!(
            closed_with(&steps, &format!("the server sent '{tag}'")),
            "{steps:?}"
        );
    }
    // A row before its description.
    let mut m = machine();
    client(&mut m, query("SELECT id FROM t"));
    let steps = server(&mut m, data_row(&[Some("1")]));
    assert!(closed_with(&steps, "the server sent 'D'"), "{steps:?}");
    // A message proxy mode does not relay (COPY).
    let steps = server(&mut machine(), Frame::new(b'G', vec![0, 0, 0]));
    assert!(closed_with(&steps, "does not relay server message 'G'"));
}

#[test]
fn an_error_nothing_asked_for_ends_the_session_a_fatal_one_relayed_first() {
    let steps = server(&mut machine(), error("57P01"));
    assert!(closed_with(&steps, "cannot place"), "{steps:?}");
    assert_eq!(steps.len(), 1);
    let steps = server(&mut machine(), wire::error("FATAL", "57P01", "bye"));
    assert_eq!(steps[..2], ["client E 57P01", "flush"]);
    assert!(closed_with(&steps, "cannot place"), "{steps:?}");
}

#[test]
fn cursors_declared_by_query_are_followed_once_completed() {
    let mut m = machine();
    for (sql, tag) in [
        ("BEGIN", "BEGIN"),
        ("DECLARE c CURSOR FOR SELECT note FROM t", "DECLARE CURSOR"),
    ] {
        client(&mut m, query(sql));
        assert_eq!(server(&mut m, complete(tag)), ["client C"]);
        server(&mut m, ready(b'T'));
    }
    // A FETCH is stored: any error it meets ends the session, even one of
    // class 42.
    client(&mut m, query("FETCH ALL FROM c"));
    assert_eq!(server(&mut m, error("42P01")), ["fail 54000"]);
}

#[test]
fn a_search_path_set_is_probed_and_the_probe_stays_in_the_proxy() {
    let mut m = machine();
    let forwarded = client_frames(&mut m, query("SET search_path = public"));
    let sql = forwarded
        .first()
        .map(|f| wire::parse_query(&f.body).unwrap_or_default().to_owned());
    assert!(
        sql.is_some_and(|s| s.contains("current_schemas")),
        "the probe is appended"
    );
    assert_eq!(server(&mut m, complete("SET")), ["client C"]);
    // The probe's answer is the proxy's.
    assert!(server(&mut m, computed_description()).is_empty());
    assert!(server(&mut m, data_row(&[Some("public")])).is_empty());
    assert!(server(&mut m, complete("SELECT 1")).is_empty());
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    plain_query(&mut m);
}

#[test]
fn an_empty_query_gets_its_empty_query_response_and_the_session_goes_on() {
    // psql sends "" for `;`, drivers send it as a ping: PostgreSQL runs
    // nothing and answers EmptyQueryResponse, then ReadyForQuery.
    for sql in ["", " ", ";", "; ;", "-- a comment", "/* nothing */ ;"] {
        let mut m = machine();
        assert_eq!(client(&mut m, query(sql)), ["server Q"], "{sql:?}");
        assert!(m.awaiting());
        assert_eq!(
            server(&mut m, empty_query_response()),
            ["client I"],
            "{sql:?}"
        );
        assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
        assert!(!m.awaiting());
        plain_query(&mut m);
    }
    // Only an EmptyQueryResponse answers it.
    let mut m = machine();
    client(&mut m, query(""));
    let steps = server(&mut m, complete("SELECT 1"));
    assert!(closed_with(&steps, "the server sent 'C'"), "{steps:?}");
}

#[test]
fn a_cancel_stops_the_proxys_sanitizing_and_the_session_goes_on() {
    let mut m = machine();
    client(&mut m, query("SELECT id, note FROM t; SELECT id FROM t"));
    server(&mut m, row_description(&[1, 2]));
    assert_eq!(
        server(&mut m, data_row(&[Some("1"), Some("raw")])),
        Vec::<String>::new()
    );
    // The client's cancel: the result ends here, the held row dropped.
    assert_eq!(server_steps(m.cancel()), ["client E 57014", "flush"]);
    // A second cancel changes nothing.
    assert!(m.cancel().is_empty());
    // The rest of the server's answers are followed, not relayed: more
    // rows, the statement after it, a setting the server reports.
    assert!(server(&mut m, data_row(&[Some("2"), Some("raw")])).is_empty());
    assert!(server(&mut m, data_row(&[Some("3"), Some("raw")])).is_empty());
    assert_eq!(
        m.row_read(BackendTag::DataRow).map(|p| p.protected),
        Some(vec![1])
    );
    assert!(server(&mut m, complete("SELECT 3")).is_empty());
    assert!(server(&mut m, row_description(&[1])).is_empty());
    assert!(server(&mut m, data_row(&[Some("1")])).is_empty());
    assert!(server(&mut m, complete("SELECT 1")).is_empty());
    let mut status = Vec::new();
    wire::put_cstr(&mut status, "TimeZone");
    wire::put_cstr(&mut status, "UTC");
    assert_eq!(server(&mut m, Frame::new(b'S', status)), ["client S"]);
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    assert!(!m.awaiting());
    plain_query(&mut m);
    // The same when the server's own 57014 follows the proxy's.
    client(&mut m, query("SELECT id, note FROM t"));
    server(&mut m, row_description(&[1, 2]));
    assert_eq!(server_steps(m.cancel()), ["client E 57014", "flush"]);
    assert!(server(&mut m, error("57014")).is_empty());
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    plain_query(&mut m);
}

#[test]
fn a_cancel_while_a_batch_is_sanitized_drops_it_and_what_followed_it() {
    let mut m = machine();
    client(&mut m, query("SELECT id, note FROM t"));
    server(&mut m, row_description(&[1, 2]));
    server(&mut m, data_row(&[Some("1"), Some("raw")]));
    let mut steps = m.on_server(complete("SELECT 1"));
    assert!(matches!(steps.first(), Some(ServerStep::Sanitize(_))));
    // The cancel came while the batch was on the sanitizer: the steps
    // after it (the CommandComplete) are not sent.
    let rest = steps.split_off(1);
    assert_eq!(
        server_steps(m.interrupted(rest)),
        ["client E 57014", "flush"]
    );
    assert_eq!(server(&mut m, ready(b'T')), ["client Z", "flush"]);
    plain_query(&mut m);
}

#[test]
fn a_cancel_with_nothing_of_the_proxys_own_to_stop_leaves_the_answer_to_the_server() {
    // Idle: nothing to cancel, and nothing later is cancelled by it.
    let mut m = machine();
    assert!(m.cancel().is_empty());
    plain_query(&mut m);
    // A plain result: the server's 57014 is relayed as it is.
    client(&mut m, query("SELECT id FROM t"));
    server(&mut m, row_description(&[1]));
    assert!(m.cancel().is_empty());
    assert_eq!(server(&mut m, data_row(&[Some("1")])), ["client D"]);
    assert_eq!(server(&mut m, error("57014")), ["client E 57014"]);
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    // A protected statement the server still runs: its 57014 answers the
    // cancel (in the proxy's words) instead of ending the session.
    client(&mut m, query("SELECT id, note FROM t"));
    assert!(m.cancel().is_empty());
    let steps = m.on_server(error("57014"));
    match steps.as_slice() {
        [ServerStep::ToClient(f)] => {
            assert_eq!(sqlstate(&f.body), "57014");
            assert!(String::from_utf8_lossy(&f.body).contains("due to user request"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    // The cancel was of that statement only: the next one's 57014 (a
    // statement timeout) ends the session as before.
    client(&mut m, query("SELECT id, note FROM t"));
    assert_eq!(server(&mut m, error("57014")), ["fail 54000"]);
}

#[test]
fn after_a_cancel_other_errors_of_a_protected_result_still_end_the_session() {
    let mut m = machine();
    client(&mut m, query("SELECT id, note FROM t"));
    server(&mut m, row_description(&[1, 2]));
    assert_eq!(server_steps(m.cancel()), ["client E 57014", "flush"]);
    assert_eq!(server(&mut m, error("54000")), ["fail 54000"]);
}
