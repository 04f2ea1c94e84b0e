//! The `queen` binary against a real broker (queen-testkit): the forms
//! scripts use, every command, and the failure cases (JWT, a wrong URL,
//! PostgreSQL down, malformed input).

#![expect(
    clippy::unwrap_used,
    reason = "a test fails loudly on any unexpected error"
)]

mod admin;
mod common;
mod consume;
mod contexts;
mod failures;
mod formats;
mod manifests;
mod push;
mod stores;
