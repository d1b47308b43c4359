//! The query-tree rewrite of masked sessions.
//!
//! Runs in the planner hook, on the query *after* the rewriter: views
//! (whoever owns them) are already expanded into subqueries there, so the
//! labelled tables they read appear as plain range-table entries and are
//! masked like any other (a `post_parse_analyze` hook sees the view, not
//! what it reads). Every query the backend runs is planned through the
//! same hook: prepared statements, SQL and PL/pgSQL functions (dynamic SQL
//! included), cursors, `COPY (query)`, `CREATE TABLE AS`.
//!
//! **The boundary is drawn at the read.** A relation read masked whose
//! labelled columns the query reads, at any level (target lists, `WHERE`,
//! joins, `GROUP BY`, `ORDER BY`, windows, aggregates, sublinks, CTEs,
//! `LATERAL`, join aliases, whole-row references), is replaced in its
//! range table by a subquery over it:
//!
//! ```sql
//! (SELECT id, dptext.mask(note, mechanism, params) AS note, ... FROM t) t
//! ```
//!
//! whose output columns keep the relation's column numbers, so every `Var`
//! of the query keeps pointing at the same column, now the masked one.
//! `dptext.mask` is `VOLATILE`, so the planner never pulls the subquery up
//! into the query: the mask is computed in the scan node that reads the
//! row, and no raw labelled value reaches a sort, hash, aggregate, window,
//! material or memoize node, a parallel worker's queue or a temporary file.
//! Quals on unlabelled columns are still pushed into the scan (indexes on
//! them still serve); indexes that read a labelled column are taken from
//! the planner by the `get_relation_info` hook ([`super::hooks`]). Labelled
//! columns the query does not read are `NULL` in the subquery (never
//! computed), unlabelled ones plain columns (the planner drops those it
//! does not need). System columns become extra outputs (`ctid` of a
//! protected relation is refused). The relation's entry moves into the
//! subquery unchanged (privileges, `inh`, row locks pushed down), and
//! row-level security policies stay on the outer entry, as a security
//! barrier: they see masked values, before any leaky qual.
//!
//! A relation is read masked when the session is masked, and also when the
//! role its privileges are checked as (`checkAsUser`: the owner of the view
//! that reads it) is labelled `MASKED`: a view owned by a masked role gives
//! nobody raw values.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::c_void;
use std::rc::Rc;

use pgrx::pg_sys::{self, Node, NodeTag, Oid, Query};
use pgrx::{is_a, IntoDatum, PgList};

use crate::enforce::masking::{self, RelationPolicy};
use crate::pg::version;

/// `pg_statistic_ext_data`: extended statistics' values (pgrx binds no
/// constant for it).
const STATISTIC_EXT_DATA: Oid = Oid::from_u32(3429);

/// `pg_rewrite`, and its column `ev_class` (pgrx binds neither).
const REWRITE: Oid = Oid::from_u32(2618);
const REWRITE_EV_CLASS: i16 = 3;

/// What the first pass found.
#[derive(Default)]
pub(crate) struct Survey {
    /// Every relation read or written, at any level, with the role its
    /// privileges are checked as (0: the current role).
    relations: Vec<(Oid, Oid)>,
    /// The columns each relation entry reads (its `selectedCols`: select
    /// list, quals, grouping; 0 the whole row), with the role they are
    /// checked as: what `dptext.deny_unlabelled_text` checks.
    pub(crate) read_columns: Vec<(Oid, Oid, Vec<i16>)>,
    /// Relations a statement writes (INSERT, UPDATE, DELETE, MERGE), with
    /// the role the write is checked as.
    written: Vec<(Oid, Oid)>,
    /// Look for calls of `dptext.mask` (masked sessions only: a syscache
    /// read per function call).
    look_for_mask: bool,
    /// The query calls `dptext.mask` somewhere.
    pub(crate) calls_mask: bool,
}

type Walker = unsafe extern "C-unwind" fn(*mut Node, *mut c_void) -> bool;

