//! The masking subquery that replaces a relation read masked: one output
//! per column at the column's own number, labelled columns through
//! `dptext.mask` (grouped ones by their group's value), the rest plain or
//! NULL, system columns after them; a plain-inheritance parent's rows
//! shuffled above it.

use std::ffi::c_void;

use pgrx::pg_sys::{self, Node, NodeTag, Oid, Query};
use pgrx::{is_a, IntoDatum, PgList};

use crate::enforce::masking::{self, RelationPolicy};
use crate::pg::version;

use super::{check_as_user, rt_fetch, Reads, Rewrite, Walker};

/// Whether `qual` (a row-level security qual of range-table entry `rti`)
/// reads a column of that entry which `policy` masks or refuses, or its
/// whole row, at any depth of its sublinks.
///
/// # Safety
/// `qual` is a valid expression of the query whose entry `rti` is.
unsafe fn reads_protected_column(qual: *mut Node, rti: i32, policy: &RelationPolicy) -> bool {
    struct Look<'p> {
        rti: i32,
        level: u32,
        policy: &'p RelationPolicy,
        found: bool,
    }
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn look(node: *mut Node, ctx: *mut c_void) -> bool {
        if node.is_null() {
            return false;
        }
        // SAFETY: `ctx` is the `Look` below, alive for the walk; nodes are
        // cast after their tags are checked.
        unsafe {
            let l = &mut *ctx.cast::<Look<'_>>();
            if is_a(node, NodeTag::T_Var) {
                let var = node.cast::<pg_sys::Var>();
                let a = (*var).varattno;
                if (*var).varno == l.rti
                    && (*var).varlevelsup == l.level
                    && (a == 0
                        || (a > 0
                            && (l.policy.rule(a).is_some()
                                || l.policy.refuses_column(a).is_some())))
                {
                    l.found = true;
                    return true;
                }
                return false;
            }
            if is_a(node, NodeTag::T_Query) {
                l.level += 1;
                let found = pg_sys::query_tree_walker(node.cast(), Some(look as Walker), ctx, 0);
                l.level -= 1;
                return found;
            }
            pg_sys::expression_tree_walker(node, Some(look as Walker), ctx)
        }
    }
    let mut l = Look {
        rti,
        level: 0,
        policy,
        found: false,
    };
    // SAFETY: the walker only reads the tree it is handed.
    unsafe { look(qual, (&raw mut l).cast()) };
    l.found
}

