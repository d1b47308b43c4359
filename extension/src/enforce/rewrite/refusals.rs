//! What pass two refuses or hides on the way: row locks, `TABLESAMPLE`,
//! families whose members disagree, statistics and index catalogs' rows
//! about labelled columns, and the transaction counters of `pg_class` and
//! `pg_database`.

use pgrx::pg_sys::{self, Node, NodeTag, Oid, Query};
use pgrx::{is_a, PgList};

use crate::enforce::masking;

use super::{rt_fetch, Rewrite, REWRITE, REWRITE_EV_CLASS, STATISTIC_EXT_DATA};

/// True when column `attnum` of catalog `relid` holds a transaction or
/// multixact counter a vacuum sets (see [`Rewrite::counter_read`]).
fn is_counter_column(relid: Oid, attnum: i16) -> bool {
    let Ok(attnum) = u32::try_from(attnum) else {
        return false;
    };
    (relid == pg_sys::RelationRelationId
        && (attnum == pg_sys::Anum_pg_class_relfrozenxid
            || attnum == pg_sys::Anum_pg_class_relminmxid))
        || (relid == pg_sys::DatabaseRelationId
            && (attnum == pg_sys::Anum_pg_database_datfrozenxid
                || attnum == pg_sys::Anum_pg_database_datminmxid))
}