/// Pass one: every relation a query reads or writes.
///
/// # Safety
/// `query` is a valid, rewritten `Query` of the planner hook.
pub(crate) unsafe fn survey(query: *mut Query, look_for_mask: bool) -> Survey {
    let mut s = Survey {
        look_for_mask,
        ..Survey::default()
    };
    // SAFETY: the walker only reads nodes of the tree it is handed.
    unsafe { survey_walker(query.cast(), (&raw mut s).cast()) };
    s
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn survey_walker(node: *mut Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: `ctx` is the `Survey` passed by `survey`, alive for the walk;
    // `node` is a valid node of the tree (PostgreSQL's walkers only pass
    // those), and each cast follows an `is_a` check of its tag.
    unsafe {
        let s = &mut *ctx.cast::<Survey>();
        if is_a(node, NodeTag::T_Query) {
            let q = node.cast::<Query>();
            if (*q).commandType != pg_sys::CmdType::CMD_SELECT && (*q).resultRelation > 0 {
                let rte = rt_fetch((*q).rtable, (*q).resultRelation);
                if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION {
                    s.written.push(((*rte).relid, check_as_user(q, rte)));
                }
            }
            // The relations this level reads, with the role each is
            // checked as and the columns it reads (the entries' own on
            // PostgreSQL 15, the query's permission entries after).
            for rte in PgList::<pg_sys::RangeTblEntry>::from_pg((*q).rtable).iter_ptr() {
                // A view the rewriter expanded is a subquery entry that
                // keeps its relation (PostgreSQL 16 and later; 15 keeps a
                // relation entry for it inside the subquery): its policy
                // refuses labels set on its columns.
                let view =
                    (*rte).rtekind == pg_sys::RTEKind::RTE_SUBQUERY && (*rte).relid != Oid::INVALID;
                if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION && !view {
                    continue;
                }
                let perms = version::perms(q, rte);
                let role = perms.map_or(Oid::INVALID, |p| p.check_as_user);
                s.relations.push(((*rte).relid, role));
                let cols = perms.map_or_else(Vec::new, |p| {
                    crate::pg::catalog::attnums_of(p.selected_cols)
                });
                if !cols.is_empty() {
                    s.read_columns.push(((*rte).relid, role, cols));
                }
            }
            return pg_sys::query_tree_walker(q, Some(survey_walker as Walker), ctx, 0);
        }
        if s.look_for_mask && !s.calls_mask && is_a(node, NodeTag::T_FuncExpr) {
            s.calls_mask = is_mask_function((*node.cast::<pg_sys::FuncExpr>()).funcid);
        }
        pg_sys::expression_tree_walker(node, Some(survey_walker as Walker), ctx)
    }
}

/// The role entry `rte` of `q` has its privileges checked as
/// (`InvalidOid`: the current user).
///
/// # Safety
/// `rte` is a valid entry of `q`'s range table.
unsafe fn check_as_user(q: *mut Query, rte: *mut pg_sys::RangeTblEntry) -> Oid {
    // SAFETY: as the caller promises.
    unsafe { version::perms(q, rte) }.map_or(Oid::INVALID, |p| p.check_as_user)
}

impl Survey {
    /// True when a read or write is checked as a role labelled `MASKED`
    /// (the owner of a view over the relation).
    pub(crate) fn reads_as_masked_role(&self) -> bool {
        self.relations
            .iter()
            .chain(&self.written)
            .any(|&(_, as_user)| as_user != Oid::INVALID && crate::session::role_is_masked(as_user))
    }

    /// Under `dptext.deny_unlabelled_text`, refuses a masked read of a
    /// text-like column that has neither a rule nor an `ALLOW` label.
    pub(crate) fn refuse_unlabelled_text(&self, session_masked: bool) {
        for (relid, as_user, cols) in &self.read_columns {
            if Self::masked_as(session_masked, *as_user) {
                if let Some(why) = masking::unlabelled_text_refusal(*relid, cols) {
                    crate::error::refuse(why);
                }
            }
        }
    }

    /// True when a read checked as `as_user` is masked.
    fn masked_as(session_masked: bool, as_user: Oid) -> bool {
        session_masked || (as_user != Oid::INVALID && crate::session::role_is_masked(as_user))
    }

    /// Decides: refuses masked writes to labelled tables; returns the policies of the relations that
    /// need the rewrite (none: plan the query as it is). In an unmasked
    /// session only relations read through a masked role's view count.
    pub(crate) fn policies(&self, session_masked: bool) -> HashMap<Oid, Rc<RelationPolicy>> {
        let mut out = HashMap::new();
        for &(relid, as_user) in &self.written {
            if Self::masked_as(session_masked, as_user)
                && masking::relation_policy(relid).protects()
            {
                masking::refuse_write(relid);
            }
            if Self::masked_as(session_masked, as_user) && masking::writes_denied(relid) {
                masking::refuse_denied_write(relid);
            }
            if Self::masked_as(session_masked, as_user) {
                if let Some(why) = masking::owner_index_write_refusal(relid) {
                    crate::error::refuse(why);
                }
            }
        }
        for &(relid, as_user) in &self.relations {
            if out.contains_key(&relid) || !Self::masked_as(session_masked, as_user) {
                continue;
            }
            let policy = masking::relation_policy(relid);
            if let RelationPolicy::Refused(why) = policy.as_ref() {
                crate::error::refuse(why.clone());
            }
            // Any family, labelled or not: one placed by an owner's code
            // may be placed by raw values of another table.
            if let Some(why) = masking::family_refusal(relid) {
                crate::error::refuse(why);
            }
            if policy.protects()
                || relid == pg_sys::RelationRelationId
                || relid == pg_sys::DatabaseRelationId
                || relid == pg_sys::IndexRelationId
                || relid == pg_sys::StatisticRelationId
                || relid == STATISTIC_EXT_DATA
                || relid == REWRITE
            {
                out.insert(relid, policy);
            }
        }
        out
    }
}

/// The columns of one relation read masked that a query level reads.
#[derive(Default)]
struct Reads {
    /// Labelled columns read (their masked values are computed).
    labelled: BTreeSet<i16>,
    /// System columns read, in the order their outputs follow the
    /// relation's columns in the subquery.
    system: Vec<i16>,
    /// The relation is a parent of plain inheritance: its rows are read in
    /// an order of their own (see [`Rewrite::read_through_subquery`]).
    shuffle: bool,
}

/// Pass two's state.
struct Rewrite<'a> {
    /// The enclosing queries (their range tables and permission
    /// entries), innermost last.
    queries: Vec<*mut Query>,
    /// What each enclosing query reads of its masked relations, by
    /// range-table index, innermost last.
    reads: Vec<BTreeMap<i32, Reads>>,
    policies: &'a HashMap<Oid, Rc<RelationPolicy>>,
    /// The whole session is masked (else only reads checked as a masked
    /// role are).
    session_masked: bool,
    /// Labelled columns read (each occurrence).
    masked_reads: usize,
}

