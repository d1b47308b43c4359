//! Relations a masked session may not read at all, whatever the
//! statement: one owned by a role the proxy does not trust, one whose
//! hierarchy a protected column splits, one whose row-level security
//! policy reads a protected column, one with an index that orders or
//! chooses rows by one. The catalog marks them ([`RelationInfo`]); this
//! module refuses them, with a message that says why and what to do.

use super::{
    PolicyReads, ProtectedIndex, QualName, Refusal, RelationInfo, RowSecurity, Rule, Split,
    SplitBy, UntrustedOwner,
};

/// `Ok` when relation `qn` (described by `rel`) may be read at all.
pub(super) fn readable(qn: &QualName, rel: &RelationInfo) -> Result<(), Refusal> {
    if let Some(u) = &rel.untrusted_owner {
        return Err(untrusted_refusal(qn, u));
    }
    if let Some(split) = &rel.split {
        return Err(split_refusal(qn, split));
    }
    if let Some(rs) = &rel.row_security {
        return Err(row_security_refusal(qn, rs));
    }
    if let Some(ix) = &rel.protected_index {
        return Err(index_refusal(qn, ix));
    }
    Ok(())
}

/// The refusal of a relation that a role the proxy does not trust owns,
/// or whose hierarchy has a member such a role owns.
fn untrusted_refusal(qn: &QualName, u: &UntrustedOwner) -> Refusal {
    let which = if &u.relation == qn {
        format!("relation {qn} is owned by role {}", u.owner)
    } else {
        format!(
            "relation {qn} belongs to a hierarchy of partitions or inheritance children, and \
             its member {} is owned by role {}",
            u.relation, u.owner
        )
    };
    Refusal::new(
        Rule::UntrustedOwner,
        format!(
            "{which}, which the proxy does not trust: an owner may change a relation during a \
             session (into a view, with a row-level security policy, a column of a type of its \
             own) so that reading it runs the owner's code with this session's raw reads. Only \
             relations of superusers, of the owners of protected or sanitized relations and of \
             the roles in masking.trusted_owners are read: if role {} is trusted, add it there",
            u.owner
        ),
    )
}

/// The refusal of a relation whose hierarchy a protected column splits.
fn split_refusal(qn: &QualName, split: &Split) -> Refusal {
    let how = match split.by {
        SplitBy::PartitionKey => "partitioned by",
        SplitBy::Check => "split by a CHECK constraint on",
    };
    Refusal::new(
        Rule::ProtectedPartition,
        format!(
            "relation {qn} belongs to a hierarchy of partitions or inheritance children, and {} \
             is {how} protected column {}: which member a row is stored in (its tableoid, its \
             ctid, the order rows are read in, a read or a count of one member) tells what its \
             value is, so no member of the hierarchy may be read in a masked session",
            split.relation, split.column
        ),
    )
}

/// The refusal of a relation whose row-level security policy reads a
/// protected value, or what the proxy cannot follow.
fn row_security_refusal(qn: &QualName, rs: &RowSecurity) -> Refusal {
    let what = match &rs.reads {
        PolicyReads::Column(c) => format!("reads protected column {qn}.{c}"),
        PolicyReads::Subquery => {
            "has a subquery, which may read protected columns of other tables".to_owned()
        }
        PolicyReads::Function(f) => format!(
            "calls function {f}, which may read protected columns (only STABLE and IMMUTABLE \
             pg_catalog functions off the deny-list are followed)"
        ),
        PolicyReads::Construct(c) => format!(
            "has a construct the proxy does not follow ({c}), which may read protected columns"
        ),
    };
    Refusal::new(
        Rule::ProtectedPolicy,
        format!(
            "relation {qn} has a row-level security policy, {}, that {what}: the rows it lets \
             this session see (and their count) would disclose those values, so the relation \
             may not be read in a masked session",
            rs.policy
        ),
    )
}

/// The refusal of a relation with an index (its own, or a partition's or
/// child's) that reads a protected column.
fn index_refusal(qn: &QualName, ix: &ProtectedIndex) -> Refusal {
    let on = if &ix.table == qn {
        String::new()
    } else {
        format!(" (on {}, which a read of it includes)", ix.table)
    };
    Refusal::new(
        Rule::ProtectedIndex,
        format!(
            "relation {qn} has index {}{on}, whose key or predicate reads protected column {}: \
             an index scan, which the server may choose for any read, returns rows in the order \
             of the raw values or only those its predicate passes, so the relation may not be \
             read in a masked session. Drop the index (or make it one that does not read the \
             column), or use database mode",
            ix.index, ix.column
        ),
    )
}
