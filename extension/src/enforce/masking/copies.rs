//! The policy of materialized views and sanitized copies: which of their
//! columns carry a rule from what they were built from, and when a copy
//! may be served to masked sessions as its source's masked values.

use pgrx::pg_sys::Oid;
use pgrx::prelude::*;

use crate::error::refuse;
use crate::pg::lookup::{read_one, read_two};

use super::{
    conclude, family_refusal, oid_arg, reads_protected, relation_policy, rule_fixes_shift,
    ColumnRule, RelationPolicy,
};

/// The source and number of the last build recorded for target `$1`: one
/// row always, NULLs when there is none, or when the names it recorded
/// are not those of the relations with these OIDs now (OIDs are reused,
/// and a dump restored elsewhere keeps the OIDs of the cluster it came
/// from; a copy or source renamed since is not trusted either).
const LAST_BUILD_SQL: &str = "
SELECT l.source_oid, l.build FROM (VALUES (1)) v LEFT JOIN LATERAL (
  SELECT p.source_oid, p.build, p.target_name, p.source_schema, p.source_table
    FROM dptext.provenance p
   WHERE p.target_oid OPERATOR(pg_catalog.=) $1
     AND p.event OPERATOR(pg_catalog.=) ANY ('{create,refresh}'::pg_catalog.text[])
   ORDER BY p.build DESC LIMIT 1) l
  ON EXISTS (
    SELECT 1
      FROM pg_catalog.pg_class t
      JOIN pg_catalog.pg_namespace tn ON tn.oid OPERATOR(pg_catalog.=) t.relnamespace
      JOIN pg_catalog.pg_class s ON s.oid OPERATOR(pg_catalog.=) l.source_oid
      JOIN pg_catalog.pg_namespace sn ON sn.oid OPERATOR(pg_catalog.=) s.relnamespace
     WHERE t.oid OPERATOR(pg_catalog.=) $1
       AND l.target_name OPERATOR(pg_catalog.=) ANY (ARRAY[
             pg_catalog.format('%I.%I', tn.nspname, t.relname),
             pg_catalog.quote_ident(t.relname::pg_catalog.text)])
       AND l.source_schema OPERATOR(pg_catalog.=) sn.nspname
       AND l.source_table OPERATOR(pg_catalog.=) s.relname)";

/// The columns of target `$1` that build `$3` did not sanitize, with the
/// number of the same-named column of its source `$2` (NULL: none).
const UNSANITIZED_SQL: &str = "
SELECT a.attnum, s.attnum
  FROM pg_catalog.pg_attribute a
  LEFT JOIN pg_catalog.pg_attribute s ON s.attrelid OPERATOR(pg_catalog.=) $2
       AND s.attname OPERATOR(pg_catalog.=) a.attname
       AND s.attnum OPERATOR(pg_catalog.>) 0 AND NOT s.attisdropped
 WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
   AND NOT EXISTS (SELECT 1 FROM dptext.provenance p
                    WHERE p.target_oid OPERATOR(pg_catalog.=) $1
                      AND p.build OPERATOR(pg_catalog.=) $3
                      AND p.column_name OPERATOR(pg_catalog.=) a.attname)
 ORDER BY a.attnum";

/// The last build `dptext.create_sanitized_view` (or a refresh) recorded
/// for relation `relid`: its source and build number; `None` when it did
/// not build it (or the extension's catalog is missing).
pub(super) fn last_build(relid: Oid) -> Option<(Oid, i64)> {
    let has_provenance = read_one::<bool>(
        "SELECT pg_catalog.to_regclass('dptext.provenance') IS NOT NULL",
        &[],
    )
    .unwrap_or_else(|e| refuse(format!("could not look for dptext.provenance: {e}")))
    .unwrap_or(false);
    if !has_provenance {
        return None;
    }
    let (source, build) = read_two::<Oid, i64>(LAST_BUILD_SQL, &oid_arg(relid))
        .unwrap_or_else(|e| refuse(format!("could not read dptext.provenance: {e}")));
    source.zip(build)
}