/// Pass two: rewrites `query` in place so that every read of a labelled
/// column goes through its rule at the scan that reads it, and statistics
/// catalogs hide labelled columns. Returns the number of masked reads.
///
/// # Safety
/// `query` is a valid, rewritten `Query` of the planner hook, which the
/// planner may scribble on.
pub(crate) unsafe fn rewrite(
    query: *mut Query,
    policies: &HashMap<Oid, Rc<RelationPolicy>>,
    session_masked: bool,
) -> usize {
    let mut r = Rewrite {
        queries: Vec::new(),
        reads: Vec::new(),
        policies,
        session_masked,
        masked_reads: 0,
    };
    // SAFETY: as the caller promises; the top query is modified in place
    // (QTW_DONT_COPY_QUERY), sub-queries are copied by the mutator.
    unsafe { rewrite_query(query, &mut r, pg_sys::QTW_DONT_COPY_QUERY as i32) };
    r.masked_reads
}

/// Mutates one query level with its range table on the stack (security
/// quals included), filters the statistics catalogs it reads, then puts
/// each masked relation whose labelled columns it reads behind its
/// masking subquery.
unsafe fn rewrite_query(q: *mut Query, r: &mut Rewrite<'_>, flags: i32) -> *mut Query {
    // SAFETY: `q` is a valid Query whose range table holds RangeTblEntry
    // nodes; the mutator is handed `r`, which outlives the call. Join
    // aliases are not walked: a Var that reads one is followed to the
    // columns it stands for (`Rewrite::read_var`), and the aliases of
    // columns nobody reads must not count as reads.
    unsafe {
        r.queries.push(q);
        r.reads.push(BTreeMap::new());
        let out = version::query_tree_mutator(
            q,
            mutator,
            (r as *mut Rewrite<'_>).cast(),
            flags | pg_sys::QTW_IGNORE_JOINALIASES as i32,
        );
        r.queries.pop();
        r.null_counter_aliases(out);
        let mut reads = r.reads.pop().unwrap_or_default();
        r.refuse_row_locks(out);
        for rte in PgList::<pg_sys::RangeTblEntry>::from_pg((*out).rtable).iter_ptr() {
            r.refuse_tablesample(out, rte);
            r.refuse_disagreeing_family(out, rte);
            if r.session_masked {
                r.hide_statistics(rte, (*out).rtable);
            }
        }
        for (i, rte) in PgList::<pg_sys::RangeTblEntry>::from_pg((*out).rtable)
            .iter_ptr()
            .enumerate()
        {
            let rti = i32::try_from(i + 1).unwrap_or(i32::MAX);
            if rti != (*out).resultRelation
                && (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                && (*rte).inh
                && r.masked_policy(out, rte).is_some_and(|p| p.protects())
                && crate::pg::catalog::has_inheritance_children((*rte).relid)
            {
                reads.entry(rti).or_default().shuffle = true;
            }
        }
        for (rti, read) in &reads {
            r.read_through_subquery(out, *rti, read);
        }
        out
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn mutator(node: *mut Node, ctx: *mut c_void) -> *mut Node {
    if node.is_null() {
        return node;
    }
    // SAFETY: `ctx` is the `Rewrite` of `rewrite`, alive for the mutation;
    // `node` is a valid node, cast only after its tag is checked.
    unsafe {
        let r = &mut *ctx.cast::<Rewrite<'_>>();
        if is_a(node, NodeTag::T_Query) {
            return rewrite_query(node.cast(), r, 0).cast();
        }
        if is_a(node, NodeTag::T_Var) {
            return r.read_var(node.cast()).unwrap_or(node);
        }
        if let Some(arg) = r.redundant_mask_call(node) {
            return mutator(arg, ctx);
        }
        version::expression_tree_mutator(node, mutator, ctx)
    }
}

/// Walks a join alias's expression at query level `level` (context: the
/// `Rewrite` and the level), recording the columns it stands for.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn alias_walker(node: *mut Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: `ctx` is the (Rewrite, level) pair of `record_join`, alive
    // for the walk; `node` is a valid expression node, cast after its tag
    // is checked. Join aliases hold Vars of their own level only.
    unsafe {
        let (r, level) = &mut *ctx.cast::<(&mut Rewrite<'_>, usize)>();
        if is_a(node, NodeTag::T_Var) {
            let var = node.cast::<pg_sys::Var>();
            if (*var).varlevelsup == 0 {
                r.record(*level, (*var).varno, (*var).varattno);
            }
            return false;
        }
        pg_sys::expression_tree_walker(node, Some(alias_walker as Walker), ctx)
    }
}

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

impl<'a> Rewrite<'a> {
    /// What replaces `var`, when it reads a relation read masked: a
    /// whole-row reference becomes a row of the masking subquery's
    /// columns, a system column that subquery's extra output; a labelled
    /// column is recorded (the subquery masks it) and the Var stays.
    unsafe fn read_var(&mut self, var: *mut pg_sys::Var) -> Option<*mut Node> {
        // SAFETY: `var` is a valid Var of the query whose range tables are
        // on the stack; varlevelsup counts enclosing levels, varno indexes
        // that level's range table (1-based), as the parser guarantees.
        unsafe {
            let up = usize::try_from((*var).varlevelsup).ok()?;
            let level = self.queries.len().checked_sub(1 + up)?;
            let rte = rt_fetch((*self.queries[level]).rtable, (*var).varno);
            if (*rte).rtekind == pg_sys::RTEKind::RTE_JOIN {
                self.record_join(level, rte, (*var).varattno);
                return None;
            }
            if let Some(counter) = self.counter_read(rte, var) {
                return Some(counter);
            }
            self.masked_policy(self.queries[level], rte)
                .filter(|p| p.protects())?;
            let attnum = (*var).varattno;
            if attnum == 0 {
                return Some(self.read_row(var, level, (*rte).relid));
            }
            if attnum < 0 {
                if i32::from(attnum) == pg_sys::SelfItemPointerAttributeNumber {
                    // A row's place (page, item) follows from the lengths
                    // of the rows stored before it, labelled values
                    // included.
                    crate::error::refuse(format!(
                        "masked sessions cannot read ctid of {}, which has dptext rules: where a row is stored depends on the length of its labelled values",
                        crate::pg::catalog::relation_name((*rte).relid)
                    ));
                }
                if i32::from(attnum) == pg_sys::TableOidAttributeNumber
                    && crate::pg::catalog::has_inheritance_children((*rte).relid)
                {
                    // Which child of plain inheritance holds a row is the
                    // owner's routing (a trigger, or CHECK constraints),
                    // which may follow the raw value; a declarative
                    // partition's key is checked instead (family_refusal).
                    crate::error::refuse(format!(
                        "masked sessions cannot read tableoid of {}, which has dptext rules and inheritance children: which child holds a row may follow its raw values",
                        crate::pg::catalog::relation_name((*rte).relid)
                    ));
                }
                if i32::from(attnum) != pg_sys::TableOidAttributeNumber {
                    // xmin, xmax, cmin, cmax: which transaction (and
                    // command) wrote a row, so which rows an owner's
                    // `UPDATE ... WHERE name LIKE 'M%'` matched.
                    crate::error::refuse(format!(
                        "masked sessions cannot read the transaction columns (xmin, xmax, cmin, cmax) of {}, which has dptext rules: which rows a statement wrote can follow their raw values",
                        crate::pg::catalog::relation_name((*rte).relid)
                    ));
                }
                let natts = crate::pg::catalog::dropped_columns((*rte).relid).len();
                let system = &mut self.reads[level].entry((*var).varno).or_default().system;
                let slot = match system.iter().position(|&a| a == attnum) {
                    Some(i) => i,
                    None => {
                        system.push(attnum);
                        system.len() - 1
                    }
                };
                let out = pg_sys::copyObjectImpl(var.cast()).cast::<pg_sys::Var>();
                (*out).varattno = i16::try_from(natts + 1 + slot).ok()?;
                (*out).varattnosyn = (*out).varattno;
                return Some(out.cast());
            }
            self.record(level, (*var).varno, attnum);
            None
        }
    }

    /// Records a read of column `attnum` (0: every column) of entry
    /// `varno` at query level `level`, when it is a relation read masked:
    /// refuses a column masked sessions may not read, counts and records a
    /// labelled one. A join's column is followed to what it stands for.
    unsafe fn record(&mut self, level: usize, varno: i32, attnum: i16) {
        // SAFETY: `varno` indexes the range table of `level`.
        unsafe {
            let rte = rt_fetch((*self.queries[level]).rtable, varno);
            if (*rte).rtekind == pg_sys::RTEKind::RTE_JOIN {
                self.record_join(level, rte, attnum);
                return;
            }
            let Some(policy) = self
                .masked_policy(self.queries[level], rte)
                .filter(|p| p.protects())
            else {
                return;
            };
            if attnum == 0 {
                let dropped = crate::pg::catalog::dropped_columns((*rte).relid);
                for (a, gone) in (1..).zip(dropped) {
                    if !gone {
                        self.record(level, varno, a);
                    }
                }
                return;
            }
            if attnum < 0 {
                return;
            }
            if let Some(why) = policy.refuses_column(attnum) {
                crate::error::refuse(why);
            }
            let Some(rule) = policy.rule(attnum) else {
                return;
            };
            self.masked_reads += 1;
            if let Some(g) = rule.group {
                // The query now reads the grouping column too: its column
                // privilege is checked like the parser's own reads, so a
                // role that may not read it learns nothing of it (not even
                // which rows share a value).
                require_select(self.queries[level], rte, g);
            }
            self.reads[level]
                .entry(varno)
                .or_default()
                .labelled
                .insert(attnum);
        }
    }

    /// What a masked session reads for `var` when it reads a catalog
    /// column that holds the cluster's transaction counters: a NULL of the
    /// column's type. `pg_class.relfrozenxid` and `relminmxid`, and
    /// `pg_database.datfrozenxid` and `datminmxid`, are set by a vacuum to
    /// the counters of that moment, so read around an owner's statement
    /// and a vacuum they tell whether it took a transaction ID (whether an
    /// `UPDATE ... WHERE name LIKE 'A%'` matched a row). A whole row of
    /// either catalog is refused (name the columns instead).
    unsafe fn counter_read(
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
    unsafe fn null_counter_aliases(&self, q: *mut Query) {
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

    /// Records the columns that column `attnum` (0: all) of join `rte`
    /// at level `level` stands for.
    unsafe fn record_join(&mut self, level: usize, rte: *mut pg_sys::RangeTblEntry, attnum: i16) {
        // SAFETY: a join entry's alias list holds one expression (or NULL,
        // for a dropped column) per join column, of the join's level.
        unsafe {
            let aliases = PgList::<Node>::from_pg((*rte).joinaliasvars);
            let picked: Vec<*mut Node> = if attnum == 0 {
                aliases.iter_ptr().collect()
            } else {
                usize::try_from(attnum - 1)
                    .ok()
                    .and_then(|i| aliases.get_ptr(i))
                    .into_iter()
                    .collect()
            };
            let mut ctx: (&mut Rewrite<'a>, usize) = (self, level);
            for expr in picked {
                alias_walker(expr, (&raw mut ctx).cast());
            }
        }
    }

    /// The policy of `rte` when it is a relation this query reads masked
    /// and that has one.
    unsafe fn masked_policy(
        &self,
        q: *mut Query,
        rte: *mut pg_sys::RangeTblEntry,
    ) -> Option<&'a Rc<RelationPolicy>> {
        // SAFETY: `rte` is a valid range-table entry of the query.
        unsafe {
            if (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION
                || !Survey::masked_as(self.session_masked, check_as_user(q, rte))
            {
                return None;
            }
            self.policies.get(&(*rte).relid)
        }
    }

    /// `node` as a call `dptext.mask(x, mechanism, params)` with constant
    /// text `mechanism` and `params`: (`x`, mechanism, params).
    unsafe fn mask_call_parts(&self, node: *mut Node) -> Option<(*mut Node, String, String)> {
        // SAFETY: `node` is a valid expression node, cast after its tag is
        // checked; a FuncExpr's args list holds expression nodes.
        unsafe {
            if !is_a(node, NodeTag::T_FuncExpr) {
                return None;
            }
            let call = node.cast::<pg_sys::FuncExpr>();
            let args = PgList::<Node>::from_pg((*call).args);
            // The three-argument call, or the grouped one (whose group
            // argument the rule's own rewrite derives again).
            let ours = matches!(args.len(), 3 | 4) && is_mask_function((*call).funcid);
            if !ours {
                return None;
            }
            Some((
                args.get_ptr(0)?,
                text_value(args.get_ptr(1)?)?,
                text_value(args.get_ptr(2)?)?,
            ))
        }
    }

    /// A call `dptext.mask(x, mechanism, params)` whose `x` is a plain
    /// copy of a column this query masks with that very rule: the walk
    /// masks the column where it is read, so the call would apply the rule
    /// a second time. Returns `x` (text, like the call), to be walked in
    /// its place. Two cases meet this: a query tree planned a second time
    /// (Citus plans parts of a distributed query again), and the query a
    /// Citus coordinator sends a worker after masking it (the call arrives
    /// as SQL text, over the shard, which carries the same rule; a
    /// coordinator may also move the call above a subquery that selects
    /// the column). Dropping such a call cannot leak: every read of a
    /// labelled column is masked at the read. Any other call is left to
    /// the walk, and refused when it runs unless the rewrite built it.
    unsafe fn redundant_mask_call(&self, call: *mut Node) -> Option<*mut Node> {
        // SAFETY: `call` is a valid node of the query being rewritten; the
        // Var is cast after its tag is checked.
        unsafe {
            let (arg, mechanism, params) = self.mask_call_parts(call)?;
            let var = strip_relabels(arg);
            if !is_a(var, NodeTag::T_Var) {
                return None;
            }
            let var = var.cast::<pg_sys::Var>();
            let up = usize::try_from((*var).varlevelsup).ok()?;
            let level = self.queries.len().checked_sub(1 + up)?;
            self.copies_column(self.queries[level], var, &mechanism, &params, 0)
                .then_some(arg)
        }
    }

    /// True when `var` (of range table `rtable`) is a labelled column read
    /// masked by the rule (`mechanism`, `params`), or a subquery's output
    /// that copies one (directly or through such a `dptext.mask` call), or
    /// a column of a Citus intermediate result: what a part of the query
    /// that Citus planned on its own computed, planned (so masked) through
    /// this hook like any query of the session.
    unsafe fn copies_column(
        &self,
        q: *mut Query,
        var: *mut pg_sys::Var,
        mechanism: &str,
        params: &str,
        depth: usize,
    ) -> bool {
        // SAFETY: `var` indexes `rtable` (1-based, as the parser
        // guarantees); a subquery's target list holds TargetEntry nodes
        // whose Vars of level 0 index that subquery's range table.
        unsafe {
            if depth > 16 || (*var).varattno <= 0 {
                return false;
            }
            let rte = rt_fetch((*q).rtable, (*var).varno);
            match (*rte).rtekind {
                // A column with a rule is never a refused one.
                pg_sys::RTEKind::RTE_RELATION => self
                    .masked_policy(q, rte)
                    .and_then(|p| p.rule((*var).varattno))
                    .is_some_and(|r| r.mechanism == mechanism && r.params == params),
                pg_sys::RTEKind::RTE_SUBQUERY if !(*rte).subquery.is_null() => {
                    let sub = (*rte).subquery;
                    let Some(te) = PgList::<pg_sys::TargetEntry>::from_pg((*sub).targetList)
                        .iter_ptr()
                        .find(|te| (**te).resno == (*var).varattno && !(**te).resjunk)
                    else {
                        return false;
                    };
                    let mut expr = strip_relabels((*te).expr.cast());
                    if is_a(expr, NodeTag::T_FuncExpr) {
                        match self.mask_call_parts(expr) {
                            Some((inner, m, p)) if m == mechanism && p == params => {
                                expr = strip_relabels(inner);
                            }
                            _ => return false,
                        }
                    }
                    if !is_a(expr, NodeTag::T_Var) {
                        return false;
                    }
                    let inner = expr.cast::<pg_sys::Var>();
                    (*inner).varlevelsup == 0
                        && self.copies_column(sub, inner, mechanism, params, depth + 1)
                }
                pg_sys::RTEKind::RTE_FUNCTION => reads_intermediate_result(rte),
                _ => false,
            }
        }
    }

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
    unsafe fn read_row(&mut self, var: *mut pg_sys::Var, level: usize, relid: Oid) -> *mut Node {
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
    unsafe fn read_through_subquery(&self, q: *mut Query, rti: i32, read: &Reads) {
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

    /// Refuses row locks (`FOR UPDATE`, `FOR SHARE`, `SKIP LOCKED`,
    /// `NOWAIT`) on a relation read masked whose policy protects it. A
    /// masked role that may update one column of it could otherwise lock
    /// its rows: `SKIP LOCKED` then shows which rows an owner's open
    /// `UPDATE ... WHERE name LIKE 'B%'` matched, and a lock wait's error
    /// names the row's place and the owner's transaction.
    unsafe fn refuse_row_locks(&self, q: *mut Query) {
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
    unsafe fn refuse_tablesample(&self, q: *mut Query, rte: *mut pg_sys::RangeTblEntry) {
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
    unsafe fn refuse_disagreeing_family(&self, q: *mut Query, rte: *mut pg_sys::RangeTblEntry) {
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
    unsafe fn hide_statistics(&self, rte: *mut pg_sys::RangeTblEntry, rtable: *mut pg_sys::List) {
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

/// True when `funcid` is `dptext.mask`, by name (no lookup that could
/// fail: the extension may not be installed in this database).
unsafe fn is_mask_function(funcid: Oid) -> bool {
    // SAFETY: syscache reads returning NULL for missing entries, else
    // palloc'd NUL-terminated strings.
    unsafe {
        let name = pg_sys::get_func_name(funcid);
        if name.is_null() || std::ffi::CStr::from_ptr(name).to_bytes() != b"mask" {
            return false;
        }
        let nsp = pg_sys::get_namespace_name(pg_sys::get_func_namespace(funcid));
        !nsp.is_null() && std::ffi::CStr::from_ptr(nsp).to_bytes() == b"dptext"
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
unsafe fn require_select(q: *mut Query, rte: *mut pg_sys::RangeTblEntry, attnum: i16) {
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

/// True when `rte` reads Citus's `pg_catalog.read_intermediate_result(s)`.
unsafe fn reads_intermediate_result(rte: *mut pg_sys::RangeTblEntry) -> bool {
    // SAFETY: a function RTE's `functions` list holds RangeTblFunction
    // nodes whose funcexpr is an expression node, cast after its tag is
    // checked; get_func_name returns NULL or a palloc'd C string.
    unsafe {
        let functions = PgList::<pg_sys::RangeTblFunction>::from_pg((*rte).functions);
        if functions.len() != 1 {
            return false;
        }
        let Some(f) = functions.get_ptr(0) else {
            return false;
        };
        let expr = (*f).funcexpr;
        if expr.is_null() || !is_a(expr, NodeTag::T_FuncExpr) {
            return false;
        }
        let funcid = (*expr.cast::<pg_sys::FuncExpr>()).funcid;
        if pg_sys::get_func_namespace(funcid) != Oid::from(pg_sys::PG_CATALOG_NAMESPACE) {
            return false;
        }
        let name = pg_sys::get_func_name(funcid);
        if name.is_null() {
            return false;
        }
        matches!(
            std::ffi::CStr::from_ptr(name).to_bytes(),
            b"read_intermediate_result" | b"read_intermediate_results"
        )
    }
}

/// `node` without the binary-compatible casts around it, nor the
/// `text(bpchar)` casts the rewrite puts around a `char(n)` column.
unsafe fn strip_relabels(mut node: *mut Node) -> *mut Node {
    // SAFETY: `node` is a valid expression node; a RelabelType's arg is
    // one, and so is a FuncExpr's argument (its list holds expressions).
    unsafe {
        loop {
            if node.is_null() {
                return node;
            }
            if is_a(node, NodeTag::T_RelabelType) {
                node = (*node.cast::<pg_sys::RelabelType>()).arg.cast();
                continue;
            }
            if is_a(node, NodeTag::T_FuncExpr) {
                let call = node.cast::<pg_sys::FuncExpr>();
                let args = PgList::<Node>::from_pg((*call).args);
                if (*call).funcid == Oid::from(pg_sys::F_TEXT_BPCHAR) && args.len() == 1 {
                    if let Some(arg) = args.get_ptr(0) {
                        node = arg;
                        continue;
                    }
                }
            }
            return node;
        }
    }
}

/// The value of a non-null `text` constant.
unsafe fn text_value(node: *mut Node) -> Option<String> {
    // SAFETY: `node` is a valid expression node, cast after its tag is
    // checked; a non-null text Const holds a text varlena.
    unsafe {
        if !is_a(node, NodeTag::T_Const) {
            return None;
        }
        let c = node.cast::<pg_sys::Const>();
        if (*c).consttype != pg_sys::TEXTOID || (*c).constisnull {
            return None;
        }
        <String as pgrx::FromDatum>::from_datum((*c).constvalue, false)
    }
}

/// The range-table entry `index` (1-based) of `rtable`.
unsafe fn rt_fetch(rtable: *mut pg_sys::List, index: i32) -> *mut pg_sys::RangeTblEntry {
    // SAFETY: the parser only produces valid 1-based indexes into the
    // range table of the query the node belongs to.
    unsafe { pg_sys::list_nth(rtable, index - 1).cast() }
}
