//! Tables whose row-level security policy reads a protected column: the
//! rows a read returns, and their count, would tell which values pass it.

use super::*;

#[test]
fn no_statement_reads_a_table_whose_policy_reads_a_protected_column() {
    for sql in [
        "SELECT id FROM screened",
        "SELECT note FROM screened",
        "SELECT count(*) FROM public.screened",
        "TABLE screened",
        "SELECT r.id FROM records r WHERE EXISTS (SELECT 1 FROM screened s WHERE s.id = r.id)",
        "SELECT r.id FROM records r JOIN screened s ON s.id = r.id",
        "WITH x AS (SELECT id FROM screened) SELECT count(*) FROM x",
        "SELECT id FROM records UNION ALL SELECT id FROM screened",
        "DECLARE c CURSOR FOR SELECT id FROM screened",
        "PREPARE p AS SELECT id FROM screened",
    ] {
        let r = refused(sql, Rule::ProtectedPolicy);
        assert!(
            r.message.contains(
                "relation public.screened has a row-level security policy, oncology, that reads \
                 protected column public.screened.note"
            ),
            "{r}"
        );
    }
    // A CTE of that name is the CTE; the catalog still describes it.
    ok("WITH screened AS (SELECT 1 AS id) SELECT id FROM screened");
    ok(
        "SELECT c.relname, c.relrowsecurity FROM pg_catalog.pg_class c \
        WHERE c.oid = 'screened'::pg_catalog.regclass",
    );
}

#[test]
fn each_reason_is_named_in_the_refusal() {
    let mut c = catalog();
    for (name, reads, says) in [
        ("by_sub", PolicyReads::Subquery, "has a subquery"),
        (
            "by_fn",
            PolicyReads::Function("public.consented".into()),
            "calls function public.consented",
        ),
        (
            "by_node",
            PolicyReads::Construct("COERCETODOMAIN".into()),
            "does not follow (COERCETODOMAIN)",
        ),
    ] {
        let mut r = rel("public", name, RelationKind::Table, &["id"]);
        r.row_security = Some(RowSecurity {
            policy: "p".into(),
            reads,
        });
        c.add_relation(r);
        let e = analyze_against(
            &format!("SELECT id FROM {name}"),
            &c,
            &policy(),
            &["public"],
            &Session::new(),
        )
        .expect_err("refused");
        assert_eq!(e.rule, Rule::ProtectedPolicy, "{e}");
        assert!(e.message.contains(says), "{e}");
    }
}