impl Rewrite<'_> {
    /// What a masked session reads for `var` when it reads a catalog
    /// column that holds the cluster's transaction counters: a NULL of the
    /// column's type. `pg_class.relfrozenxid` and `relminmxid`, and
    /// `pg_database.datfrozenxid` and `datminmxid`, are set by a vacuum to
    /// the counters of that moment, so read around an owner's statement
    /// and a vacuum they tell whether it took a transaction ID (whether an
    /// `UPDATE ... WHERE name LIKE 'A%'` matched a row). A whole row of
    /// either catalog is refused (name the columns instead).
    pub(super) unsafe fn counter_read(
        &self,
        rte: *mut pg_sys::RangeTblEntry,
        var: *mut pg_sys::Var,
    ) -> Option<*mut Node> {
        // SAFETY: `rte` is the valid range-table entry `var` reads.
        unsafe {
            if !self.session_masked || (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
                return None;
            }
            let relid = (*rte).relid;
            if (*var).varattno == 0
                && (relid == pg_sys::RelationRelationId || relid == pg_sys::DatabaseRelationId)
            {
                crate::error::refuse(format!(
                    "masked sessions cannot read whole rows of {}: its transaction-counter columns are hidden from them; name the columns to read",
                    crate::pg::catalog::relation_name(relid)
                ));
            }
            if !is_counter_column(relid, (*var).varattno) {
                return None;
            }
            Some(pg_sys::makeNullConst((*var).vartype, (*var).vartypmod, (*var).varcollid).cast())
        }
    }

    /// Replaces, in the join entries of `q`, the aliases of catalog
    /// columns that hold transaction counters ([`Self::counter_read`]) with
    /// NULLs: the mutator does not walk join aliases, and the planner puts
    /// an alias's expression where a Var reads the join's column.
    pub(super) unsafe fn null_counter_aliases(&self, q: *mut Query) {
        // SAFETY: `q` is a valid Query; a join entry's alias list holds one
        // expression (or NULL, for a dropped column) per join column, whose
        // Vars index `q`'s range table at level 0.
        unsafe {
            if !self.session_masked {
                return;
            }
            for rte in PgList::<pg_sys::RangeTblEntry>::from_pg((*q).rtable).iter_ptr() {
                if (*rte).rtekind != pg_sys::RTEKind::RTE_JOIN {
                    continue;
                }
                let mut aliases = PgList::<Node>::from_pg((*rte).joinaliasvars);
                for i in 0..aliases.len() {
                    let Some(node) = aliases.get_ptr(i) else {
                        continue;
                    };
                    if !is_a(node, NodeTag::T_Var) {
                        continue;
                    }
                    let var = node.cast::<pg_sys::Var>();
                    if (*var).varlevelsup != 0 {
                        continue;
                    }
                    let base = rt_fetch((*q).rtable, (*var).varno);
                    if let Some(null) = self.counter_read(base, var) {
                        aliases.replace_ptr(i, null);
                    }
                }
                (*rte).joinaliasvars = aliases.into_pg();
            }
        }
    }

    /// Refuses row locks (`FOR UPDATE`, `FOR SHARE`, `SKIP LOCKED`,
    /// `NOWAIT`) on a relation read masked whose policy protects it. A
    /// masked role that may update one column of it could otherwise lock
    /// its rows: `SKIP LOCKED` then shows which rows an owner's open
    /// `UPDATE ... WHERE name LIKE 'B%'` matched, and a lock wait's error
    /// names the row's place and the owner's transaction.
    pub(super) unsafe fn refuse_row_locks(&self, q: *mut Query) {
        // SAFETY: `q` is a valid Query; a row mark's `rti` indexes its
        // range table.
        unsafe {
            for rc in PgList::<pg_sys::RowMarkClause>::from_pg((*q).rowMarks).iter_ptr() {
                let Ok(rti) = i32::try_from((*rc).rti) else {
                    continue;
                };
                let rte = rt_fetch((*q).rtable, rti);
                if self.masked_policy(q, rte).is_some_and(|p| p.protects()) {
                    crate::error::refuse(format!(
                        "masked sessions cannot lock rows of {}, which has dptext rules (FOR UPDATE, FOR SHARE): which rows an owner's statement holds can follow their raw values",
                        crate::pg::catalog::relation_name((*rte).relid)
                    ));
                }
            }
        }
    }

    /// Refuses `TABLESAMPLE` on a relation read masked whose policy
    /// protects it: every sampling method chooses by a row's place (the
    /// block, or the block and item, with the seed of `REPEATABLE`), and
    /// where a row is stored follows from the lengths of the rows stored
    /// before it, labelled values included.
    pub(super) unsafe fn refuse_tablesample(&self, q: *mut Query, rte: *mut pg_sys::RangeTblEntry) {
        // SAFETY: `rte` is a valid range-table entry of the query.
        unsafe {
            if (*rte).tablesample.is_null() {
                return;
            }
            if self.masked_policy(q, rte).is_some_and(|p| p.protects()) {
                crate::error::refuse(format!(
                    "masked sessions cannot use TABLESAMPLE on {}, which has dptext rules: the rows a sample picks depend on where they are stored, which depends on the length of their labelled values",
                    crate::pg::catalog::relation_name((*rte).relid)
                ));
            }
        }
    }

    /// Refuses a masked read of a relation with its partitions or
    /// children (not `ONLY`) when one of them has a column rule other than
    /// the relation's: their rows would be masked by the relation's rule,
    /// not their own ([`masking::children_disagree`]).
    pub(super) unsafe fn refuse_disagreeing_family(
        &self,
        q: *mut Query,
        rte: *mut pg_sys::RangeTblEntry,
    ) {
        // SAFETY: `rte` is a valid range-table entry of `q`.
        unsafe {
            if (*rte).inh && self.masked_policy(q, rte).is_some() {
                if let Some(why) = masking::children_disagree((*rte).relid) {
                    crate::error::refuse(why);
                }
            }
        }
    }

    /// Puts a filter first among the security quals of a statistics
    /// catalog, so a masked session's `pg_stats`, `pg_stats_ext` and
    /// `pg_stats_ext_exprs` show nothing of labelled columns, and of
    /// `pg_class` and `pg_index`, so they show no index that reads one
    /// (its columns, expressions and predicate, whose literals are the
    /// owner's words about raw values).
    pub(super) unsafe fn hide_statistics(
        &self,
        rte: *mut pg_sys::RangeTblEntry,
        rtable: *mut pg_sys::List,
    ) {
        // SAFETY: `rte` is an entry of `rtable`; the filter's Vars point at
        // it by its index in that list, at level 0, with the catalog's
        // column numbers and types (pg_statistic: starelid oid 1,
        // staattnum int2 2; pg_statistic_ext_data: stxoid oid 1).
        unsafe {
            if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
                return;
            }
            let relid = (*rte).relid;
            let relkind_col = [
                (1, pg_sys::OIDOID),
                (pg_sys::Anum_pg_class_relkind as i16, pg_sys::CHAROID),
            ];
            // pg_index: indexrelid oid 1, and an index's relkind.
            let index_col = [(1, pg_sys::OIDOID), (0, pg_sys::CHAROID)];
            // pg_rewrite: ev_class, and the kind that asks for its relation's
            // visibility (a materialized view's: -1 below).
            let rule_col = [(REWRITE_EV_CLASS, pg_sys::OIDOID), (-1, pg_sys::CHAROID)];
            let (func, cols): (&str, &[(i16, Oid)]) = if relid == pg_sys::RelationRelationId {
                (
                    "dptext.class_visible(pg_catalog.oid,pg_catalog.\"char\")",
                    &relkind_col,
                )
            } else if relid == pg_sys::IndexRelationId {
                (
                    "dptext.class_visible(pg_catalog.oid,pg_catalog.\"char\")",
                    &index_col,
                )
            } else if relid == REWRITE {
                // The rules of relations hidden from pg_class (a refused
                // materialized view's query): a client that lists both,
                // pg_dump among them, finds no rule without its relation.
                (
                    "dptext.class_visible(pg_catalog.oid,pg_catalog.\"char\")",
                    &rule_col,
                )
            } else if relid == pg_sys::StatisticRelationId {
                (
                    "dptext.statistics_visible(pg_catalog.oid,pg_catalog.int2)",
                    &[(1, pg_sys::OIDOID), (2, pg_sys::INT2OID)],
                )
            } else if relid == STATISTIC_EXT_DATA {
                (
                    "dptext.extended_statistics_visible(pg_catalog.oid)",
                    &[(1, pg_sys::OIDOID)],
                )
            } else {
                return;
            };
            let Some(index) = PgList::<pg_sys::RangeTblEntry>::from_pg(rtable)
                .iter_ptr()
                .position(|e| e == rte)
            else {
                return;
            };
            let varno = i32::try_from(index + 1).unwrap_or(i32::MAX);
            let mut args = PgList::<Node>::new();
            for &(attnum, typ) in cols {
                if attnum <= 0 {
                    // The relkind of every pg_index row: an index; of every
                    // pg_rewrite row, one whose relation's rows are checked.
                    let kind = if attnum == 0 {
                        pg_sys::RELKIND_INDEX
                    } else {
                        pg_sys::RELKIND_MATVIEW
                    };
                    args.push(
                        pg_sys::makeConst(
                            pg_sys::CHAROID,
                            -1,
                            Oid::INVALID,
                            1,
                            pg_sys::Datum::from(kind),
                            false,
                            true,
                        )
                        .cast(),
                    );
                    continue;
                }
                args.push(pg_sys::makeVar(varno, attnum, typ, -1, Oid::INVALID, 0).cast());
            }
            let func = if relid == pg_sys::RelationRelationId
                || relid == pg_sys::IndexRelationId
                || relid == REWRITE
            {
                // Every client reads pg_class: in a database without the
                // extension (postgres, say) and without labels there is
                // nothing to hide; with labels, masking cannot be
                // enforced there and the read is refused.
                match masking::try_function_oid(func) {
                    Some(oid) => oid,
                    None if !masking::database_has_column_labels() => return,
                    None => masking::function_oid(func),
                }
            } else {
                masking::function_oid(func)
            };
            let filter = pg_sys::makeFuncExpr(
                func,
                pg_sys::BOOLOID,
                args.into_pg(),
                Oid::INVALID,
                Oid::INVALID,
                pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
            );
            (*rte).securityQuals =
                pg_sys::lcons(filter.cast(), pg_sys::list_copy((*rte).securityQuals));
        }
    }
}