/// A copy `dptext.create_sanitized_view` built: the columns its last build
/// sanitized are served as they are. Every other column is a plain copy of
/// the source's same-named column; one whose source column has been
/// labelled since the build holds raw values, so it is read through the
/// source's rule now, as the source is (or refused when that rule fixes
/// deidentify's date shift per group, which stored rows cannot be served
/// by). A column that matches no source column, renamed on either side
/// since the build, is refused.
pub(super) fn sanitized_policy(
    relid: Oid,
    mut rules: Vec<ColumnRule>,
    build: (Oid, i64),
) -> RelationPolicy {
    let (source, number) = build;
    // The build sanitized each value, but which rows the copy holds and in
    // what order it stored them are the source's: a copy of a source that
    // masked sessions may not read whole (a filtered or sorted view, a
    // partition family placed by a labelled column, a clustered table, a
    // routed inheritance parent, rows chosen by row-level security) hands
    // them on, and joined to the masked source its sanitized values tell
    // which rows matched. Checked at every read: the owner may cluster the
    // source or enable row-level security after the build.
    if let Some(why) = copy_source_refusal(source) {
        return RelationPolicy::Refused(format!(
            "masked sessions cannot read {}: it is a sanitized copy of {}, and {why}, so which rows the copy holds and their order follow raw values; copy the table itself with dptext.create_sanitized_view and filter or sort the copy",
            crate::pg::catalog::relation_name(relid),
            crate::pg::catalog::relation_name(source)
        ));
    }
    let mut taint: Option<String> = None;
    // Its columns match the source's by name, those the build sanitized
    // left out (a materialized view's query cannot be followed through the
    // rules' calls); one that matches no source column (renamed since)
    // cannot be followed, and is refused.
    let args: Vec<pgrx::datum::DatumWithOid<'static>> =
        vec![relid.into(), source.into(), number.into()];
    let rows: Result<Vec<(i16, Option<i16>)>, pgrx::spi::Error> = Spi::connect(|client| {
        let mut out = Vec::new();
        for row in client.select(UNSANITIZED_SQL, None, &args)? {
            if let Some(a) = row.get::<i16>(1)? {
                out.push((a, row.get::<i16>(2)?));
            }
        }
        Ok(out)
    });
    let copies: Vec<(i16, Option<(Oid, i16)>)> = rows
        .unwrap_or_else(|e| refuse(format!("could not read dptext.provenance: {e}")))
        .into_iter()
        .map(|(a, s)| (a, s.map(|s| (source, s))))
        .collect();
    for (attnum, copy) in copies {
        if rules.iter().any(|r| r.attnum == attnum) {
            continue;
        }
        match copy {
            Some((src, src_att)) => {
                if let Some(why) = serve_copy(&mut rules, attnum, src, src_att) {
                    taint.get_or_insert(why);
                }
            }
            None => {
                taint.get_or_insert_with(|| {
                    format!("its column {attnum} matches no column of its source (renamed since the build?)")
                });
            }
        }
    }
    conclude(rules, taint, |why| {
        format!(
            "masked sessions may read only the masked columns of {}: {why}; rebuild it with dptext.create_sanitized_view",
            crate::pg::catalog::relation_name(relid)
        )
    })
}

/// Why a sanitized copy of `source` may not be served: the source's own
/// rows, or their order, follow raw values (see [`sanitized_policy`]).
fn copy_source_refusal(source: Oid) -> Option<String> {
    let policy = relation_policy(source);
    match policy.as_ref() {
        RelationPolicy::Refused(why) | RelationPolicy::Derived { why, .. } => {
            return Some(format!("masked sessions may not read it ({why})"));
        }
        _ => {}
    }
    source_flaw(source).map(|flaw| match flaw {
        SourceFlaw::RowSecurity => {
            "it has row-level security (the policies of whoever built the copy chose its rows)"
                .into()
        }
        SourceFlaw::Placed(why) => format!("masked sessions may not read it ({why})"),
        SourceFlaw::InheritanceParent => {
            "it is a parent of plain inheritance with dptext rules (the copy stored its rows child after child)"
                .into()
        }
    })
}

/// Why the rows a build read from `src` (a materialized view's refresh, a
/// sanitized copy's build), or the order it read them in, may follow raw
/// values: a copy stores its rows in the order it read them.
enum SourceFlaw {
    /// Row-level security filtered the rows, by the policies of whoever
    /// built it (a policy on a labelled column, of this table or, through
    /// a subquery, of another, is a filter on raw values).
    RowSecurity,
    /// The source's own rows were placed by raw values or by an owner's
    /// code ([`family_refusal`], its reason).
    Placed(String),
    /// A parent of plain inheritance with rules: its rows were read child
    /// after child (the order a masked read of the parent shuffles), and
    /// the owner's routing chose each row's child.
    InheritanceParent,
}

/// What [`SourceFlaw`] applies to source `src`, if any.
fn source_flaw(src: Oid) -> Option<SourceFlaw> {
    if crate::pg::catalog::row_security(src) {
        return Some(SourceFlaw::RowSecurity);
    }
    if let Some(why) = family_refusal(src) {
        return Some(SourceFlaw::Placed(why));
    }
    (relation_policy(src).protects()
        && crate::pg::catalog::relkind(src) != pg_sys::RELKIND_PARTITIONED_TABLE
        && crate::pg::catalog::has_inheritance_children(src))
    .then_some(SourceFlaw::InheritanceParent)
}

