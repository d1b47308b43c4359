//! Cursors, prepared statements, the extended protocol, and the cache.

use super::*;

fn session_after(statements: &str) -> Session {
    let mut s = Session::new();
    let a = analyze_with(statements, &["public"], &s).expect("setup statements are allowed");
    for st in &a.statements {
        if let Some(e) = &st.effect {
            s.apply(e);
        }
    }
    s
}

#[test]
fn declare_fetch_close() {
    let a = ok("BEGIN; DECLARE c CURSOR FOR SELECT id, note FROM records; FETCH 10 FROM c; CLOSE c; COMMIT");
    let kinds: Vec<StatementKind> = a.statements.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds,
        [
            StatementKind::Transaction,
            StatementKind::DeclareCursor,
            StatementKind::Fetch,
            StatementKind::Close,
            StatementKind::Transaction
        ]
    );
    assert!(a.statements[1].output.is_empty());
    assert!(!a.statements[2].output[0].is_protected());
    assert!(a.statements[2].output[1].is_protected());

    // A WITH HOLD cursor's rows are stored at commit, raw values and all,
    // and a row past 1 GiB fails: refused with a protected column.
    refused(
        "DECLARE c CURSOR WITH HOLD FOR SELECT note, id FROM records",
        Rule::ProtectedWithBuffering,
    );
    let s = session_after("DECLARE c CURSOR WITH HOLD FOR SELECT id FROM records");
    let a = analyze_with("FETCH ALL IN c", &["public"], &s).unwrap();
    assert!(!a.statements[0].output[0].is_protected());
    let s = session_after("BEGIN; DECLARE c CURSOR FOR SELECT note FROM records");
    let a = analyze_with("FETCH ALL IN c", &["public"], &s).unwrap();
    assert!(a.statements[0].output[0].is_protected());
    assert_eq!(
        analyze_with("FETCH ALL IN d", &["public"], &s)
            .unwrap_err()
            .rule,
        Rule::CursorUnknown
    );
    refused(
        "DECLARE c CURSOR FOR SELECT note FROM records ORDER BY note",
        Rule::ProtectedInOrderBy,
    );
    refused("MOVE FORWARD 5 IN c", Rule::ConstructNotAllowed);
}

#[test]
fn prepare_execute_deallocate() {
    let a =
        ok("PREPARE p(int) AS SELECT note FROM records WHERE id = $1; EXECUTE p(3); DEALLOCATE p");
    assert_eq!(a.statements[1].kind, StatementKind::Execute);
    assert!(a.statements[1].output[0].is_protected());
    refused("EXECUTE q(1)", Rule::PreparedUnknown);
    refused("DEALLOCATE p; EXECUTE p(1)", Rule::PreparedUnknown);
    refused(
        "PREPARE p AS SELECT id FROM records WHERE note = $1",
        Rule::ProtectedInWhere,
    );

    let s = session_after("PREPARE p(int) AS SELECT id FROM records WHERE id = $1");
    assert!(analyze_with("EXECUTE p(1)", &["public"], &s).is_ok());
    let r = analyze_with("EXECUTE p(pg_read_file('/etc/passwd'))", &["public"], &s).unwrap_err();
    assert_eq!(r.rule, Rule::FunctionNotAllowed);
    let s = session_after("PREPARE p(int) AS SELECT 1; DISCARD ALL");
    assert!(s.prepared("p").is_none());
}

#[test]
fn effects_wait_for_the_server() {
    // Analysis alone changes nothing: a PREPARE the server refuses must
    // not replace what the name holds there.
    let mut s = Session::new();
    s.record_statement("p", vec![OutputColumn::Plain]);
    let a = analyze_with("PREPARE p AS SELECT note FROM records", &["public"], &s).unwrap();
    assert_eq!(s.prepared("p"), Some(&[OutputColumn::Plain][..]));
    s.apply(a.statements[0].effect.as_ref().unwrap());
    assert!(s.prepared("p").unwrap()[0].is_protected());
}

#[test]
fn extended_protocol_parse_holds_one_statement() {
    let catalog = catalog();
    let policy = policy();
    let cache = ParseCache::default();
    let path = vec!["public".to_owned()];
    let ctx = Context {
        catalog: &catalog,
        policy: &policy,
        search_path: &path,
        user: "analyst",
        cache: &cache,
    };
    let s = Session::new();
    let a = analyze_parse("SELECT note FROM records WHERE id = $1", &ctx, &s).unwrap();
    assert!(a.output[0].is_protected());
    let r = analyze_parse("SELECT 1; SELECT 2", &ctx, &s).unwrap_err();
    assert_eq!(r.rule, Rule::StatementKind);
    let r = analyze_parse("SELECT id FROM records WHERE note = $1", &ctx, &s).unwrap_err();
    assert_eq!(r.rule, Rule::ProtectedInWhere);
}

#[test]
fn the_cache_keeps_trees_by_text_within_its_bound() {
    let cache = ParseCache::new(64 << 10);
    let a = cache.parse("SELECT 1").unwrap();
    let b = cache.parse("SELECT 1").unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    assert_eq!(cache.entry_count(), 1);
    for i in 0..2000 {
        cache
            .parse(&format!("SELECT {i} FROM records WHERE id = {i}"))
            .unwrap();
    }
    // 64 KiB at about 2 KiB a statement.
    assert!(cache.entry_count() < 64, "{}", cache.entry_count());
    assert_eq!(cache.parse("SELEC 1").unwrap_err().rule, Rule::ParseError);
}

