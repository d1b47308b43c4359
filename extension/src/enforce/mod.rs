//! Enforcement of masking at the source (docs/masking.md): the decisions,
//! in safe code ([`masking`]: each relation's policy; [`mask`]:
//! `dptext.mask`, the call the rewrite puts where a labelled column is
//! read; [`visibility`]: what masked sessions see of the catalogs' figures),
//! and the places where PostgreSQL is told about them,
//! which touch its structures and so may use `unsafe` (each block with a
//! SAFETY note):
//!
//! - [`hooks`]: the planner, utility, statistics, relation-info,
//!   function-manager and executor-start hooks;
//! - [`rewrite`]: a masked query's relations replaced by masking
//!   subqueries;
//! - [`ddl`]: masked sessions' DDL read from parse trees;
//! - [`side_channels`]: figures that follow raw sizes kept from masked
//!   sessions (object-access and log hooks);
//! - [`labels`]: the `dptext` security-label provider;
//! - [`lineage`]: which source columns a materialized view's columns read.
//!
//! PostgreSQL primitives they share (catalog reads, settings, locks,
//! interrupts) are in [`crate::pg`].

#[allow(unsafe_code)]
pub mod ddl;
#[allow(unsafe_code)]
pub mod hooks;
#[allow(unsafe_code)]
pub mod labels;
#[allow(unsafe_code)]
pub mod lineage;
pub mod mask;
pub mod masking;
#[allow(unsafe_code)]
pub mod rewrite;
#[allow(unsafe_code)]
pub mod side_channels;
pub mod visibility;