/// A materialized view stores what its query computed when it was last
/// refreshed, from raw values. Its columns are served as the columns they
/// were computed from: a column with a label of its own by that rule, a
/// plain copy of a labelled column by the source's rule, a column computed
/// only from unlabelled columns as it is. When the query reads a labelled
/// column anywhere else (a filter, an expression) or cannot be followed
/// (see [`crate::enforce::lineage`]), every column without a rule is refused:
/// it may hold what the raw values decided. (A view built by
/// `dptext.create_sanitized_view` applied the rules itself and never comes
/// here: [`sanitized_policy`].)
pub(super) fn matview_policy(relid: Oid, mut rules: Vec<ColumnRule>) -> RelationPolicy {
    let lineage = crate::enforce::lineage::matview_lineage(relid);
    let mut taint = lineage
        .opaque
        .map(|why| format!("its query cannot be followed ({why})"));
    let column =
        |rel: Oid, att: i16| format!("column {att} of {}", crate::pg::catalog::relation_name(rel));
    for &(src, att) in &lineage.arranged_by {
        if reads_protected(&relation_policy(src), &[att]) {
            // Which rows are stored, and in what order, follow raw values:
            // any column read in stored order tells them (sorted names
            // give their ranks; a DISTINCT stores them in hash order), so
            // no column is served, masked or not; count(*) still is.
            return RelationPolicy::Refused(format!(
                "masked sessions cannot read materialized view {}: its rows were sorted, grouped or deduplicated by the labelled {}, so the order they are stored in tells raw values; build it without that clause, or over a sanitized copy of the table (dptext.create_sanitized_view)",
                crate::pg::catalog::relation_name(relid),
                column(src, att)
            ));
        }
    }
    for &(src, att) in &lineage.reads {
        if reads_protected(&relation_policy(src), &[att]) {
            taint.get_or_insert_with(|| {
                format!("its query reads the labelled {}", column(src, att))
            });
        }
    }
    // A rule that fixes the date shift per group (GROUPED BY, or a literal
    // `group`) cannot be served from stored rows: a masked session that
    // refreshed the view stored values already shifted, and shifting them
    // again by the same days shows the shift (the difference with the
    // table's masked read), hence the raw dates; rows an unmasked session
    // stored would need the very grouping value of each row, or their
    // dates would move by a second draw, and enough draws of one date
    // bound it. Such columns are refused, and with them the view's other
    // unlabelled columns (a sanitized view is served as it is).
    let own_fixed = rules.iter().find(|r| rule_fixes_shift(r)).map(|r| r.attnum);
    if let Some(att) = own_fixed {
        rules.retain(|r| !rule_fixes_shift(r));
        taint.get_or_insert_with(|| {
            format!("its column {att} has a rule that fixes deidentify's date shift per group, which stored rows cannot be served by")
        });
    }
    for (i, copy) in lineage.copies.iter().enumerate() {
        let attnum = i16::try_from(i + 1).unwrap_or(i16::MAX);
        let Some((src, att)) = *copy else { continue };
        if rules.iter().any(|r| r.attnum == attnum) || own_fixed == Some(attnum) {
            continue;
        }
        if let Some(why) = serve_copy(&mut rules, attnum, src, att) {
            taint.get_or_insert(why);
        }
    }
    // A source whose rows, or their order, followed raw values passes
    // that on: the view stores the rows in the order it read them.
    let sources = lineage.reads.iter().chain(lineage.copies.iter().flatten());
    for &(src, _) in sources {
        let name = || crate::pg::catalog::relation_name(src);
        let Some(flaw) = source_flaw(src) else {
            continue;
        };
        taint.get_or_insert_with(|| match flaw {
            SourceFlaw::RowSecurity => format!(
                "it reads {}, which has row-level security: the policies of whoever refreshed it chose the rows it stores",
                name()
            ),
            SourceFlaw::Placed(why) => {
                format!("it reads a relation masked sessions cannot read ({why})")
            }
            SourceFlaw::InheritanceParent => format!(
                "it reads {}, a parent of plain inheritance with dptext rules, and stored its rows child after child, which tells the child the owner's routing chose for each",
                name()
            ),
        });
    }
    match taint {
        // Which rows the view stores, in what order, or what they hold
        // followed raw values: every column would tell them, the masked
        // ones by their stored order, and count(*) by how many matched.
        Some(why) => RelationPolicy::Refused(format!(
            "masked sessions cannot read materialized view {}: {why}, so which rows it stores, their order or their values may follow raw values; build it over a sanitized copy of the table (dptext.create_sanitized_view) instead",
            crate::pg::catalog::relation_name(relid)
        )),
        None => conclude(rules, None, |why| why),
    }
}

/// Serves column `attnum` of a stored copy, a plain copy of column `att`
/// of `src`, as the source is read: through its rule, pushed on `rules`.
/// Returns why the copy's unlabelled columns must be refused instead,
/// when the source column may not be served from stored rows (its rule
/// fixes deidentify's date shift per group) or may not be read at all.
fn serve_copy(rules: &mut Vec<ColumnRule>, attnum: i16, src: Oid, att: i16) -> Option<String> {
    let column = || format!("column {att} of {}", crate::pg::catalog::relation_name(src));
    let p = relation_policy(src);
    if let Some(r) = p.rule(att) {
        if rule_fixes_shift(r) {
            return Some(format!(
                "it copies {}, whose rule fixes deidentify's date shift per group, which stored rows cannot be served by",
                column()
            ));
        }
        rules.push(ColumnRule {
            attnum,
            mechanism: r.mechanism.clone(),
            params: r.params.clone(),
            group: None,
        });
        None
    } else {
        p.refuses_column(att)
            .map(|_| format!("it copies {}, which masked sessions may not read", column()))
    }
}
