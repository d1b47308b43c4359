//! Calls of `dptext.mask` already in a query: which copy a column the
//! rewrite masks with the same rule (planned again, or sent by a Citus
//! coordinator), so that the rule is not applied twice.

use pgrx::pg_sys::{self, Node, NodeTag, Oid, Query};
use pgrx::{is_a, PgList};

use super::{rt_fetch, strip_relabels, text_value, Rewrite};

/// True when `funcid` is `dptext.mask`, by name (no lookup that could
/// fail: the extension may not be installed in this database).
pub(super) unsafe fn is_mask_function(funcid: Oid) -> bool {
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

impl Rewrite<'_> {
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
    pub(super) unsafe fn redundant_mask_call(&self, call: *mut Node) -> Option<*mut Node> {
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
}
