//! Functions, operators and types. A call may run only `pg_catalog` code
//! that cannot read table data or change anything: every overload the
//! name can resolve to (in `pg_catalog` and, for an unqualified name, in
//! the schemas of the search path) must live in `pg_catalog`, be
//! IMMUTABLE (or STABLE and on the policy's STABLE allow-list, or a
//! catalog function of the policy's list, whatever its volatility), and
//! not be on the deny-list. A catalog function's arguments must be values
//! of the catalog (the walkers check that: `expr::catalog_arguments`). A
//! user-defined overload anywhere on the path refuses the name: overload
//! resolution could pick it. Types must be `pg_catalog` types, since a
//! cast or a literal of a type runs its input function.

use pg_query::protobuf::TypeName;
use pg_query::{Node, NodeEnum};

use super::catalog::{FunctionKind, Volatility};
use super::nodes::names;
use super::query::Walker;
use super::{Refusal, Rule};

/// What the analyzer needs to know about an allowed function.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct FunctionUse {
    /// Some overload is an aggregate.
    pub aggregate: bool,
    /// Some overload is a window function.
    pub window: bool,
    /// It is a catalog function: its arguments must be values of the
    /// catalog.
    pub catalog: bool,
}

impl Walker<'_> {
    /// The schemas an unqualified (`None`) or qualified name is looked up
    /// in; a qualified name must be in `pg_catalog`.
    fn lookup_schemas(&self, schema: Option<&str>) -> Vec<String> {
        match schema {
            Some(s) => vec![s.to_owned()],
            None => self.path.clone(),
        }
    }

    /// Checks a function call by name.
    pub(super) fn check_function(&self, funcname: &[Node]) -> Result<FunctionUse, Refusal> {
        let parts = names(funcname).unwrap_or_default();
        let (schema, name) = match parts.as_slice() {
            [n] => (None, *n),
            [s, n] => (Some(*s), *n),
            _ => {
                return Err(function_refused(
                    &parts.join("."),
                    "its name is not understood",
                ))
            }
        };
        let shown = parts.join(".");
        if let Some(s) = schema {
            if s != "pg_catalog" {
                return Err(function_refused(
                    &shown,
                    "only pg_catalog functions may be called",
                ));
            }
        }
        let policy = self.ctx.policy;
        if policy.denied_functions.contains(name) {
            return Err(function_refused(&shown, "it is on the deny-list"));
        }
        let schemas = self.lookup_schemas(schema);
        let candidates: Vec<_> = self
            .ctx
            .catalog
            .functions(name)
            .into_iter()
            .filter(|f| schemas.contains(&f.schema))
            .collect();
        if candidates.is_empty() {
            return Err(function_refused(&shown, "the proxy does not know it"));
        }
        let mut used = FunctionUse {
            catalog: policy.catalog_functions.contains(name),
            ..FunctionUse::default()
        };
        for f in &candidates {
            if f.schema != "pg_catalog" {
                return Err(function_refused(
                    &shown,
                    &format!(
                        "schema {} on the search path defines a function of that name",
                        f.schema
                    ),
                ));
            }
            // A catalog function reads definitions only, whatever its
            // volatility says (pg_partition_ancestors is VOLATILE by
            // default, not by what it does).
            let volatility_ok = used.catalog
                || match f.volatility {
                    Volatility::Immutable => true,
                    Volatility::Stable => policy.stable_functions.contains(name),
                    Volatility::Volatile => false,
                };
            if !volatility_ok {
                return Err(function_refused(
                    &shown,
                    "only IMMUTABLE functions (and a few listed STABLE and catalog ones) may be \
                     called",
                ));
            }
            match f.kind {
                FunctionKind::Aggregate => used.aggregate = true,
                FunctionKind::Window => used.window = true,
                FunctionKind::Function => {}
                FunctionKind::Procedure => {
                    return Err(function_refused(&shown, "it is a procedure"));
                }
            }
        }
        Ok(used)
    }

    /// Checks an operator by its name list (`=`, or `pg_catalog.=` from
    /// `OPERATOR(pg_catalog.=)`).
    pub(super) fn check_operator(&self, opname: &[Node]) -> Result<(), Refusal> {
        let parts = names(opname).unwrap_or_default();
        match parts.as_slice() {
            [op] => self.check_operator_symbol(None, op),
            [s, op] => self.check_operator_symbol(Some(s), op),
            _ => Err(operator_refused(
                &parts.join("."),
                "its name is not understood",
            )),
        }
    }

    /// Checks operator `symbol`, optionally schema-qualified.
    pub(super) fn check_operator_symbol(
        &self,
        schema: Option<&str>,
        symbol: &str,
    ) -> Result<(), Refusal> {
        let shown = match schema {
            Some(s) => format!("{s}.{symbol}"),
            None => symbol.to_owned(),
        };
        if let Some(s) = schema {
            if s != "pg_catalog" {
                return Err(operator_refused(
                    &shown,
                    "only pg_catalog operators may be used",
                ));
            }
        }
        let policy = self.ctx.policy;
        let schemas = self.lookup_schemas(schema);
        let candidates: Vec<_> = self
            .ctx
            .catalog
            .operators(symbol)
            .into_iter()
            .filter(|o| schemas.contains(&o.schema))
            .collect();
        if candidates.is_empty() {
            return Err(operator_refused(&shown, "the proxy does not know it"));
        }
        for o in &candidates {
            if o.schema != "pg_catalog" || o.function.schema != "pg_catalog" {
                return Err(operator_refused(
                    &shown,
                    &format!(
                        "schema {} on the search path defines an operator of that name",
                        o.schema
                    ),
                ));
            }
            let name = o.function.name.as_str();
            let ok = !policy.denied_functions.contains(name)
                && match o.volatility {
                    Volatility::Immutable => true,
                    Volatility::Stable => policy.stable_functions.contains(name),
                    Volatility::Volatile => false,
                };
            if !ok {
                return Err(operator_refused(
                    &shown,
                    &format!("it may run function {name}, which is not allowed"),
                ));
            }
        }
        Ok(())
    }

    /// Checks a type name (casts, `PREPARE` argument types).
    pub(super) fn check_type(&self, t: &TypeName) -> Result<(), Refusal> {
        let parts = names(&t.names).unwrap_or_default();
        let shown = parts.join(".");
        if t.pct_type || t.setof {
            return Err(type_refused(&shown, "%TYPE and SETOF are not allowed"));
        }
        let (schema, name) = match parts.as_slice() {
            [n] => (None, *n),
            [s, n] => (Some(*s), *n),
            _ => return Err(type_refused(&shown, "its name is not understood")),
        };
        let schemas = self.lookup_schemas(schema);
        let holders: Vec<String> = self
            .ctx
            .catalog
            .type_schemas(name)
            .into_iter()
            .filter(|s| schemas.contains(s))
            .collect();
        if holders.is_empty() {
            return Err(type_refused(&shown, "the proxy does not know it"));
        }
        if let Some(s) = holders.iter().find(|s| *s != "pg_catalog") {
            return Err(type_refused(
                &shown,
                &format!("only pg_catalog types may be used, and schema {s} defines one"),
            ));
        }
        for m in &t.typmods {
            match &m.node {
                Some(NodeEnum::AConst(_)) => {}
                _ => return Err(type_refused(&shown, "its modifiers must be constants")),
            }
        }
        Ok(())
    }
}

fn function_refused(name: &str, why: &str) -> Refusal {
    Refusal::new(
        Rule::FunctionNotAllowed,
        format!("function {name} is not allowed: {why}"),
    )
}

fn operator_refused(name: &str, why: &str) -> Refusal {
    Refusal::new(
        Rule::OperatorNotAllowed,
        format!("operator {name} is not allowed: {why}"),
    )
}

fn type_refused(name: &str, why: &str) -> Refusal {
    Refusal::new(
        Rule::TypeNotAllowed,
        format!("type {name} is not allowed: {why}"),
    )
}
