//! Proxy mode's protocol state machine, without I/O: it takes the
//! client's and the server's messages one at a time, as typed frames
//! ([`tags`]), and says what to send where ([`ClientStep`],
//! [`ServerStep`]); the relay around it ([`super::filter`]) reads frames
//! and performs the steps.
//!
//! - `state`: the [`Machine`] and what it keeps between messages;
//! - `frontend`: the client's messages, analyzed, recorded and forwarded
//!   or refused;
//! - `backend`: the server's answers, matched in order to what they
//!   answer, their rows sanitized;
//! - `cancel`: the client's cancel requests, which stop the proxy's own
//!   sanitizing of a result;
//! - `expect`: the answers awaited;
//! - `columns`: protected columns of a result, and which server errors
//!   a result with them may relay;
//! - `rows`: the pure halves of sanitizing a batch of rows;
//! - `step`: the steps;
//! - [`tags`]: message types by direction.
//!
//! Its unit tests (`tests`) feed it messages in every order the attack
//! tests found, message by message, and check the steps.

mod backend;
mod cancel;
mod columns;
mod expect;
mod frontend;
pub mod rows;
mod state;
mod step;
pub mod tags;
#[cfg(test)]
mod tests;

pub use state::{Machine, Settings};
pub use step::{ClientStep, RowBatch, ServerStep};
pub use tags::BackendTag;