/// `sub` (a masking subquery over a parent of plain inheritance) read
/// through an outer subquery that hands its rows on in a random order: a
/// plain parent returns its children's rows one child after the other,
/// and which child holds a row is the owner's routing (a trigger on the
/// raw value, say). The order comes from `dptext.shuffle_key()`, drawn
/// from the operating system (a session can seed `random()` with
/// `setseed` and replay it). The sort is above `sub`, whose scan computes
/// the masks: the rows it sorts (and may spill) hold masked values only.
///
/// # Safety
/// `sub` is a valid masking subquery whose target list has one entry per
/// output column (resnos 1..n, none junk); `eref` is its relation's alias
/// and `colnames` the column names of those outputs.
unsafe fn shuffled(
    sub: *mut Query,
    eref: *mut pg_sys::Alias,
    colnames: *mut pg_sys::List,
) -> *mut Query {
    // SAFETY: as the caller promises; every node is built fresh in the
    // planner's memory context, the inner target entries are only read.
    unsafe {
        let inner =
            pgrx::PgBox::<pg_sys::RangeTblEntry>::alloc_node(NodeTag::T_RangeTblEntry).into_pg();
        (*inner).rtekind = pg_sys::RTEKind::RTE_SUBQUERY;
        (*inner).subquery = sub;
        let alias = pg_sys::copyObjectImpl(eref.cast()).cast::<pg_sys::Alias>();
        (*alias).colnames = pg_sys::list_copy(colnames);
        (*inner).eref = alias;
        (*inner).inFromCl = true;
        let mut tlist = PgList::<pg_sys::TargetEntry>::new();
        let mut last: i16 = 0;
        for te in PgList::<pg_sys::TargetEntry>::from_pg((*sub).targetList).iter_ptr() {
            let expr = (*te).expr.cast::<Node>();
            let var = pg_sys::makeVar(
                1,
                (*te).resno,
                pg_sys::exprType(expr),
                pg_sys::exprTypmod(expr),
                pg_sys::exprCollation(expr),
                0,
            );
            tlist.push(pg_sys::makeTargetEntry(
                var.cast(),
                (*te).resno,
                (*te).resname,
                false,
            ));
            last = last.max((*te).resno);
        }
        let key = pg_sys::makeFuncExpr(
            masking::function_oid("dptext.shuffle_key()"),
            pg_sys::FLOAT8OID,
            std::ptr::null_mut(),
            Oid::INVALID,
            Oid::INVALID,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        );
        let te = pg_sys::makeTargetEntry(key.cast(), last + 1, std::ptr::null_mut(), true);
        (*te).ressortgroupref = 1;
        tlist.push(te);
        let lt = Oid::from(pg_sys::Float8LessOperator);
        let mut order =
            pgrx::PgBox::<pg_sys::SortGroupClause>::alloc_node(NodeTag::T_SortGroupClause);
        order.tleSortGroupRef = 1;
        order.sortop = lt;
        order.eqop = pg_sys::get_equality_op_for_ordering_op(lt, std::ptr::null_mut());
        order.nulls_first = false;
        let mut sort = PgList::<pg_sys::SortGroupClause>::new();
        sort.push(order.into_pg());
        let outer = pgrx::PgBox::<Query>::alloc_node(NodeTag::T_Query).into_pg();
        (*outer).commandType = pg_sys::CmdType::CMD_SELECT;
        (*outer).querySource = pg_sys::QuerySource::QSRC_ORIGINAL;
        (*outer).canSetTag = true;
        let mut rtable = PgList::<pg_sys::RangeTblEntry>::new();
        rtable.push(inner);
        (*outer).rtable = rtable.into_pg();
        let mut only = pgrx::PgBox::<pg_sys::RangeTblRef>::alloc_node(NodeTag::T_RangeTblRef);
        only.rtindex = 1;
        let mut from = PgList::<Node>::new();
        from.push(only.into_pg().cast());
        (*outer).jointree = pg_sys::makeFromExpr(from.into_pg(), std::ptr::null_mut());
        (*outer).targetList = tlist.into_pg();
        (*outer).sortClause = sort.into_pg();
        // Row locks were pushed into `sub`; the outer query marks them
        // pushed down, as the parser does for a locked subquery.
        if (*sub).hasForUpdate {
            for rc in PgList::<pg_sys::RowMarkClause>::from_pg((*sub).rowMarks).iter_ptr() {
                let outer_rc = pg_sys::copyObjectImpl(rc.cast()).cast::<pg_sys::RowMarkClause>();
                (*outer_rc).pushedDown = true;
                (*outer).rowMarks = pg_sys::lappend((*outer).rowMarks, outer_rc.cast());
            }
            (*outer).hasForUpdate = true;
        }
        outer
    }
}

/// A `text` constant.
unsafe fn text_const(s: &str) -> *mut Node {
    let datum = s.into_datum().unwrap_or(pg_sys::Datum::from(0));
    // SAFETY: `datum` is a text varlena in the current memory context.
    unsafe {
        pg_sys::makeConst(
            pg_sys::TEXTOID,
            -1,
            pg_sys::DEFAULT_COLLATION_OID,
            -1,
            datum,
            false,
            false,
        )
        .cast()
    }
}

