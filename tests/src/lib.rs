//! Integration tests across crates against a real PostgreSQL.
//!
//! They need the project's throwaway cluster with the extension installed
//! (`scripts/test.sh` starts it and sets `PGHOST`, `PGPORT`, `PGUSER` and
//! `DPTEXT_TEST_DB`). Without `DPTEXT_TEST_DB` they are skipped, so a plain
//! `cargo test` works on a machine without PostgreSQL; with
//! `DPTEXT_REQUIRE_PG=1` a missing cluster is a failure instead.

#![forbid(unsafe_code)]
