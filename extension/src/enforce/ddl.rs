//! Which utility statements of a masked session would leave code behind
//! for other sessions to run.
//!
//! Code runs as the role that runs it, not as the role that wrote it: a
//! trigger, rule or policy fires in the session that touches the table, a
//! view's expressions (functions such as `query_to_xml`, which run SQL of
//! their own) are evaluated by its reader, a column default or a generated
//! column by whoever inserts, a check constraint, an index expression or
//! predicate, a partition key expression by whoever writes the table. An
//! unmasked session running such code reads labelled columns raw, and the
//! code can hand what it read back to the masked role (a notification, a
//! row in a table the masked role can read). So a masked session may
//! leave expressions only on its own temporary objects, which no other
//! session can use.
//!
//! The shapes allowed on other relations are the ones that carry no
//! expression: plain columns, `NOT NULL`, `PRIMARY KEY`, `UNIQUE` and
//! foreign keys on plain columns, identity columns (and `serial`), a
//! literal default, indexes and statistics on plain columns, `CREATE TABLE
//! AS`, and every `ALTER TABLE` form that stores no expression. Any other
//! form, and any `ALTER TABLE` subcommand not listed, is refused: the
//! check fails closed on forms it does not know.

use std::ffi::CStr;

use pgrx::pg_sys::{self, Node, NodeTag, Oid};
use pgrx::{is_a, PgList};

