//! Masking rules declared in SQL, and the functions sanitized views use.
//!
//! ```sql
//! SECURITY LABEL FOR dptext ON COLUMN records.note IS 'MASKED WITH santext(eps => 3)';
//! SECURITY LABEL FOR dptext ON ROLE analyst IS 'MASKED';
//! SELECT * FROM dptext.rules;
//! SELECT dptext.create_sanitized_view('records', 'records_safe');
//! SELECT * FROM dptext.budget;
//! ```
//!
//! The label provider `dptext` checks every label when it is set
//! ([`check_label`]): a bad mechanism or parameter is an error then, not
//! at query time. The catalog objects (`dptext.rules`,
//! `dptext.masked_roles`, `dptext.provenance`, `dptext.budget`,
//! `dptext.create_sanitized_view`) are SQL, in `sql/catalog.sql`.

use pgrx::pg_sys::Oid;
use pgrx::prelude::*;

use crate::error::{raise, ExtError, OrRaise};

/// What a security label was put on, as far as the rules care.
pub(crate) enum LabelTarget {
    /// A column of a relation.
    Column {
        /// The relation.
        relid: Oid,
        /// The column's number.
        attnum: i16,
        /// The relation's kind (`pg_class.relkind`).
        relkind: u8,
        /// The column's type.
        type_oid: Oid,
    },
    /// A role.
    Role,
    /// A relation as a whole.
    Relation,
    /// Anything else (schemas, functions, ...).
    Other,
}

/// Column types a rule can apply to: the text types whose values are
/// passed to the mechanism as text and cast back.
const TEXT_TYPES: [Oid; 3] = [pg_sys::TEXTOID, pg_sys::VARCHAROID, pg_sys::BPCHAROID];

/// Relation kinds whose columns hold data a rule can be enforced on. Not
/// views: PostgreSQL replaces a view by its query before planning, so a
/// label on a view's column would never be seen by the rewrite; label the
/// columns of the tables the view reads, and the view's reads of them are
/// masked.
const RELKINDS: [u8; 4] = [
    pg_sys::RELKIND_RELATION,
    pg_sys::RELKIND_PARTITIONED_TABLE,
    pg_sys::RELKIND_MATVIEW,
    pg_sys::RELKIND_FOREIGN_TABLE,
];

/// The SQL name of a type (`integer`, `timestamp with time zone`), or its
/// oid when the catalog cannot say.
fn type_name(oid: Oid) -> String {
    Spi::get_one_with_args::<String>("SELECT format_type($1, NULL)", &[oid.into()])
        .ok()
        .flatten()
        .map_or_else(
            || format!("type oid {}", oid.to_u32()),
            |n| format!("type {n}"),
        )
}

/// Whether the current role is a superuser or has the privileges of a
/// role named in `$1` (`dptext.label_admins`, comma-separated).
const LABEL_ADMIN_SQL: &str = "
SELECT r.rolsuper OR EXISTS (
         SELECT 1 FROM pg_catalog.unnest(pg_catalog.string_to_array($1, ',')) AS n(name)
           JOIN pg_catalog.pg_roles a ON a.rolname OPERATOR(pg_catalog.=) pg_catalog.btrim(n.name)
          WHERE pg_catalog.pg_has_role(r.oid, a.oid, 'USAGE'))
  FROM pg_catalog.pg_roles r
 WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER";

/// Refuses a label change by a role that is neither a superuser nor a
/// member of a role in `dptext.label_admins`. Owning a table is not
/// enough: outputs under one key are the same for the same value and rule
/// wherever they are read, so a role that labelled a table of guessed
/// values with a protected column's rule could let a masked session
/// compare the masked texts (an equality oracle for the raw values); and a
/// role that may create roles could remove an analyst's `MASKED`.
fn require_label_admin(what: &str) {
    let admins = crate::guc::label_admins();
    let allowed = Spi::get_one_with_args::<bool>(LABEL_ADMIN_SQL, &[admins.as_str().into()])
        .ok()
        .flatten()
        .unwrap_or(false);
    if !allowed {
        raise(
            ExtError::Masked(format!(
                "only superusers and members of the roles in dptext.label_admins may {what} dptext labels (dptext.label_admins is {})",
                if admins.is_empty() { "empty".to_string() } else { format!("'{admins}'") }
            )),
            "SECURITY LABEL FOR dptext",
        );
    }
}

