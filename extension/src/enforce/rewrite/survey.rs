//! Pass one of the rewrite: every relation a query reads or writes, with
//! the role each is checked as, and the policies that decide which need
//! pass two.

use std::collections::HashMap;
use std::ffi::c_void;
use std::rc::Rc;

use pgrx::pg_sys::{self, Node, NodeTag, Oid, Query};
use pgrx::{is_a, PgList};

use crate::enforce::masking::{self, RelationPolicy};
use crate::pg::version;

use super::mask_calls::is_mask_function;
use super::{check_as_user, rt_fetch, Walker, REWRITE, STATISTIC_EXT_DATA};

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

    /// Refuses a masked read of the transaction columns (`xmin`, `xmax`,
    /// `cmin`, `cmax`) of any relation outside the system catalogs, with
    /// rules or without: a row lock, an `UPDATE` or a `DELETE` leaves its
    /// transaction's ID in the row's `xmax` (after a `ROLLBACK` too, until
    /// the row is next written or frozen), and `xmin` names the
    /// transaction that wrote it, so an owner's statement that chose rows
    /// of an unlabelled table by a labelled column of another
    /// (`... JOIN patients p ... WHERE p.name LIKE 'A%' FOR UPDATE OF a`)
    /// would show which rows it chose. (Labelled relations refuse them in
    /// pass two, with `ctid`.)
    pub(crate) fn refuse_transaction_columns(&self, session_masked: bool) {
        const TRANSACTION_COLUMNS: [i32; 4] = [
            pg_sys::MinTransactionIdAttributeNumber,
            pg_sys::MinCommandIdAttributeNumber,
            pg_sys::MaxTransactionIdAttributeNumber,
            pg_sys::MaxCommandIdAttributeNumber,
        ];
        for (relid, as_user, cols) in &self.read_columns {
            if relid.to_u32() >= pg_sys::FirstNormalObjectId
                && Self::masked_as(session_masked, *as_user)
                && cols
                    .iter()
                    .any(|&a| TRANSACTION_COLUMNS.contains(&i32::from(a)))
            {
                crate::error::refuse(format!(
                    "masked sessions cannot read the transaction columns (xmin, xmax, cmin, cmax) of {}: which rows an owner's statement wrote or locked can follow raw values of a labelled column",
                    crate::pg::catalog::relation_name(*relid)
                ));
            }
        }
    }

    /// True when a read checked as `as_user` is masked.
    pub(super) fn masked_as(session_masked: bool, as_user: Oid) -> bool {
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