/// What kind of code `stmt` would leave behind for other sessions to run,
/// if it would: functions outside `pg_temp`; triggers, rules and policies
/// on relations other than this session's temporary ones; views and
/// materialized views; expressions stored in a relation that is not
/// temporary (defaults, generated columns, check and exclusion
/// constraints, expression and partial indexes, expression statistics,
/// expression partition keys, `LIKE ... INCLUDING` what carries them);
/// domains, casts, operators, aggregates, types with functions,
/// conversions, transforms, operator classes, languages, event triggers,
/// access methods, foreign-data wrappers, publications.
///
/// # Safety
/// `stmt` is a valid utility statement of the utility hook, which may be
/// modified: a relation name it checks is pinned to the relation found.
pub unsafe fn leaves_code(stmt: *mut Node) -> Option<&'static str> {
    // SAFETY: casts follow tag checks; every pointer read is a field of a
    // valid parse node.
    unsafe {
        let on_table = |rv: *mut pg_sys::RangeVar, what| (!existing_temporary(rv)).then_some(what);
        let tag = (*stmt).type_;
        match tag {
            NodeTag::T_CreateFunctionStmt => {
                let name = PgList::<pg_sys::String>::from_pg(
                    (*stmt.cast::<pg_sys::CreateFunctionStmt>()).funcname,
                );
                let temporary = name.len() > 1
                    && name
                        .get_ptr(0)
                        .is_some_and(|s| CStr::from_ptr((*s).sval).to_bytes() == b"pg_temp");
                (!temporary).then_some("functions or procedures")
            }
            NodeTag::T_CreateTrigStmt => on_table(
                (*stmt.cast::<pg_sys::CreateTrigStmt>()).relation,
                "triggers",
            ),
            NodeTag::T_RuleStmt => on_table((*stmt.cast::<pg_sys::RuleStmt>()).relation, "rules"),
            NodeTag::T_CreatePolicyStmt => on_table(
                (*stmt.cast::<pg_sys::CreatePolicyStmt>()).table,
                "row-level security policies",
            ),
            NodeTag::T_AlterPolicyStmt => on_table(
                (*stmt.cast::<pg_sys::AlterPolicyStmt>()).table,
                "row-level security policies",
            ),
            NodeTag::T_ViewStmt => (!creates_temporary((*stmt.cast::<pg_sys::ViewStmt>()).view))
                .then_some("views (CREATE TEMP VIEW is allowed)"),
            NodeTag::T_CreateTableAsStmt => {
                let ctas = stmt.cast::<pg_sys::CreateTableAsStmt>();
                ((*ctas).objtype == pg_sys::ObjectType::OBJECT_MATVIEW)
                    .then_some("materialized views")
            }
            NodeTag::T_CreateStmt | NodeTag::T_CreateForeignTableStmt => {
                // CreateForeignTableStmt starts with its CreateStmt.
                let create = stmt.cast::<pg_sys::CreateStmt>();
                (create_stores_code(create) && !creates_temporary((*create).relation))
                    .then_some(STORED)
            }
            NodeTag::T_AlterTableStmt => {
                let alter = stmt.cast::<pg_sys::AlterTableStmt>();
                let stores = PgList::<pg_sys::AlterTableCmd>::from_pg((*alter).cmds)
                    .iter_ptr()
                    .any(|cmd| alter_stores_code(cmd));
                (stores && !existing_temporary((*alter).relation)).then_some(STORED)
            }
            NodeTag::T_IndexStmt => {
                let index = stmt.cast::<pg_sys::IndexStmt>();
                (index_stores_code(index) && !existing_temporary((*index).relation))
                    .then_some("expression or partial indexes, or exclusion constraints")
            }
            NodeTag::T_CreateStatsStmt => {
                let stats = stmt.cast::<pg_sys::CreateStatsStmt>();
                let expressions = PgList::<pg_sys::StatsElem>::from_pg((*stats).exprs)
                    .iter_ptr()
                    .any(|e| !(*e).expr.is_null());
                let temporary = PgList::<Node>::from_pg((*stats).relations)
                    .iter_ptr()
                    .all(|rv| is_a(rv, NodeTag::T_RangeVar) && existing_temporary(rv.cast()));
                (expressions && !temporary).then_some("extended statistics on expressions")
            }
            NodeTag::T_CreateDomainStmt
            | NodeTag::T_AlterDomainStmt
            | NodeTag::T_AlterFunctionStmt
            | NodeTag::T_CreateCastStmt
            | NodeTag::T_DefineStmt
            | NodeTag::T_CreateRangeStmt
            | NodeTag::T_AlterTypeStmt
            | NodeTag::T_AlterOperatorStmt => {
                Some("domains, functions, casts, operators, aggregates or types")
            }
            NodeTag::T_CreateConversionStmt
            | NodeTag::T_CreateTransformStmt
            | NodeTag::T_CreateOpClassStmt
            | NodeTag::T_CreateOpFamilyStmt
            | NodeTag::T_AlterOpFamilyStmt
            | NodeTag::T_CreatePLangStmt
            | NodeTag::T_CreateEventTrigStmt
            | NodeTag::T_AlterEventTrigStmt
            | NodeTag::T_CreateAmStmt
            | NodeTag::T_CreateFdwStmt
            | NodeTag::T_AlterFdwStmt
            | NodeTag::T_CreatePublicationStmt
            | NodeTag::T_AlterPublicationStmt => Some(
                "conversions, transforms, operator classes, languages, event triggers, access methods, foreign-data wrappers or publications",
            ),
            _ => None,
        }
    }
}

/// What [`leaves_code`] calls expressions stored in a relation.
const STORED: &str = "column defaults other than literals, generated columns, check or exclusion constraints, expression partition keys, or LIKE ... INCLUDING DEFAULTS, GENERATED, CONSTRAINTS, INDEXES or STATISTICS";

/// The relation a `RangeVar` names now, without a lock (`InvalidOid`
/// when there is none).
///
/// # Safety
/// `rv` is a valid RangeVar.
pub unsafe fn relation_named(rv: *mut pg_sys::RangeVar) -> Oid {
    // SAFETY: as the caller promises; missing_ok, no lock, no callback.
    unsafe {
        pg_sys::RangeVarGetRelidExtended(
            rv,
            pg_sys::NoLock as _,
            pg_sys::RVROption::RVR_MISSING_OK,
            None,
            std::ptr::null_mut(),
        )
    }
}