/// The label provider's check: raises an ERROR for a label that is not a
/// valid rule for its object, or set or removed by a role that may not
/// change dptext labels. `None` removes the label.
pub(crate) fn check_label(target: LabelTarget, label: Option<&str>) {
    const F: &str = "SECURITY LABEL FOR dptext";
    require_label_admin(if label.is_some() { "set" } else { "remove" });
    let Some(label) = label else { return };
    match target {
        LabelTarget::Role => dptext_core::rules::check_role_label(label).or_raise(F),
        LabelTarget::Column {
            relid,
            attnum,
            relkind,
            type_oid,
        } => {
            if relkind == pg_sys::RELKIND_VIEW {
                raise(
                    ExtError::Unsupported(
                        "dptext rules do not apply to columns of views (a view is replaced by its query before masking sees it): label the columns of the tables the view reads, and reads through the view are masked".into(),
                    ),
                    F,
                );
            }
            if !RELKINDS.contains(&relkind) {
                raise(
                    ExtError::Unsupported(
                        "dptext rules apply to columns of tables, materialized views and foreign tables".into(),
                    ),
                    F,
                );
            }
            if dptext_core::rules::is_allow_label(label) {
                // Declared safe to read raw (any type): nothing to parse.
                return;
            }
            if !TEXT_TYPES.contains(&type_oid) {
                raise(
                    ExtError::Unsupported(format!(
                        "dptext rules apply to text, varchar and char columns, not to {}",
                        type_name(type_oid)
                    )),
                    F,
                );
            }
            let rule = dptext_core::rules::parse_column_label(label).or_raise(F);
            if let Some(group) = &rule.group_column {
                match crate::pg::catalog::attnum(relid, group) {
                    Some(g) if g == attnum => raise(
                        ExtError::Unsupported(format!(
                            "GROUPED BY {group} names the labelled column itself: name the column that identifies the group (a patient id)"
                        )),
                        F,
                    ),
                    Some(_) if relkind == pg_sys::RELKIND_MATVIEW => raise(
                        ExtError::Unsupported(
                            "GROUPED BY on a materialized view: its stored rows may be shifted already; build it with dptext.create_sanitized_view".into()
                        ),
                        F,
                    ),
                    Some(g) if !group_type_supported(
                        crate::pg::catalog::attribute_type(relid, g).0,
                    ) => raise(
                        ExtError::Unsupported(format!(
                            "GROUPED BY {group}: its type's text depends on session settings (dates, times, floats...); group by a text, integer, numeric or uuid column"
                        )),
                        F,
                    ),
                    Some(_) => {}
                    None => raise(
                        ExtError::Unsupported(format!(
                            "GROUPED BY {group}: {} has no such column",
                            crate::pg::catalog::relation_name(relid)
                        )),
                        F,
                    ),
                }
            }
        }
        LabelTarget::Relation => raise(
            ExtError::Unsupported("label a column (ON COLUMN t.c), not the whole relation".into()),
            F,
        ),
        LabelTarget::Other => raise(
            ExtError::Unsupported("dptext labels apply to columns and roles only".into()),
            F,
        ),
    }
}

/// The SQL-callable side of rules, in schema `dptext`.
#[pg_schema]
pub mod dptext {
    use pgrx::prelude::*;
    use pgrx::JsonB;

    use crate::error::OrRaise;
    use crate::pg::interrupts::{Params, Utf8Text};

    /// Parses and validates a column rule, returning its mechanism, every
    /// parameter (defaults filled in), its per-token guarantee, the label
    /// spelled out in full and, for `GROUPED BY`, its `group_column`.
    /// `dptext.rules` is built on it.
    ///
    /// ```sql
    /// SELECT dptext.parse_rule('MASKED WITH santext_plus(eps => 3)');
    /// -- {"label": "MASKED WITH santext_plus(eps => 3.0, p => 0.3, w => 0.9, embedding => 'glove')",
    /// --  "params": {"p": 0.3, "w": 0.9, "eps": 3.0, "embedding": "glove"},
    /// --  "guarantee": {"eps": 3.0, "eps0": 1.2039728043259361, "kind": "umldp"}, "mechanism": "santext_plus"}
    /// ```
    #[pg_extern(immutable, parallel_safe)]
    fn parse_rule(label: &str) -> JsonB {
        const F: &str = "dptext.parse_rule";
        let rule = dptext_core::rules::parse_column_label(label).or_raise(F);
        let guarantee = rule.spec.stated_guarantee().or_raise(F);
        let mut out = serde_json::json!({
            "mechanism": rule.mechanism(),
            "params": rule.params(),
            "guarantee": guarantee,
            "label": rule.to_label(),
        });
        // Only when the rule has one, so that other rules read as before.
        if let Some(g) = &rule.group_column {
            out["group_column"] = g.clone().into();
        }
        JsonB(out)
    }