/// Column `attnum` of the row `var` reads (same range-table entry and
/// level), as text: a relabel for the text types, an I/O conversion (the
/// type's output function, as `::text` does) for any other.
///
/// # Safety
/// `var` is a valid Var reading relation `relid`, which has column
/// `attnum`; the nodes are built in the current memory context.
unsafe fn group_text(var: *mut pg_sys::Var, relid: Oid, attnum: i16) -> *mut Node {
    let (typ, typmod, coll) = crate::pg::catalog::attribute_type(relid, attnum);
    // The policy refused other types; checked again, as the text of any
    // other type may depend on the session's settings.
    if !crate::rules::group_type_supported(typ) {
        crate::error::refuse(format!(
            "{} groups a dptext rule by column {attnum}, whose type's text depends on session settings",
            crate::pg::catalog::relation_name(relid)
        ));
    }
    // SAFETY: as the caller promises; makeVar and the node constructors
    // allocate fresh nodes; getBaseType is a syscache read.
    unsafe {
        let base = pg_sys::getBaseType(typ);
        let group: *mut pg_sys::Expr =
            pg_sys::makeVar((*var).varno, attnum, typ, typmod, coll, (*var).varlevelsup).cast();
        if typ == pg_sys::TEXTOID {
            return group.cast();
        }
        if base == pg_sys::TEXTOID || base == pg_sys::VARCHAROID {
            return pg_sys::makeRelabelType(
                group,
                pg_sys::TEXTOID,
                -1,
                coll,
                pg_sys::CoercionForm::COERCE_IMPLICIT_CAST,
            )
            .cast();
        }
        if base == pg_sys::BPCHAROID {
            // `text(bpchar)`, which drops trailing blanks as `::text` does,
            // so a sanitized view (`group::text`) and a masked read group a
            // char(n) value alike.
            return bpchar_to_text(group, coll);
        }
        let mut io = pgrx::PgBox::<pg_sys::CoerceViaIO>::alloc_node(NodeTag::T_CoerceViaIO);
        io.arg = group;
        io.resulttype = pg_sys::TEXTOID;
        io.resultcollid = pg_sys::DEFAULT_COLLATION_OID;
        io.coerceformat = pg_sys::CoercionForm::COERCE_EXPLICIT_CAST;
        io.location = -1;
        io.into_pg().cast()
    }
}

/// `text(expr)` for an expression of type `bpchar` or a domain over it:
/// PostgreSQL's cast, which drops trailing blanks.
///
/// # Safety
/// `expr` is a valid expression node of type `bpchar` or a domain over
/// it; the nodes are built in the current memory context.
unsafe fn bpchar_to_text(expr: *mut pg_sys::Expr, coll: Oid) -> *mut Node {
    // SAFETY: as the caller promises; the relabel (to the base type, for
    // a domain) and the call are fresh nodes; `text(bpchar)` is built in.
    unsafe {
        let mut args = PgList::<Node>::new();
        args.push(
            pg_sys::makeRelabelType(
                expr,
                pg_sys::BPCHAROID,
                -1,
                coll,
                pg_sys::CoercionForm::COERCE_IMPLICIT_CAST,
            )
            .cast(),
        );
        pg_sys::makeFuncExpr(
            Oid::from(pg_sys::F_TEXT_BPCHAR),
            pg_sys::TEXTOID,
            args.into_pg(),
            coll,
            coll,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CAST,
        )
        .cast()
    }
}

/// Refuses the statement unless the role `rte` is checked as may read
/// column `attnum` of its relation: the rewrite reads the grouping column
/// of every masked value, which the parser's privilege check did not see.
/// Checked here, while planning (a cached plan is planned again when
/// privileges change), rather than by adding the column to the entry's
/// `selectedCols`: the mutator may already have copied the entry.
///
/// # Safety
/// `rte` is a valid relation entry of `q`, the query being rewritten.
pub(super) unsafe fn require_select(q: *mut Query, rte: *mut pg_sys::RangeTblEntry, attnum: i16) {
    // SAFETY: catalog reads; the relation exists (the query locks it).
    unsafe {
        let relid = (*rte).relid;
        let as_user = check_as_user(q, rte);
        let role = if as_user != Oid::INVALID {
            as_user
        } else {
            pg_sys::GetUserId()
        };
        let ok = pg_sys::AclResult::ACLCHECK_OK;
        if pg_sys::pg_class_aclcheck(relid, role, pg_sys::AclMode::from(pg_sys::ACL_SELECT)) != ok
            && pg_sys::pg_attribute_aclcheck(
                relid,
                attnum,
                role,
                pg_sys::AclMode::from(pg_sys::ACL_SELECT),
            ) != ok
        {
            crate::error::refuse(format!(
                "a dptext rule of {} groups by column {attnum}, which this role may not read: the masked value would depend on it",
                crate::pg::catalog::relation_name(relid)
            ));
        }
    }
}

