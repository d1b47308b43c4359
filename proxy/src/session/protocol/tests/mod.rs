//! The state machine fed message by message, both directions, in the
//! orders clients and servers send them (and in those the attack tests
//! found), against a small catalog: `public.t(id, note, ward)` (table OID
//! 1000) whose `note` is protected by rule `r_note`.
//!
//! Steps are written as short strings: `server Q` (a frame to the
//! server), `client T` (a frame to the client), `client E 26000` (an
//! ErrorResponse and its SQLSTATE), `flush`, `sanitize N` (a batch of N
//! rows), `fail 54000`, `reload`, `end`, `close: <message>`.

mod batches;
mod extended;
mod refusals;
mod simple;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::{BackendTag, ClientStep, Machine, ServerStep, Settings};
use crate::analysis::tests::rel;
use crate::analysis::{MemoryCatalog, ParseCache, Policy, RelationKind};
use crate::session::catalog::SessionCatalog;
use crate::wire::{self, Frame, Target};

/// The table OID of `public.t`.
const T_OID: u32 = 1000;

/// The session's catalog: `public.t`, and the tables `extra` names.
fn catalog(extra: &[&str]) -> SessionCatalog {
    let mut c = MemoryCatalog::new();
    c.add_relation(rel(
        "public",
        "t",
        RelationKind::Table,
        &["id", "note", "ward"],
    ));
    for name in extra {
        c.add_relation(rel("public", name, RelationKind::Table, &["id"]));
    }
    let mut policy = Policy::default();
    policy.protect("public", "t", "note", "r_note");
    SessionCatalog {
        catalog: c,
        policy,
        search_path: vec!["public".into()],
        user: "u".into(),
        origins: HashMap::from([((T_OID, 2), "r_note".to_owned())]),
        rules: HashMap::new(),
        trusted_types: HashSet::from([23, 25]),
        untrusted: BTreeMap::new(),
        indexed: BTreeMap::new(),
    }
}

/// A machine that sanitizes rows in batches of two.
fn machine() -> Machine {
    Machine::new(Settings {
        catalog: Arc::new(catalog(&[])),
        cache: ParseCache::default(),
        batch_rows: 2,
        max_message_bytes: 1 << 20,
        max_input_bytes: 1 << 16,
    })
}

/// The SQLSTATE of an ErrorResponse body.
fn sqlstate(body: &[u8]) -> String {
    wire::error_code(body).unwrap_or_default()
}

/// The steps of a client message, as strings.
fn client(m: &mut Machine, f: Frame) -> Vec<String> {
    m.on_client(f)
        .into_iter()
        .map(|s| match s {
            ClientStep::ToServer(f) => format!("server {}", char::from(f.tag)),
            ClientStep::ReloadCatalog => "reload".into(),
            ClientStep::End => "end".into(),
            ClientStep::Close(e) => format!("close: {e}"),
        })
        .collect()
}

/// The frames a client message sends to the server.
fn client_frames(m: &mut Machine, f: Frame) -> Vec<Frame> {
    m.on_client(f)
        .into_iter()
        .filter_map(|s| match s {
            ClientStep::ToServer(f) => Some(f),
            _ => None,
        })
        .collect()
}

/// The steps of a server message, as strings.
fn server(m: &mut Machine, f: Frame) -> Vec<String> {
    server_steps(m.on_server(f))
}

fn server_steps(steps: Vec<ServerStep>) -> Vec<String> {
    steps
        .into_iter()
        .map(|s| match s {
            ServerStep::ToClient(f) if f.tag == b'E' => format!("client E {}", sqlstate(&f.body)),
            ServerStep::ToClient(f) => format!("client {}", char::from(f.tag)),
            ServerStep::FlushClient => "flush".into(),
            ServerStep::Sanitize(b) => format!("sanitize {}", b.rows.len()),
            ServerStep::Fail(e) => format!("fail {}", e.sqlstate()),
            ServerStep::Close(e) => format!("close: {e}"),
        })
        .collect()
}

/// Feeds server messages that each must be relayed as they are.
fn relayed(m: &mut Machine, frames: Vec<Frame>) {
    for f in frames {
        let tag = char::from(f.tag);
        assert_eq!(server(m, f), [format!("client {tag}")]);
    }
}

/// Whether the last step is one that ends the session with `what` in its
/// message.
fn closed_with(steps: &[String], what: &str) -> bool {
    steps
        .last()
        .is_some_and(|s| s.starts_with("close: ") && s.contains(what))
}

// Client messages.

fn query(sql: &str) -> Frame {
    wire::query(sql)
}

fn parse(name: &str, sql: &str) -> Frame {
    wire::parse(name, sql, &[0, 0])
}

fn parse_typed(name: &str, sql: &str, types: &[u32]) -> Frame {
    let mut rest = (types.len() as i16).to_be_bytes().to_vec();
    for t in types {
        rest.extend_from_slice(&t.to_be_bytes());
    }
    wire::parse(name, sql, &rest)
}

fn bind(portal: &str, statement: &str) -> Frame {
    wire::bind(portal, statement)
}