/// The tables the foreign keys a `CREATE TABLE` or `ALTER TABLE` adds
/// reference (their `REFERENCES` targets, as written).
///
/// # Safety
/// `stmt` is a valid parse node.
pub unsafe fn referenced_tables(stmt: *mut Node) -> Vec<*mut pg_sys::RangeVar> {
    // SAFETY: `stmt` and the nodes of its lists are valid parse nodes,
    // cast after their tags are checked.
    unsafe {
        // Lists that may hold Constraint nodes.
        let mut lists: Vec<*mut pg_sys::List> = Vec::new();
        let mut single: Vec<*mut Node> = Vec::new();
        if is_a(stmt, NodeTag::T_CreateStmt) {
            let create = stmt.cast::<pg_sys::CreateStmt>();
            lists.push((*create).constraints);
            lists.push((*create).tableElts);
            for e in PgList::<Node>::from_pg((*create).tableElts).iter_ptr() {
                if is_a(e, NodeTag::T_ColumnDef) {
                    lists.push((*e.cast::<pg_sys::ColumnDef>()).constraints);
                }
            }
        } else if is_a(stmt, NodeTag::T_AlterTableStmt) {
            let alter = stmt.cast::<pg_sys::AlterTableStmt>();
            for cmd in PgList::<pg_sys::AlterTableCmd>::from_pg((*alter).cmds).iter_ptr() {
                let def = (*cmd).def;
                if def.is_null() {
                    continue;
                }
                if is_a(def, NodeTag::T_ColumnDef) {
                    lists.push((*def.cast::<pg_sys::ColumnDef>()).constraints);
                } else {
                    single.push(def);
                }
            }
        }
        let constraints: Vec<*mut pg_sys::Constraint> = lists
            .into_iter()
            .flat_map(|l| PgList::<Node>::from_pg(l).iter_ptr().collect::<Vec<_>>())
            .chain(single)
            .filter(|n| is_a(*n, NodeTag::T_Constraint))
            .map(|n| n.cast())
            .collect();
        constraints
            .into_iter()
            .filter(|c| {
                (**c).contype == pg_sys::ConstrType::CONSTR_FOREIGN && !(**c).pktable.is_null()
            })
            .map(|c| (*c).pktable)
            .collect()
    }
}

/// True when `CREATE TABLE` (or `CREATE FOREIGN TABLE`) would store an
/// expression: in a column, a table constraint, a `LIKE` clause that
/// copies expressions, or the partition key.
unsafe fn create_stores_code(create: *mut pg_sys::CreateStmt) -> bool {
    // SAFETY: `create` is a valid CreateStmt; its lists hold parse nodes,
    // cast after their tags are checked.
    unsafe {
        let elements = PgList::<Node>::from_pg((*create).tableElts);
        let copies = pg_sys::TableLikeOption::CREATE_TABLE_LIKE_DEFAULTS
            | pg_sys::TableLikeOption::CREATE_TABLE_LIKE_GENERATED
            | pg_sys::TableLikeOption::CREATE_TABLE_LIKE_CONSTRAINTS
            | pg_sys::TableLikeOption::CREATE_TABLE_LIKE_INDEXES
            | pg_sys::TableLikeOption::CREATE_TABLE_LIKE_STATISTICS;
        let element_stores = |e: *mut Node| {
            if is_a(e, NodeTag::T_ColumnDef) {
                column_stores_code(e.cast())
            } else if is_a(e, NodeTag::T_Constraint) {
                constraint_stores_code(e.cast())
            } else if is_a(e, NodeTag::T_TableLikeClause) {
                (*e.cast::<pg_sys::TableLikeClause>()).options & copies != 0
            } else {
                true
            }
        };
        let partition_expression = !(*create).partspec.is_null()
            && PgList::<pg_sys::PartitionElem>::from_pg((*(*create).partspec).partParams)
                .iter_ptr()
                .any(|p| !(*p).expr.is_null());
        elements.iter_ptr().any(element_stores)
            || PgList::<pg_sys::Constraint>::from_pg((*create).constraints)
                .iter_ptr()
                .any(|c| constraint_stores_code(c))
            || partition_expression
    }
}

