//! Extended-protocol batches: an error before the client's Sync (the
//! server skips to it), Flush, and Queries pipelined inside a batch.

use super::*;

#[test]
fn an_error_read_before_the_rest_of_the_batch_expects_no_answer_to_it() {
    // proxy_mode_late_sync.py, "late": the Bind's error is back before
    // the client sends the Execute, the Flush and the Sync.
    let mut m = machine();
    assert_eq!(client(&mut m, bind("", "no_such_statement")), ["server B"]);
    assert_eq!(server(&mut m, error("26000")), ["client E 26000"]);
    assert!(!m.awaiting());
    // The server discards these: nothing is awaited for them.
    assert_eq!(client(&mut m, execute("", 0)), ["server D", "server E"]);
    assert_eq!(client(&mut m, flush()), ["server H"]);
    assert!(!m.awaiting());
    // The Sync's ReadyForQuery is.
    assert_eq!(client(&mut m, sync()), ["server S"]);
    assert!(m.awaiting());
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    plain_query(&mut m);
}

#[test]
fn an_error_before_the_rest_of_the_batch_was_read_skips_what_was_recorded() {
    let mut m = machine();
    client(&mut m, parse("", "SELECT id FROM t"));
    client(&mut m, bind("", ""));
    client(&mut m, execute("", 0));
    client(&mut m, sync());
    // The Parse fails: the Bind and Execute get no answer.
    assert_eq!(server(&mut m, error("42601")), ["client E 42601"]);
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    assert!(!m.awaiting());
}

#[test]
fn a_query_pipelined_after_a_late_error_is_refused_before_the_sync() {
    // proxy_mode_late_sync.py, "query".
    let mut m = machine();
    client(&mut m, bind("", "no_such_statement"));
    server(&mut m, error("26000"));
    client(&mut m, execute("", 0));
    client(&mut m, flush());
    // A Query inside the batch: a Sync in its place, which ends the
    // server's skip.
    assert_eq!(client(&mut m, query("SELECT 'skipped'")), ["server S"]);
    assert_eq!(client(&mut m, sync()), ["server S"]);
    assert_eq!(
        server(&mut m, ready(b'I')),
        ["client E 42501", "client Z", "flush"]
    );
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    plain_query(&mut m);
}

#[test]
fn a_refused_parse_after_a_late_error_ends_the_skip_with_the_proxys_sync() {
    // proxy_mode_late_sync.py, "refused".
    let mut m = machine();
    client(&mut m, bind("", "no_such_statement"));
    server(&mut m, error("26000"));
    assert_eq!(client(&mut m, parse("l", "LISTEN chan")), ["server S"]);
    // The rest of the client's batch, its Sync included, is dropped.
    assert!(client(&mut m, execute("", 0)).is_empty());
    assert!(client(&mut m, flush()).is_empty());
    assert!(client(&mut m, sync()).is_empty());
    let steps = server(&mut m, ready(b'I'));
    assert_eq!(steps.len(), 3);
    assert!(steps[0].starts_with("client E "), "{steps:?}");
    assert_eq!(steps[1..], ["client Z", "flush"]);
    plain_query(&mut m);
}

#[test]
fn an_error_at_a_flush_is_the_batchs_and_the_session_stays_in_step() {
    // proxy_mode_late_sync.py, "timeout": a Parse without Sync, then a
    // pause past statement_timeout; the server fails at the Flush it
    // reads next and skips to the Sync.
    let mut m = machine();
    assert_eq!(client(&mut m, parse("s", "SELECT id FROM t")), ["server P"]);
    assert_eq!(client(&mut m, flush()), ["server H"]);
    assert_eq!(client(&mut m, query("SELECT 'skipped'")), ["server S"]);
    assert_eq!(client(&mut m, sync()), ["server S"]);
    relayed(&mut m, vec![parse_complete()]);
    // The timeout's error is the Flush's, not the refused Query's.
    assert_eq!(server(&mut m, error("57014")), ["client E 57014"]);
    assert_eq!(
        server(&mut m, ready(b'I')),
        ["client E 42501", "client Z", "flush"]
    );
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    assert!(!m.awaiting());
    plain_query(&mut m);
}

#[test]
fn a_flush_is_passed_by_the_answer_to_a_later_message() {
    let mut m = machine();
    client(&mut m, parse("s", "SELECT id FROM t"));
    client(&mut m, flush());
    relayed(&mut m, vec![parse_complete()]);
    // The server answered nothing at the Flush: the Bind's answer passes
    // it.
    client(&mut m, bind("", "s"));
    relayed(&mut m, vec![bind_complete()]);
    client(&mut m, sync());
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    assert!(!m.awaiting());
}

#[test]
fn an_error_at_a_flush_before_a_protected_execute_is_judged_as_the_executes() {
    let mut m = machine();
    client(&mut m, parse("", "SELECT note FROM t"));
    client(&mut m, bind("", ""));
    client(&mut m, flush());
    client(&mut m, execute("", 0));
    relayed(&mut m, vec![parse_complete(), bind_complete()]);
    // Past the Flush the next answer is the protected Execute's: an
    // error there ends the session.
    assert_eq!(server(&mut m, error("57014")), ["fail 54000"]);
}

#[test]
fn a_query_pipelined_inside_a_batch_is_refused_and_answered_in_order() {
    // proxy_mode_pipelined.py: the Execute fails, the server would
    // discard the Query; the proxy refused it, and the client reads the
    // error, the refusal with its ReadyForQuery, then its Sync's.
    let mut m = machine();
    client(&mut m, parse("", "SELECT id FROM t"));
    client(&mut m, bind("", ""));
    client(&mut m, execute("", 0));
    assert_eq!(client(&mut m, query("SELECT 'skipped'")), ["server S"]);
    assert_eq!(client(&mut m, sync()), ["server S"]);
    relayed(&mut m, vec![parse_complete(), bind_complete()]);
    assert!(server(&mut m, row_description(&[1])).is_empty());
    assert_eq!(server(&mut m, error("22012")), ["client E 22012"]);
    assert_eq!(
        server(&mut m, ready(b'I')),
        ["client E 42501", "client Z", "flush"]
    );
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    plain_query(&mut m);
}

#[test]
fn pipelined_queries_are_answered_in_order() {
    let mut m = machine();
    client(&mut m, query("SELECT id FROM t"));
    client(&mut m, query("SELECT note FROM t"));
    relayed(&mut m, vec![row_description(&[1]), data_row(&[Some("1")])]);
    relayed(&mut m, vec![complete("SELECT 1")]);
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    // The second Query's result is protected.
    server(&mut m, row_description(&[2]));
    assert!(server(&mut m, data_row(&[Some("raw")])).is_empty());
    assert_eq!(
        server(&mut m, complete("SELECT 1")),
        ["sanitize 1", "client C"]
    );
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    assert!(!m.awaiting());
}

#[test]
fn an_error_in_a_query_after_a_batch_does_not_skip_the_batchs_ready() {
    let mut m = machine();
    client(&mut m, parse("", "SELECT id FROM t"));
    client(&mut m, sync());
    client(&mut m, query("SELECT id FROM t"));
    relayed(&mut m, vec![parse_complete()]);
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    assert_eq!(server(&mut m, error("57014")), ["client E 57014"]);
    assert_eq!(server(&mut m, ready(b'I')), ["client Z", "flush"]);
    assert!(!m.awaiting());
}
