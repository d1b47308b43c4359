//! The extension's own functions the rewrite calls, found by signature
//! once per backend (until the caches are dropped).

use pgrx::pg_sys::Oid;

use crate::error::refuse;
use crate::pg::lookup::{lookup, read_one};

use super::FUNCTIONS;

/// The oid of `dptext.mask`; refuses the statement when the extension is
/// not installed in this database (labels without the extension cannot be
/// enforced).
pub(crate) fn mask_function() -> Oid {
    // Masked reads in a database whose text is not UTF-8 are refused when
    // the query is planned, whatever its rows hold: a value converted row
    // by row would fail only on rows with non-ASCII bytes, a bit of each
    // raw value.
    crate::pg::interrupts::require_utf8();
    function_oid("dptext.mask(pg_catalog.text,pg_catalog.text,pg_catalog.text)")
}

/// The oid of `dptext.mask(text, text, text, text)`, for rules with a
/// grouping column.
pub(crate) fn mask_function_grouped() -> Oid {
    function_oid("dptext.mask(pg_catalog.text,pg_catalog.text,pg_catalog.text,pg_catalog.text)")
}

/// The oid of the dptext function `signature` (schema-qualified, with
/// argument types); refuses the statement when it does not exist.
pub(crate) fn function_oid(signature: &'static str) -> Oid {
    try_function_oid(signature).unwrap_or_else(|| {
        refuse(format!("{signature} is missing, so masked reads cannot be enforced: this database has dptext labels but not the dptext extension (CREATE EXTENSION dptext), or an older version of it (ALTER EXTENSION dptext UPDATE)"))
    })
}

/// The oid of the dptext function `signature`, when it exists.
pub(crate) fn try_function_oid(signature: &'static str) -> Option<Oid> {
    if let Some(oid) = FUNCTIONS.with(|f| f.borrow().get(signature).copied()) {
        return Some(oid);
    }
    let oid = lookup(|| {
        read_one::<Oid>(
            "SELECT pg_catalog.to_regprocedure($1)::pg_catalog.oid",
            &[signature.into()],
        )
    })
    .ok()
    .flatten()
    .filter(|o| *o != Oid::INVALID)?;
    FUNCTIONS.with(|f| f.borrow_mut().insert(signature, oid));
    Some(oid)
}