/// True when a column definition stores an expression: a default that is
/// not a literal, a generated column, a check constraint.
unsafe fn column_stores_code(column: *mut pg_sys::ColumnDef) -> bool {
    // SAFETY: `column` is a valid ColumnDef whose constraints list holds
    // Constraint nodes.
    unsafe {
        (!(*column).raw_default.is_null() && !is_literal((*column).raw_default))
            || !(*column).cooked_default.is_null()
            || (*column).generated != 0
            || PgList::<pg_sys::Constraint>::from_pg((*column).constraints)
                .iter_ptr()
                .any(|c| constraint_stores_code(c))
    }
}

/// True when a constraint stores an expression: a default that is not a
/// literal, a generated column, a check or an exclusion constraint (or a
/// kind this check does not know).
unsafe fn constraint_stores_code(c: *mut pg_sys::Constraint) -> bool {
    use pg_sys::ConstrType as C;
    // SAFETY: `c` is a valid Constraint node (callers check the tag or
    // read a list of them).
    unsafe {
        if !is_a(c.cast(), NodeTag::T_Constraint) {
            return true;
        }
        match (*c).contype {
            C::CONSTR_DEFAULT => !(*c).cooked_expr.is_null() || !is_literal((*c).raw_expr),
            C::CONSTR_NULL
            | C::CONSTR_NOTNULL
            | C::CONSTR_IDENTITY
            | C::CONSTR_PRIMARY
            | C::CONSTR_UNIQUE
            | C::CONSTR_FOREIGN
            | C::CONSTR_ATTR_DEFERRABLE
            | C::CONSTR_ATTR_NOT_DEFERRABLE
            | C::CONSTR_ATTR_DEFERRED
            | C::CONSTR_ATTR_IMMEDIATE => !(*c).where_clause.is_null(),
            _ => true,
        }
    }
}

/// True when `node` is a literal constant, perhaps cast (`'x'`, `-1`,
/// `NULL`, `'2024-01-01'::date`): evaluating it runs no code of the
/// session that wrote it.
unsafe fn is_literal(mut node: *mut Node) -> bool {
    // SAFETY: `node` is NULL or a valid raw expression node; a TypeCast's
    // argument is one.
    unsafe {
        while !node.is_null() && is_a(node, NodeTag::T_TypeCast) {
            node = (*node.cast::<pg_sys::TypeCast>()).arg;
        }
        !node.is_null() && is_a(node, NodeTag::T_A_Const)
    }
}

/// True when an `ALTER TABLE` subcommand stores an expression, or is one
/// this check does not list (PostgreSQL's internal subcommands among
/// them): it is then allowed on this session's temporary relations only.
unsafe fn alter_stores_code(cmd: *mut pg_sys::AlterTableCmd) -> bool {
    use pg_sys::AlterTableType as At;
    // SAFETY: `cmd` is a valid AlterTableCmd; its `def` is the node its
    // subtype documents, cast after its tag is checked.
    unsafe {
        let def = (*cmd).def;
        match crate::pg::version::alter_base((*cmd).subtype) {
            At::AT_AddColumn => {
                def.is_null() || !is_a(def, NodeTag::T_ColumnDef) || column_stores_code(def.cast())
            }
            // SET DEFAULT expr; DROP DEFAULT has none.
            At::AT_ColumnDefault => !def.is_null() && !is_literal(def),
            At::AT_AddConstraint => def.is_null() || constraint_stores_code(def.cast()),
            // ALTER COLUMN TYPE ... USING evaluates its expression once,
            // now, in this session; the others store none.
            At::AT_AlterColumnType
            | At::AT_DropNotNull
            | At::AT_SetNotNull
            | At::AT_DropExpression
            | At::AT_SetStatistics
            | At::AT_SetOptions
            | At::AT_ResetOptions
            | At::AT_SetStorage
            | At::AT_SetCompression
            | At::AT_DropColumn
            | At::AT_AlterConstraint
            | At::AT_ValidateConstraint
            | At::AT_DropConstraint
            | At::AT_AlterColumnGenericOptions
            | At::AT_ChangeOwner
            | At::AT_ClusterOn
            | At::AT_DropCluster
            | At::AT_SetLogged
            | At::AT_SetUnLogged
            | At::AT_DropOids
            | At::AT_SetAccessMethod
            | At::AT_SetTableSpace
            | At::AT_SetRelOptions
            | At::AT_ResetRelOptions
            | At::AT_ReplaceRelOptions
            | At::AT_EnableTrig
            | At::AT_EnableAlwaysTrig
            | At::AT_EnableReplicaTrig
            | At::AT_DisableTrig
            | At::AT_EnableTrigAll
            | At::AT_DisableTrigAll
            | At::AT_EnableTrigUser
            | At::AT_DisableTrigUser
            | At::AT_EnableRule
            | At::AT_EnableAlwaysRule
            | At::AT_EnableReplicaRule
            | At::AT_DisableRule
            | At::AT_AddInherit
            | At::AT_DropInherit
            | At::AT_AddOf
            | At::AT_DropOf
            | At::AT_ReplicaIdentity
            | At::AT_EnableRowSecurity
            | At::AT_DisableRowSecurity
            | At::AT_ForceRowSecurity
            | At::AT_NoForceRowSecurity
            | At::AT_GenericOptions
            | At::AT_AttachPartition
            | At::AT_DetachPartition
            | At::AT_DetachPartitionFinalize
            | At::AT_AddIdentity
            | At::AT_SetIdentity
            | At::AT_DropIdentity => false,
            _ => true,
        }
    }
}

