//! What the columns of a materialized view are made of, read from its
//! stored query, so that masking can serve a materialized view like the
//! tables it was computed from.
//!
//! Only what can be followed for certain counts: a column that is a plain
//! copy of a table column (a `Var`, perhaps relabelled), and the table
//! columns read anywhere else in the query. Anything else (subqueries,
//! CTEs, set operations, views, functions in `FROM`, joins merged with
//! `USING`, functions, operators or aggregates that are not built in) makes
//! the lineage opaque, and masking then fails closed.

use std::ffi::c_void;

use pgrx::pg_sys::{self, Node, NodeTag, Oid};
use pgrx::{is_a, PgList};

/// The lineage of a materialized view's columns.
#[derive(Debug, Default)]
pub(crate) struct Lineage {
    /// Per output column, in order: the table column it copies as it is.
    pub copies: Vec<Option<(Oid, i16)>>,
    /// Table columns read anywhere else (0: a whole row).
    pub reads: Vec<(Oid, i16)>,
    /// Table columns the stored rows were sorted, grouped, deduplicated or
    /// windowed by (`ORDER BY`, `DISTINCT`, `GROUP BY`, `PARTITION BY`):
    /// the order the rows are stored in, and which rows exist, follow
    /// their raw values.
    pub arranged_by: Vec<(Oid, i16)>,
    /// Why the lineage cannot be followed, if it cannot.
    pub opaque: Option<String>,
}

/// The lineage of materialized view `relid`.
pub(crate) fn matview_lineage(relid: Oid) -> Lineage {
    let mut out = Lineage::default();
    // SAFETY: the relation is opened with a share lock (kept to the end of
    // the transaction, as a query would) and closed after the walk; its
    // stored query belongs to the relation cache and is only read.
    unsafe {
        let rel = pg_sys::try_relation_open(relid, pg_sys::AccessShareLock as _);
        if rel.is_null() {
            out.opaque = Some("it no longer exists".into());
            return out;
        }
        let q = pg_sys::get_view_query(rel);
        read_query(q, &mut out);
        pg_sys::relation_close(rel, pg_sys::NoLock as _);
    }
    out
}

struct Walk<'a> {
    rtable: *mut pg_sys::List,
    out: &'a mut Lineage,
}

unsafe fn read_query(q: *mut pg_sys::Query, out: &mut Lineage) {
    // SAFETY: `q` is a valid stored Query; its range table holds
    // RangeTblEntry nodes and its target list TargetEntry nodes.
    unsafe {
        if !(*q).cteList.is_null() || !(*q).setOperations.is_null() || (*q).hasSubLinks {
            out.opaque = Some("its query has subqueries, CTEs or set operations".into());
            return;
        }
        for rte in PgList::<pg_sys::RangeTblEntry>::from_pg((*q).rtable).iter_ptr() {
            match (*rte).rtekind {
                pg_sys::RTEKind::RTE_RELATION if (*rte).relkind as u8 == pg_sys::RELKIND_VIEW => {
                    // A view's own stored query would have to be followed.
                    out.opaque = Some("it reads a view".into());
                    return;
                }
                pg_sys::RTEKind::RTE_RELATION if !(*rte).tablesample.is_null() => {
                    // A sample picks rows by where they are stored, which
                    // the lengths of the rows stored before them decide.
                    out.opaque = Some("it samples a table (TABLESAMPLE)".into());
                    return;
                }
                pg_sys::RTEKind::RTE_RELATION | pg_sys::RTEKind::RTE_JOIN => {}
                _ => {
                    out.opaque = Some("it reads a subquery, a function or a VALUES list".into());
                    return;
                }
            }
        }
        let mut w = Walk {
            rtable: (*q).rtable,
            out,
        };
        for tle in PgList::<pg_sys::TargetEntry>::from_pg((*q).targetList).iter_ptr() {
            let mut e = (*tle).expr.cast::<Node>();
            while is_a(e, NodeTag::T_RelabelType) {
                e = (*e.cast::<pg_sys::RelabelType>()).arg.cast();
            }
            let copy = if is_a(e, NodeTag::T_Var) {
                w.base_column(e.cast())
            } else {
                None
            };
            match copy {
                Some(c) if !(*tle).resjunk => w.out.copies.push(Some(c)),
                _ => {
                    if !(*tle).resjunk {
                        w.out.copies.push(None);
                    }
                    walker((*tle).expr.cast(), (&raw mut w).cast());
                }
            }
        }
        walker((*q).jointree.cast(), (&raw mut w).cast());
        walker((*q).havingQual, (&raw mut w).cast());
        // The target entries that sort, group, deduplicate or window the
        // rows: the columns they read arrange the stored rows.
        let mut refs: Vec<pg_sys::Index> = Vec::new();
        let mut clauses = vec![(*q).sortClause, (*q).distinctClause, (*q).groupClause];
        for wc in PgList::<pg_sys::WindowClause>::from_pg((*q).windowClause).iter_ptr() {
            clauses.push((*wc).partitionClause);
            clauses.push((*wc).orderClause);
        }
        for list in clauses {
            for c in PgList::<pg_sys::SortGroupClause>::from_pg(list).iter_ptr() {
                // An operator of the owner's sorts or groups by whatever
                // its function reads (`ORDER BY id USING <<<`, whose
                // comparison looks the ids' names up).
                if user_sort_group(c) {
                    w.out.opaque = Some(
                        "it sorts, groups or deduplicates with an operator that is not built in"
                            .into(),
                    );
                    return;
                }
                refs.push((*c).tleSortGroupRef);
            }
        }
        let before = w.out.reads.len();
        for tle in PgList::<pg_sys::TargetEntry>::from_pg((*q).targetList).iter_ptr() {
            if (*tle).ressortgroupref != 0 && refs.contains(&(*tle).ressortgroupref) {
                walker((*tle).expr.cast(), (&raw mut w).cast());
            }
        }
        // What the walk found there arranges the rows (and stays a read).
        let arranged: Vec<(Oid, i16)> = w.out.reads[before..].to_vec();
        w.out.arranged_by = arranged;
    }
}

