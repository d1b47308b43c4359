//! dptext refuses a database whose encoding is not UTF8 with SQLSTATE 22021
//! (character not in repertoire) from every text function, instead of
//! reading its bytes as UTF-8.

#[path = "../common/psql.rs"]
mod common;

use common::{database, psql, psql_error};

/// The LATIN1 database this test creates (and drops) in the test cluster.
const LATIN1_DB: &str = "dptext_it_latin1";

#[test]
fn a_latin1_database_gets_22021_from_every_text_function() {
    let Some(db) = database() else { return };
    psql(
        "postgres",
        &format!("DROP DATABASE IF EXISTS {LATIN1_DB}"),
        true,
    );
    psql(
        "postgres",
        &format!(
            "CREATE DATABASE {LATIN1_DB} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
        ),
        true,
    );
    psql(LATIN1_DB, "CREATE EXTENSION dptext", true);
    let calls = [
        "SELECT santext('Kathryn Herrera has a fever', 3)",
        "SELECT santext_plus('Kathryn Herrera has a fever', 3)",
        "SELECT custext('Kathryn Herrera has a fever', 2)",
        "SELECT detect_pii('Kathryn Herrera has a fever')",
        "SELECT deidentify('Kathryn Herrera has a fever')",
        "SELECT sanitize('Kathryn Herrera has a fever', 'santext', '{\"eps\": 3}')",
    ];
    let mut wrong = Vec::new();
    for sql in calls {
        let err = psql_error(LATIN1_DB, sql);
        if !err.contains("ERROR:  22021:") || !err.contains("UTF8") {
            wrong.push(format!("{sql}: {err}"));
        }
    }
    psql(
        "postgres",
        &format!("DROP DATABASE IF EXISTS {LATIN1_DB}"),
        true,
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The same call in the UTF8 test database goes through.
    let ok = psql(
        &db,
        "SELECT santext('Kathryn Herrera has a fever', 3)",
        true,
    );
    assert!(!ok.trim().is_empty());
}