/// True when `CREATE INDEX` indexes an expression, has a predicate or is
/// an exclusion constraint's index.
unsafe fn index_stores_code(index: *mut pg_sys::IndexStmt) -> bool {
    // SAFETY: `index` is a valid IndexStmt whose parameter lists hold
    // IndexElem nodes.
    unsafe {
        let expression = |list| {
            PgList::<pg_sys::IndexElem>::from_pg(list)
                .iter_ptr()
                .any(|e| !(*e).expr.is_null())
        };
        expression((*index).indexParams)
            || expression((*index).indexIncludingParams)
            || !(*index).whereClause.is_null()
            || !(*index).excludeOpNames.is_null()
    }
}

/// True when `rv`, a relation a statement is about to create, will be a
/// temporary one of this session: `TEMP`, or created in `pg_temp` (named,
/// or first in `search_path`, which PostgreSQL then makes temporary).
unsafe fn creates_temporary(rv: *mut pg_sys::RangeVar) -> bool {
    // SAFETY: `rv` is a valid RangeVar; RangeVarGetCreationNamespace
    // resolves the schema the command will create the relation in (an
    // ERROR for a missing schema, as the command would raise), taking no
    // lock; isTempNamespace compares with this session's own.
    unsafe {
        (*rv).relpersistence as u8 == pg_sys::RELPERSISTENCE_TEMP
            || pg_sys::isTempNamespace(pg_sys::RangeVarGetCreationNamespace(rv))
    }
}

/// True when `rv` names a temporary relation of this session, or nothing;
/// pins `rv` to this session's temporary schema either way, so that the
/// command can only find a temporary relation of this session (not one of
/// that name another session creates, or renames into place, meanwhile).
unsafe fn existing_temporary(rv: *mut pg_sys::RangeVar) -> bool {
    // SAFETY: `rv` is a valid RangeVar of a statement the hook may modify;
    // missing_ok, no lock (the namespace of a relation found is read, and
    // no other session can create or rename a relation into this
    // session's temporary schema); the names set are palloc'd copies.
    unsafe {
        let relid = relation_named(rv);
        if relid == Oid::INVALID {
            (*rv).schemaname = pg_sys::pstrdup(c"pg_temp".as_ptr());
            return true;
        }
        let namespace = pg_sys::get_rel_namespace(relid);
        if !pg_sys::isTempNamespace(namespace) {
            return false;
        }
        let name = pg_sys::get_namespace_name(namespace);
        if name.is_null() {
            return false;
        }
        (*rv).schemaname = name;
        true
    }
}