impl Walk<'_> {
    /// The table column a `Var` of this query level reads, if it is one.
    unsafe fn base_column(&self, var: *mut pg_sys::Var) -> Option<(Oid, i16)> {
        // SAFETY: `var` is a Var of the query whose range table this is.
        unsafe {
            if (*var).varlevelsup != 0 || (*var).varattno <= 0 {
                return None;
            }
            let rte =
                pg_sys::list_nth(self.rtable, (*var).varno - 1).cast::<pg_sys::RangeTblEntry>();
            ((*rte).rtekind == pg_sys::RTEKind::RTE_RELATION)
                .then(|| ((*rte).relid, (*var).varattno))
        }
    }
}

/// Built-in functions that run SQL given as text or read a whole relation
/// or schema (`ts_stat('SELECT to_tsvector(name) FROM patients')`,
/// `query_to_xml(...)`, `table_to_xml('patients', ...)`): what they read
/// is not in the query tree, so a view computed with one cannot be
/// followed.
const RUNS_SQL_TEXT: &[&str] = &[
    "ts_stat",
    "ts_rewrite",
    "query_to_xml",
    "query_to_xmlschema",
    "query_to_xml_and_xmlschema",
    "table_to_xml",
    "table_to_xmlschema",
    "table_to_xml_and_xmlschema",
    "cursor_to_xml",
    "cursor_to_xmlschema",
    "schema_to_xml",
    "schema_to_xmlschema",
    "schema_to_xml_and_xmlschema",
    "database_to_xml",
    "database_to_xmlschema",
    "database_to_xml_and_xmlschema",
];

/// Whether a sort or group clause uses an operator that is not built in
/// (its ordering or equality operator).
///
/// # Safety
/// `c` is a valid `SortGroupClause`.
unsafe fn user_sort_group(c: *mut pg_sys::SortGroupClause) -> bool {
    // SAFETY: the caller's.
    let (sortop, eqop) = unsafe { ((*c).sortop, (*c).eqop) };
    [sortop, eqop]
        .iter()
        .any(|op| op.to_u32() >= pg_sys::FirstNormalObjectId)
}

/// Whether built-in function `funcid` is one of [`RUNS_SQL_TEXT`].
fn runs_sql_text(funcid: Oid) -> bool {
    funcid.to_u32() < pg_sys::FirstNormalObjectId
        && crate::pg::catalog::function_name(funcid)
            .is_some_and(|n| RUNS_SQL_TEXT.contains(&n.as_str()))
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn walker(node: *mut Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: `ctx` is the `Walk` of `read_query`; nodes are cast after
    // their tags are checked.
    unsafe {
        let w = &mut *ctx.cast::<Walk<'_>>();
        if is_a(node, NodeTag::T_Var) {
            let var = node.cast::<pg_sys::Var>();
            let rte = if (*var).varlevelsup == 0 {
                pg_sys::list_nth(w.rtable, (*var).varno - 1).cast::<pg_sys::RangeTblEntry>()
            } else {
                std::ptr::null_mut()
            };
            if rte.is_null() || (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
                w.out.opaque = Some("a column's source cannot be followed".into());
            } else {
                w.out.reads.push(((*rte).relid, (*var).varattno.max(0)));
            }
            return false;
        }
        if is_a(node, NodeTag::T_SortGroupClause) && user_sort_group(node.cast()) {
            // An aggregate's ORDER BY or DISTINCT with an owner's operator.
            w.out.opaque = Some(
                "it sorts, groups or deduplicates with an operator that is not built in".into(),
            );
            return false;
        }
        if is_a(node, NodeTag::T_FuncExpr)
            && runs_sql_text((*node.cast::<pg_sys::FuncExpr>()).funcid)
        {
            w.out.opaque = Some(
                "it calls a built-in function that runs a query of its own (ts_stat, query_to_xml, table_to_xml...)"
                    .into(),
            );
            return false;
        }
        let opaque_call = crate::pg::catalog::is_owner_call(node);
        if opaque_call {
            w.out.opaque = Some("it calls a function or operator that is not built in".into());
            return false;
        }
        pg_sys::expression_tree_walker(node, Some(walker), ctx)
    }
}
