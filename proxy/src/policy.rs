//! Which result columns of a masked session are sanitized, and how.
//!
//! - a column of a table with a rule: the rule's mechanism;
//! - a column of a plain table without a rule: unchanged;
//! - anything else that can carry text (an expression such as
//!   `upper(note)`, a view's column, a whole row, a relation created after
//!   the session started): the default mechanism, or the query is refused
//!   (`masking.expressions = "refuse"`); bytea and binary values whose
//!   structure cannot be kept are always refused.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::pool::{Action, Mechanisms, RowPlan};
use crate::values::{kind, Kind};
use crate::wire::Column;

/// The masking policy of one session.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Mechanisms; index 0 is the default one.
    pub mechanisms: Arc<Mechanisms>,
    /// (table OID, attribute number) -> index into `specs`.
    pub rules: HashMap<(u32, i16), usize>,
    /// OIDs of plain tables (relkind r, p, f; outside the system catalogs
    /// unless `masking.catalog = "pass"`) when the session started.
    pub tables: HashSet<u32>,
    /// Refuse text expressions instead of sanitizing them.
    pub refuse_expressions: bool,
}

impl Policy {
    /// The plan for a result's columns, or why the result is refused.
    pub fn plan(&self, cols: &[Column]) -> Result<RowPlan, String> {
        let mut actions = Vec::with_capacity(cols.len());
        for c in cols {
            let k = kind(c.type_oid);
            let texty = matches!(k, Kind::Text | Kind::Json | Kind::Jsonb | Kind::Array(_));
            let sanitize = |spec, rule| Action::Sanitize {
                spec,
                type_oid: c.type_oid,
                format: c.format,
                rule,
            };
            let from_table = c.table_oid != 0 && c.attnum > 0;
            let action = if let Some(&spec) = self
                .rules
                .get(&(c.table_oid, c.attnum))
                .filter(|_| from_table)
            {
                if !(texty || (k == Kind::Other && c.format == 0)) {
                    return Err(format!(
                        "column \"{}\" has a rule but its type (oid {}) cannot be sanitized",
                        c.name, c.type_oid
                    ));
                }
                sanitize(spec, Some((c.table_oid, c.attnum)))
            } else if from_table && self.tables.contains(&c.table_oid) {
                Action::Pass
            } else {
                match k {
                    Kind::Safe => Action::Pass,
                    Kind::Bytes => {
                        return Err(format!(
                            "column \"{}\" is bytea computed in the query; masked sessions cannot sanitize raw bytes",
                            c.name
                        ))
                    }
                    Kind::Other if c.format != 0 => {
                        return Err(format!(
                            "column \"{}\" (type oid {}) is requested in binary format, which cannot be sanitized; ask for text format",
                            c.name, c.type_oid
                        ))
                    }
                    _ if self.refuse_expressions => {
                        return Err(format!(
                            "column \"{}\" carries text computed in the query (not a table column); masked sessions refuse those (masking.expressions = \"refuse\")",
                            c.name
                        ))
                    }
                    _ => sanitize(0, None),
                }
            };
            actions.push(action);
        }
        Ok(RowPlan {
            actions,
            mechanisms: self.mechanisms.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(table_oid: u32, attnum: i16, type_oid: u32) -> Column {
        Column {
            name: "c".into(),
            table_oid,
            attnum,
            type_oid,
            format: 0,
        }
    }

    fn policy(refuse: bool) -> Policy {
        let spec = dptext_core::mechanisms::MechanismSpec::parse(
            "santext",
            &serde_json::json!({"eps": 3}),
        )
        .unwrap();
        Policy {
            mechanisms: Arc::new(Mechanisms::new(vec![spec.clone(), spec], HashSet::new())),
            rules: HashMap::from([((100, 3), 1)]),
            tables: HashSet::from([100]),
            refuse_expressions: refuse,
        }
    }

    #[test]
    fn rules_tables_and_expressions() {
        let p = policy(false);
        let plan = p
            .plan(&[
                col(100, 3, 25),
                col(100, 2, 25),
                col(0, 0, 25),
                col(0, 0, 23),
                col(200, 1, 1043),
                col(0, 0, 2249),
            ])
            .unwrap();
        let specs: Vec<Option<usize>> = plan
            .actions
            .iter()
            .map(|a| match a {
                Action::Pass => None,
                Action::Sanitize { spec, .. } => Some(*spec),
            })
            .collect();
        assert_eq!(specs, vec![Some(1), None, Some(0), None, Some(0), Some(0)]);
        assert!(p.plan(&[col(0, 0, 17)]).unwrap_err().contains("bytea"));
        // A rule on a column whose type cannot be sanitized refuses the result.
        assert!(p
            .plan(&[col(100, 3, 17)])
            .unwrap_err()
            .contains("has a rule"));
        // Rule columns are keyed by their column; expressions are not.
        match &p.plan(&[col(100, 3, 25), col(0, 0, 25)]).unwrap().actions[..] {
            [Action::Sanitize {
                rule: Some((100, 3)),
                ..
            }, Action::Sanitize { rule: None, .. }] => {}
            other => panic!("{other:?}"),
        }
        let strict = policy(true);
        assert!(strict
            .plan(&[col(0, 0, 25)])
            .unwrap_err()
            .contains("refuse"));
        assert!(strict.plan(&[col(100, 3, 25), col(0, 0, 20)]).is_ok());
    }
}
