//! The client against a real broker on PostgreSQL (queen-testkit): every
//! call, failover between replicas, retries without duplicates.

#![expect(
    clippy::unwrap_used,
    reason = "a test fails loudly on any unexpected error"
)]

mod admin;
mod buffer;
mod calls;
mod common;
mod consume;
mod failover;
mod retry;