fn execute(portal: &str, max_rows: i32) -> Frame {
    wire::execute(portal, max_rows)
}

fn describe(target: Target, name: &str) -> Frame {
    wire::describe(target, name)
}

fn close(target: Target, name: &str) -> Frame {
    wire::close(target, name)
}

fn sync() -> Frame {
    wire::sync()
}

fn flush() -> Frame {
    Frame::new(b'H', Vec::new())
}

// Server messages.

/// A RowDescription of `public.t`'s columns `cols` (column numbers).
fn row_description(cols: &[i16]) -> Frame {
    let names = ["", "id", "note", "ward"];
    let fields: Vec<(&str, u32, i16)> = cols
        .iter()
        .map(|&c| (names[usize::try_from(c).unwrap_or(0)], T_OID, c))
        .collect();
    Frame::new(b'T', wire::row_description(&fields))
}

/// A RowDescription of one computed column (no table).
fn computed_description() -> Frame {
    Frame::new(b'T', wire::row_description(&[("?column?", 0, 0)]))
}

fn data_row(values: &[Option<&str>]) -> Frame {
    let fields: Vec<Option<&[u8]>> = values.iter().map(|v| v.map(str::as_bytes)).collect();
    Frame::new(b'D', wire::data_row(&fields))
}

fn complete(tag: &str) -> Frame {
    let mut body = Vec::new();
    wire::put_cstr(&mut body, tag);
    Frame::new(b'C', body)
}

fn empty_query_response() -> Frame {
    Frame::new(b'I', Vec::new())
}

fn ready(status: u8) -> Frame {
    Frame::new(b'Z', vec![status])
}

fn parse_complete() -> Frame {
    Frame::new(b'1', Vec::new())
}

fn bind_complete() -> Frame {
    Frame::new(b'2', Vec::new())
}

fn close_complete() -> Frame {
    Frame::new(b'3', Vec::new())
}

fn no_data() -> Frame {
    Frame::new(b'n', Vec::new())
}

fn parameter_description() -> Frame {
    Frame::new(b't', vec![0, 0])
}

fn portal_suspended() -> Frame {
    Frame::new(b's', Vec::new())
}

fn error(code: &str) -> Frame {
    wire::error("ERROR", code, "the server's message")
}

fn notice(severity: &str) -> Frame {
    let mut f = wire::error(severity, "00000", "a notice");
    f.tag = b'N';
    f
}

/// A simple query of plain output, answered: the session is idle again.
fn plain_query(m: &mut Machine) {
    assert_eq!(client(m, query("SELECT id FROM t")), ["server Q"]);
    relayed(
        m,
        vec![
            row_description(&[1]),
            data_row(&[Some("1")]),
            complete("SELECT 1"),
        ],
    );
    assert_eq!(server(m, ready(b'I')), ["client Z", "flush"]);
    assert!(!m.awaiting());
}

#[test]
fn the_row_read_plan_follows_the_result_being_relayed() {
    let mut m = machine();
    assert_eq!(m.row_read(BackendTag::DataRow), None);
    client(&mut m, query("SELECT id, note FROM t"));
    server(&mut m, row_description(&[1, 2]));
    let plan = m.row_read(BackendTag::DataRow);
    assert_eq!(plan.as_ref().map(|p| p.protected.clone()), Some(vec![1]));
    assert_eq!(plan.map(|p| p.max_value), Some(1 << 16));
    // Only rows are read field by field.
    assert_eq!(m.row_read(BackendTag::CommandComplete), None);
    server(&mut m, complete("SELECT 0"));
    assert_eq!(m.row_read(BackendTag::DataRow), None);
}

#[test]
fn only_rows_relayed_as_sent_may_be_streamed() {
    let mut m = machine();
    // No result yet: a row now is out of place, not streamed.
    assert!(!m.relays_rows_as_sent());
    client(&mut m, query("SELECT id FROM t"));
    assert!(!m.relays_rows_as_sent(), "before the description");
    server(&mut m, row_description(&[1]));
    assert!(m.relays_rows_as_sent());
    // A streamed row is checked as any row is.
    assert!(m.streamed_row(1).is_ok());
    assert!(m.streamed_row(2).is_err(), "a row wider than described");
    server(&mut m, complete("SELECT 1"));
    assert!(!m.relays_rows_as_sent(), "after the result");
    assert!(m.streamed_row(1).is_err());
    server(&mut m, ready(b'I'));
    // A result with a protected column: its rows are sanitized, never
    // streamed.
    client(&mut m, query("SELECT id, note FROM t"));
    server(&mut m, row_description(&[1, 2]));
    assert!(!m.relays_rows_as_sent());
    server(&mut m, complete("SELECT 0"));
    server(&mut m, ready(b'I'));
    // A cancel of a result without protected columns is the server's to
    // answer: its rows go on as they came until it does.
    client(&mut m, query("SELECT id FROM t"));
    server(&mut m, row_description(&[1]));
    assert!(m.cancel().is_empty());
    assert!(m.relays_rows_as_sent());
}