impl Rewrite<'_> {
    /// `dptext.mask(arg::text, mechanism, params)::type`, or with a
    /// grouping column `dptext.mask(arg::text, mechanism, params,
    /// group::text)::type`, the group read from the same row.
    unsafe fn mask_expr(
        &self,
        var: *mut pg_sys::Var,
        relid: Oid,
        rule: &masking::ColumnRule,
    ) -> *mut Node {
        // SAFETY: builds fresh nodes in the planner's memory context from a
        // valid Var; text, varchar and bpchar share text's representation,
        // so the relabels are what the parser emits for them.
        unsafe {
            let typ = (*var).vartype;
            let coll = (*var).varcollid;
            let mut arg: *mut pg_sys::Expr = var.cast();
            if typ != pg_sys::TEXTOID && pg_sys::getBaseType(typ) == pg_sys::BPCHAROID {
                // `text(bpchar)`, which drops the trailing blanks: a
                // char(n) value is stored padded to n characters, and the
                // mechanisms copy whitespace, so the padding (n minus the
                // raw length) would pass through the masking as it is.
                arg = bpchar_to_text(arg, coll).cast();
            } else if typ != pg_sys::TEXTOID {
                arg = pg_sys::makeRelabelType(
                    arg,
                    pg_sys::TEXTOID,
                    -1,
                    coll,
                    pg_sys::CoercionForm::COERCE_IMPLICIT_CAST,
                )
                .cast();
            }
            let mut args = PgList::<Node>::new();
            args.push(arg.cast());
            args.push(text_const(&rule.mechanism));
            args.push(text_const(&rule.params));
            // Looked up (and the database's encoding checked) only when a
            // column is masked: a query that reads a statistics catalog or
            // pg_class alone needs neither.
            let mut func = masking::mask_function();
            if let Some(g) = rule.group {
                args.push(group_text(var, relid, g));
                func = masking::mask_function_grouped();
            }
            // COERCE_SQL_SYNTAX marks the call as the rewrite's: the parser
            // never gives it to a call of a function outside pg_catalog, so
            // `dptext.mask` can tell its own calls from a user's.
            let call = pg_sys::makeFuncExpr(
                func,
                pg_sys::TEXTOID,
                args.into_pg(),
                coll,
                coll,
                pg_sys::CoercionForm::COERCE_SQL_SYNTAX,
            );
            if typ == pg_sys::TEXTOID {
                call.cast()
            } else {
                pg_sys::makeRelabelType(
                    call.cast(),
                    typ,
                    -1,
                    coll,
                    pg_sys::CoercionForm::COERCE_IMPLICIT_CAST,
                )
                .cast()
            }
        }
    }

    /// A whole-row reference as a row of its columns: the masking
    /// subquery's, which every column of the relation is recorded for.
    pub(super) unsafe fn read_row(
        &mut self,
        var: *mut pg_sys::Var,
        level: usize,
        relid: Oid,
    ) -> *mut Node {
        // SAFETY: the row type of a relation in the range table exists (the
        // query holds a lock on it); the copied descriptor is ours to read.
        // Dropped columns get a NULL, which the executor ignores for them.
        unsafe {
            self.record(level, (*var).varno, 0);
            let typid = pg_sys::get_rel_type_id(relid);
            let desc = pg_sys::lookup_rowtype_tupdesc_copy(typid, -1);
            let attrs = version::attributes(desc);
            let mut fields = PgList::<Node>::new();
            let mut names = PgList::<Node>::new();
            for (i, &att) in attrs.iter().enumerate() {
                let att = &*att;
                let attnum = i16::try_from(i + 1).unwrap_or(i16::MAX);
                if att.attisdropped {
                    fields.push(pg_sys::makeNullConst(pg_sys::INT4OID, -1, Oid::INVALID).cast());
                    names.push(pg_sys::makeString(pgrx::pg_sys::pstrdup(c"".as_ptr())).cast());
                    continue;
                }
                let col = pg_sys::makeVar(
                    (*var).varno,
                    attnum,
                    att.atttypid,
                    att.atttypmod,
                    att.attcollation,
                    (*var).varlevelsup,
                );
                fields.push(col.cast());
                names.push(pg_sys::makeString(pg_sys::pstrdup(att.attname.data.as_ptr())).cast());
            }
            let row = pgrx::PgBox::<pg_sys::RowExpr>::alloc_node(NodeTag::T_RowExpr).into_pg();
            (*row).args = fields.into_pg();
            (*row).row_typeid = (*var).vartype;
            (*row).row_format = pg_sys::CoercionForm::COERCE_IMPLICIT_CAST;
            (*row).colnames = names.into_pg();
            (*row).location = -1;
            row.cast()
        }
    }

    /// Replaces relation entry `rti` of `q` by its masking subquery: one
    /// output per column of the relation, at the column's own number (the
    /// query's Vars keep their meaning), the labelled columns `read`
    /// records masked, other labelled or refused columns NULL, the rest
    /// plain; then the system columns it records.
    pub(super) unsafe fn read_through_subquery(&self, q: *mut Query, rti: i32, read: &Reads) {
        // SAFETY: `rti` indexes `q`'s range table (the mutator's copy, ours
        // to change); the relation is locked by the query; every node is
        // built fresh in the planner's memory context.
        unsafe {
            let rte = rt_fetch((*q).rtable, rti);
            let Some(policy) = self.masked_policy(q, rte) else {
                return;
            };
            let relid = (*rte).relid;
            let inner = pg_sys::copyObjectImpl(rte.cast()).cast::<pg_sys::RangeTblEntry>();
            // Row-level security policies that read no column masked
            // sessions read masked or not at all go below the mask, onto
            // the relation where its rows are read: rows they hide are
            // never masked (a mask over a hidden row showed, by its error
            // or its time, that the row exists and how long its value
            // is). Those that read such a column stay above, on masked
            // values, as before.
            let mut below = PgList::<Node>::new();
            let mut above = PgList::<Node>::new();
            for qual in PgList::<Node>::from_pg((*rte).securityQuals).iter_ptr() {
                if reads_protected_column(qual, rti, policy) {
                    above.push(qual);
                } else {
                    let moved = pg_sys::copyObjectImpl(qual.cast()).cast::<Node>();
                    pg_sys::ChangeVarNodes(moved, rti, 1, 0);
                    below.push(moved);
                }
            }
            // The planner plans a query's sublinks only when it says it
            // has some (a policy's `ward IN (SELECT ...)`).
            let moved_quals = !below.is_empty();
            (*inner).securityQuals = below.into_pg();
            (*rte).securityQuals = above.into_pg();
            let mut tlist = PgList::<pg_sys::TargetEntry>::new();
            let mut colnames = PgList::<Node>::from_pg(pg_sys::list_copy((*(*rte).eref).colnames));
            let columns = crate::pg::catalog::dropped_columns(relid);
            let natts = columns.len();
            for (attnum, dropped) in (1..).zip(columns) {
                let (typ, typmod, coll) = crate::pg::catalog::attribute_type(relid, attnum);
                let expr: *mut pg_sys::Expr = if dropped {
                    pg_sys::makeNullConst(pg_sys::INT4OID, -1, Oid::INVALID).cast()
                } else if let Some(rule) = policy.rule(attnum) {
                    if read.labelled.contains(&attnum) {
                        let var = pg_sys::makeVar(1, attnum, typ, typmod, coll, 0);
                        self.mask_expr(var, relid, rule).cast()
                    } else {
                        pg_sys::makeNullConst(typ, typmod, coll).cast()
                    }
                } else if policy.refuses_column(attnum).is_some() {
                    pg_sys::makeNullConst(typ, typmod, coll).cast()
                } else {
                    pg_sys::makeVar(1, attnum, typ, typmod, coll, 0).cast()
                };
                let name = if dropped {
                    pg_sys::pstrdup(c"".as_ptr())
                } else {
                    pg_sys::get_attname(relid, attnum, false)
                };
                tlist.push(pg_sys::makeTargetEntry(expr, attnum, name, false));
            }
            for (i, &attnum) in read.system.iter().enumerate() {
                let def = pg_sys::SystemAttributeDefinition(attnum);
                let var = pg_sys::makeVar(1, attnum, (*def).atttypid, -1, Oid::INVALID, 0);
                let resno = i16::try_from(natts + 1 + i).unwrap_or(i16::MAX);
                let name = pg_sys::pstrdup((*def).attname.data.as_ptr());
                tlist.push(pg_sys::makeTargetEntry(var.cast(), resno, name, false));
                colnames.push(pg_sys::makeString(pg_sys::pstrdup(name)).cast());
            }
            let sub = pgrx::PgBox::<Query>::alloc_node(NodeTag::T_Query).into_pg();
            (*sub).commandType = pg_sys::CmdType::CMD_SELECT;
            (*sub).querySource = pg_sys::QuerySource::QSRC_ORIGINAL;
            (*sub).canSetTag = true;
            (*sub).hasSubLinks = moved_quals;
            let mut rtable = PgList::<pg_sys::RangeTblEntry>::new();
            rtable.push(inner);
            (*sub).rtable = rtable.into_pg();
            // The privileges are checked where the relation is read.
            version::move_perms(q, rte, sub, inner);
            let mut only = pgrx::PgBox::<pg_sys::RangeTblRef>::alloc_node(NodeTag::T_RangeTblRef);
            only.rtindex = 1;
            let mut from = PgList::<Node>::new();
            from.push(only.into_pg().cast());
            (*sub).jointree = pg_sys::makeFromExpr(from.into_pg(), std::ptr::null_mut());
            (*sub).targetList = tlist.into_pg();
            // Row locks (FOR UPDATE/SHARE) are taken where the rows are
            // read: pushed into the subquery, as the parser does for a
            // locked subquery in FROM.
            for rc in PgList::<pg_sys::RowMarkClause>::from_pg((*q).rowMarks).iter_ptr() {
                if (*rc).rti == rti as pg_sys::Index {
                    let inner_rc =
                        pg_sys::copyObjectImpl(rc.cast()).cast::<pg_sys::RowMarkClause>();
                    (*inner_rc).rti = 1;
                    (*inner_rc).pushedDown = false;
                    (*sub).rowMarks = pg_sys::lappend((*sub).rowMarks, inner_rc.cast());
                    (*sub).hasForUpdate = true;
                    (*rc).pushedDown = true;
                }
            }
            let sub = if read.shuffle {
                shuffled(sub, (*rte).eref, colnames.as_ptr())
            } else {
                sub
            };
            (*rte).rtekind = pg_sys::RTEKind::RTE_SUBQUERY;
            (*rte).subquery = sub;
            (*rte).relid = Oid::INVALID;
            (*rte).relkind = 0;
            (*rte).rellockmode = 0;
            (*rte).tablesample = std::ptr::null_mut();
            (*rte).inh = false;
            // Row-level security policies stay here, over the masked
            // columns; as a security barrier no leaky qual of the query
            // runs before them. A shuffled read is a barrier too: a leaky
            // qual pushed below the shuffle would see the rows child after
            // child (a NOTICE per row tells the order).
            (*rte).security_barrier = !(*rte).securityQuals.is_null() || read.shuffle;
            let eref = pg_sys::copyObjectImpl((*rte).eref.cast()).cast::<pg_sys::Alias>();
            (*eref).colnames = colnames.into_pg();
            (*rte).eref = eref;
        }
    }
}