#[test]
fn search_path_resolution() {
    // pg_catalog comes first unless listed.
    assert_eq!(
        analyze_with("SELECT relname FROM pg_class", &["public"], &Session::new())
            .unwrap()
            .statements[0]
            .output,
        [OutputColumn::Plain]
    );
    // $user expands to the session user, who has no schema here.
    assert!(analyze_with("SELECT id FROM records", &["$user"], &Session::new()).is_err());
    // analytics on the path: the sanitized view by its bare name.
    let a = analyze_with(
        "SELECT note FROM records_safe",
        &["analytics"],
        &Session::new(),
    )
    .unwrap();
    assert_eq!(a.statements[0].output, [OutputColumn::Plain]);
}

/// What each statement does to the search path: the proxy's session
/// follows a `SET` by asking the server, and a reset by going back to the
/// path it started with.
#[test]
fn search_path_changes_are_reported() {
    for (sql, change) in [
        ("SET search_path TO other, public", Some(PathChange::Set)),
        ("SET search_path = \"$user\", public", Some(PathChange::Set)),
        (
            "SET SESSION search_path TO 'my schema'",
            Some(PathChange::Set),
        ),
        ("RESET search_path", Some(PathChange::Reset)),
        ("SET search_path TO DEFAULT", Some(PathChange::Reset)),
        ("RESET ALL", Some(PathChange::Reset)),
        ("DISCARD ALL", Some(PathChange::Reset)),
        ("SET statement_timeout = 5", None),
        ("RESET application_name", None),
        ("DISCARD PLANS", None),
        ("SHOW search_path", None),
    ] {
        assert_eq!(ok(sql).statements[0].search_path, change, "{sql}");
    }
    let r = refused("SET LOCAL search_path TO other", Rule::SettingNotAllowed);
    assert!(r.to_string().contains("SET LOCAL search_path"), "{r}");
}

/// With the session's `temp_file_limit` set, statements whose server
/// stores rows with protected values (a sort, the rows of SQL-level
/// `EXECUTE` and `FETCH`) are refused: past `work_mem` those rows go to
/// temporary files, and past the limit the statement fails at a size a
/// padding column tunes. Without the limit they are allowed.
#[test]
fn a_temp_file_limit_refuses_stored_protected_rows() {
    let limited = Policy {
        spill_limit: Some("1GB".into()),
        ..policy()
    };
    let run = |setup: &str, sql: &str, policy: &Policy| {
        let session = session_after(setup);
        analyze_against(sql, &catalog(), policy, &["public"], &session)
    };
    for (setup, sql) in [
        ("", "SELECT note FROM records ORDER BY id"),
        (
            "PREPARE p(int) AS SELECT lower(ward) AS pad, note FROM records WHERE id = $1",
            "EXECUTE p(4000000)",
        ),
        (
            "BEGIN; DECLARE c CURSOR FOR SELECT note FROM records",
            "FETCH 10 FROM c",
        ),
    ] {
        assert!(run(setup, sql, &policy()).is_ok(), "{sql}");
        let r = run(setup, sql, &limited).expect_err(sql);
        assert_eq!(r.rule, Rule::ProtectedWithBuffering, "{sql}: {r}");
        assert!(r.to_string().contains("temp_file_limit is 1GB"), "{r}");
    }
    // A sort without protected output holds nothing that matters, and a
    // streamed read stores nothing.
    for sql in [
        "SELECT id FROM records ORDER BY ward",
        "SELECT note FROM records",
    ] {
        assert!(run("", sql, &limited).is_ok(), "{sql}");
    }
    // SQL-level EXECUTE and FETCH whatever they name now: by the time the
    // server runs them the name may stand for protected output.
    for (setup, sql) in [
        ("PREPARE p AS SELECT id FROM records", "EXECUTE p"),
        (
            "BEGIN; DECLARE c CURSOR FOR SELECT id FROM records",
            "FETCH 10 FROM c",
        ),
    ] {
        let r = run(setup, sql, &limited).expect_err(sql);
        assert!(r.to_string().contains("temp_file_limit is 1GB"), "{r}");
    }
}

/// Cursors over protected columns are not `SCROLL` (the server may store
/// every row to scroll back). `MOVE` and `FETCH` that skips rows are
/// refused over any cursor (rows read without being sent never pass the
/// proxy's checks, and a statement parsed now may run after the name is
/// declared again over protected columns).
#[test]
fn cursors_only_fetch_forward() {
    refused(
        "BEGIN; DECLARE c SCROLL CURSOR FOR SELECT id, note FROM records",
        Rule::ProtectedWithBuffering,
    );
    ok("BEGIN; DECLARE c SCROLL CURSOR FOR SELECT id, ward FROM records");
    let protected = "BEGIN; DECLARE c CURSOR FOR SELECT id, note FROM records";
    let plain = "BEGIN; DECLARE c CURSOR FOR SELECT id, ward FROM records";
    for sql in [
        "MOVE FORWARD ALL IN c",
        "MOVE 5 IN c",
        "FETCH ABSOLUTE 5 FROM c",
        "FETCH RELATIVE 3 FROM c",
        "FETCH LAST FROM c",
        "FETCH PRIOR FROM c",
        "FETCH BACKWARD 2 FROM c",
        "FETCH FORWARD -1 FROM c",
        "FETCH -1 FROM c",
    ] {
        for setup in [protected, plain] {
            let s = session_after(setup);
            let r = analyze_with(sql, &["public"], &s).expect_err(sql);
            assert_eq!(r.rule, Rule::ConstructNotAllowed, "{sql}: {r}");
        }
    }
    for sql in [
        "FETCH 10 FROM c",
        "FETCH NEXT FROM c",
        "FETCH FORWARD ALL FROM c",
        "FETCH ALL IN c",
    ] {
        let s = session_after(protected);
        assert!(analyze_with(sql, &["public"], &s).is_ok(), "{sql}");
    }
}
