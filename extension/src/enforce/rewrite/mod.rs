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
use pgrx::{is_a, PgList};

use crate::enforce::masking::RelationPolicy;
use crate::pg::version;

mod mask_calls;
mod refusals;
mod subquery;
mod survey;

use subquery::require_select;
pub(crate) use survey::{survey, Survey};

/// `pg_statistic_ext_data`: extended statistics' values (pgrx binds no
/// constant for it).
const STATISTIC_EXT_DATA: Oid = Oid::from_u32(3429);

/// `pg_rewrite`, and its column `ev_class` (pgrx binds neither).
const REWRITE: Oid = Oid::from_u32(2618);
const REWRITE_EV_CLASS: i16 = 3;

type Walker = unsafe extern "C-unwind" fn(*mut Node, *mut c_void) -> bool;

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

/// The role entry `rte` of `q` has its privileges checked as
/// (`InvalidOid`: the current user).
///
/// # Safety
/// `rte` is a valid entry of `q`'s range table.
unsafe fn check_as_user(q: *mut Query, rte: *mut pg_sys::RangeTblEntry) -> Oid {
    // SAFETY: as the caller promises.
    unsafe { version::perms(q, rte) }.map_or(Oid::INVALID, |p| p.check_as_user)
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
