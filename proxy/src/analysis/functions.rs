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

use pg_query::protobuf::{a_const, FuncCall, TypeName};
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

impl Walker<'_> {
    /// `current_setting('default_table_access_method')` (SQLAlchemy's
    /// reflection asks for it), with an optional constant `missing_ok`: a
    /// read of one setting that `SHOW` may read, named by a string
    /// constant or a bound parameter, is the same read as `SHOW` and is
    /// allowed although `current_setting` is on the deny-list (any other
    /// constant, a computed name and the `dptext.*` settings stay refused;
    /// a parameter is guarded in the forwarded text). `Ok(None)` when the
    /// call is not such a read; the caller then checks it as any call.
    pub(super) fn setting_read(&self, f: &FuncCall) -> Result<Option<()>, Refusal> {
        let parts = names(&f.funcname).unwrap_or_default();
        let schema = match parts.as_slice() {
            ["current_setting"] => None,
            ["pg_catalog", "current_setting"] => Some("pg_catalog"),
            _ => return Ok(None),
        };
        if f.agg_star
            || f.agg_distinct
            || f.func_variadic
            || f.over.is_some()
            || f.agg_filter.is_some()
            || !f.agg_order.is_empty()
        {
            return Ok(None);
        }
        let string = |n: &Node| match &n.node {
            Some(NodeEnum::AConst(c)) => match &c.val {
                Some(a_const::Val::Sval(s)) => Some(s.sval.to_ascii_lowercase()),
                _ => None,
            },
            _ => None,
        };
        let boolean = |n: &Node| matches!(&n.node, Some(NodeEnum::AConst(c)) if matches!(c.val, Some(a_const::Val::Boolval(_))));
        // `$1::VARCHAR` (how SQLAlchemy binds it) or `'name'::text`: one
        // cast, to a type the analysis allows, around the name.
        let uncast = |n: &Node| -> Result<Node, Refusal> {
            match &n.node {
                Some(NodeEnum::TypeCast(c)) => {
                    if let Some(t) = &c.type_name {
                        self.check_type(t)?;
                    }
                    Ok(c.arg.as_deref().cloned().unwrap_or_default())
                }
                _ => Ok(n.clone()),
            }
        };
        let args: Vec<Node> = match f.args.as_slice() {
            [a] => vec![uncast(a)?],
            [a, b] => vec![uncast(a)?, b.clone()],
            _ => return Ok(None),
        };
        let param = |n: &Node| matches!(&n.node, Some(NodeEnum::ParamRef(_)));
        let name = match args.as_slice() {
            [a] | [a, _] if param(a) => None,
            [a] => Some(string(a)),
            [a, b] if boolean(b) => Some(string(a)),
            _ => return Ok(None),
        };
        match name {
            // A bound parameter (SQLAlchemy binds the name): the forwarded
            // text guards it, `current_setting(CASE WHEN lower($1) =
            // ANY(<shown settings>) THEN $1 END)`, so the server reads
            // NULL for any other name (`qualify::setting_guard`).
            None => {
                if f.args.get(1).is_some_and(|b| !boolean(b)) {
                    return Ok(None);
                }
            }
            Some(None) => return Ok(None),
            Some(Some(setting)) => {
                if setting.starts_with("dptext.")
                    || !self.ctx.policy.shown_settings.contains(&setting)
                {
                    return Ok(None);
                }
            }
        }
        // Overload resolution must pick pg_catalog's.
        let schemas = self.lookup_schemas(schema);
        let shown = parts.join(".");
        for c in self.ctx.catalog.functions("current_setting") {
            if schemas.contains(&c.schema) && c.schema != "pg_catalog" {
                return Err(function_refused(
                    &shown,
                    &format!(
                        "schema {} on the search path defines a function of that name",
                        c.schema
                    ),
                ));
            }
        }
        Ok(Some(()))
    }
}

impl Walker<'_> {
    /// `(x).name`: PostgreSQL reads it as the field `name` of a composite
    /// `x`, or else as the call `name(x)` (attribute notation), which no
    /// check of calls would see and which cannot be qualified. Refused when
    /// `name` is a function the catalog knows, and unless `x` is a call
    /// (checked itself) whose composite result has the field: a field of
    /// anything else cannot be told from a function created since the
    /// catalog was read.
    pub(super) fn field_selection(&self, name: &str, of_a_call: bool) -> Result<(), Refusal> {
        if !self.ctx.catalog.functions(name).is_empty() {
            return Err(function_refused(
                name,
                &format!("attribute notation (x).{name} calls function {name}(x): write the call as {name}(x)"),
            ));
        }
        if !of_a_call {
            return Err(function_refused(
                name,
                &format!("a field selection (x).{name} could call a function {name}(x); select fields of a function's composite result only"),
            ));
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
