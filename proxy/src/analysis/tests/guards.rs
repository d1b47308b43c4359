//! Relations refused whatever the statement, for their owner or for an
//! index that reads a protected column.

use super::*;

/// `records` marked as the session's catalog marks it, read by `sql`.
fn records_marked(mark: impl Fn(&mut RelationInfo), sql: &str) -> Refusal {
    let mut c = catalog();
    let mut r = c
        .relation("public", "records")
        .expect("the fixture has records");
    mark(&mut r);
    c.add_relation(r);
    analyze_against(sql, &c, &policy(), &["public"], &Session::new()).expect_err("refused")
}

#[test]
fn a_relation_of_an_untrusted_owner_is_not_read() {
    let own = |r: &mut RelationInfo| {
        r.untrusted_owner = Some(UntrustedOwner {
            relation: QualName::new("public", "records"),
            owner: "colluder".into(),
        });
    };
    for sql in [
        "SELECT id FROM records",
        "SELECT count(*) FROM public.records",
        "SELECT 1 WHERE EXISTS (SELECT 1 FROM records)",
    ] {
        let e = records_marked(own, sql);
        assert_eq!(e.rule, Rule::UntrustedOwner, "{e}");
        assert!(
            e.message
                .contains("relation public.records is owned by role colluder")
                && e.message.contains("masking.trusted_owners"),
            "{e}"
        );
    }
    let child = |r: &mut RelationInfo| {
        r.untrusted_owner = Some(UntrustedOwner {
            relation: QualName::new("public", "records_2024"),
            owner: "colluder".into(),
        });
    };
    let e = records_marked(child, "SELECT id FROM records");
    assert!(
        e.message
            .contains("its member public.records_2024 is owned by role colluder"),
        "{e}"
    );
}

#[test]
fn a_relation_with_an_index_on_a_protected_column_is_not_read() {
    let index = |r: &mut RelationInfo| {
        r.protected_index = Some(ProtectedIndex {
            index: QualName::new("public", "records_ward_note"),
            table: QualName::new("public", "records"),
            column: "note".into(),
        });
    };
    for sql in [
        "SELECT id FROM records WHERE ward = 'w1' ORDER BY ward LIMIT 1",
        "SELECT id FROM records",
        "SELECT note FROM records",
    ] {
        let e = records_marked(index, sql);
        assert_eq!(e.rule, Rule::ProtectedIndex, "{e}");
        assert!(
            e.message.contains(
                "relation public.records has index public.records_ward_note, whose key or \
                 predicate reads protected column note"
            ),
            "{e}"
        );
    }
    // The catalog that describes it stays readable.
    ok("SELECT indexrelid FROM pg_catalog.pg_index");
}