    /// Applies one rule to one value: what sanitized views call for every
    /// labelled column. Same randomness as the mechanism's own function.
    ///
    /// ```sql
    /// SELECT dptext.apply_rule('Seen by Dr. Smith', 'santext', '{"eps": 3}');
    /// ```
    #[pg_extern(volatile, parallel_safe)]
    fn apply_rule(t: Utf8Text, mechanism: &str, params: Params) -> String {
        const F: &str = "dptext.apply_rule";
        let spec = dptext_core::mechanisms::MechanismSpec::parse(mechanism, &params.0.or_raise(F))
            .or_raise(F);
        crate::backend::run_rule(spec, None, t.0, F)
    }

    /// [`apply_rule`] for a rule written `GROUPED BY column`: `grp` is that
    /// column's value in the row (NULL: no group), the date shift's
    /// grouping value in every entity replacement stage.
    ///
    /// ```sql
    /// SELECT dptext.apply_rule(note, 'deidentify', '{"operators": "DATE:shift"}', patient_id::text) FROM notes;
    /// ```
    #[pg_extern(name = "apply_rule", volatile, parallel_safe)]
    fn apply_rule_grouped(
        t: Option<Utf8Text>,
        mechanism: &str,
        params: Params,
        grp: Option<&str>,
    ) -> Option<String> {
        const F: &str = "dptext.apply_rule";
        let t = t?;
        let spec = dptext_core::mechanisms::MechanismSpec::parse(mechanism, &params.0.or_raise(F))
            .or_raise(F);
        Some(crate::backend::run_rule(spec, grp, t.0, F))
    }

    /// The random mode in force: `{"mode": "os"}`, `{"mode": "seeded",
    /// "seed": 7}` or `{"mode": "keyed", "key_id": "3f2a..."}` (a short
    /// hash of the key, never the key). Provenance records it.
    ///
    /// ```sql
    /// SELECT dptext.randomness();
    /// ```
    #[pg_extern(stable, parallel_safe)]
    fn randomness() -> JsonB {
        JsonB(crate::backend::randomness_json(
            &crate::guc::random_mode().or_raise("dptext.randomness"),
        ))
    }

    /// The installed assets (package and version of each), as recorded by
    /// `dptext assets fetch`; `{}` when none are installed.
    ///
    /// ```sql
    /// SELECT dptext.asset_versions();
    /// ```
    #[pg_extern(stable, parallel_safe)]
    fn asset_versions() -> JsonB {
        let dir = crate::engine::engine().config().assets_dir.clone();
        let packages = dptext_core::assets::Installed::read(&dir)
            .map(|i| {
                i.packages
                    .into_iter()
                    .map(|(id, p)| {
                        (
                            id,
                            serde_json::json!({"package": p.package, "version": p.version}),
                        )
                    })
                    .collect::<serde_json::Map<_, _>>()
            })
            .unwrap_or_default();
        JsonB(serde_json::Value::Object(packages))
    }
}

/// True when a `GROUPED BY` column of type `typ` (a domain: its base type)
/// is rendered as text the same way in every session: text types, integers,
/// `numeric`, `uuid`, `oid`. Others depend on settings a session may change
/// (dates and times on `DateStyle`, `TimeZone` and `IntervalStyle`, floats
/// on `extra_float_digits`, `money` on `lc_monetary`, `bytea` on
/// `bytea_output`) or on code outside PostgreSQL (extension types), so one
/// row could be read under many grouping values, each a new date shift of
/// the same dates; enough shifts of one date bound it.
pub(crate) fn group_type_supported(typ: pgrx::pg_sys::Oid) -> bool {
    use pgrx::pg_sys;
    let base = crate::pg::catalog::base_type(typ);
    [
        pg_sys::TEXTOID,
        pg_sys::VARCHAROID,
        pg_sys::BPCHAROID,
        pg_sys::INT2OID,
        pg_sys::INT4OID,
        pg_sys::INT8OID,
        pg_sys::NUMERICOID,
        pg_sys::UUIDOID,
        pg_sys::OIDOID,
    ]
    .contains(&base)
}
