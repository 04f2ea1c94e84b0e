//! Integration tests of the broker core: one binary, one module per area.
//! Every test has its own database and broker (`queen-testkit`).

#![expect(
    clippy::unwrap_used,
    reason = "a test fails loudly on any unexpected error"
)]

mod ack;
mod admin;
mod analytics;
mod auth;
mod autopilot;
mod common;
mod configure;
mod conflation;
mod consume_flights;
mod consume_statement;
mod dashboard;
mod db_credentials;
mod encryption;
mod ephemeral_bounds;
mod failover;
mod groups;
mod ha;
mod ha_ephemeral;
mod hostile;
mod hostile_names;
mod import;
mod kv;
mod lease;
mod lifecycle;
mod long_poll;
mod max_size;
mod mesh_security;
mod migration;
mod outage;
mod planner_stats;
mod pop;
mod prometheus;
mod push;
mod push_binary;
mod queue_options;
mod reads;
mod recurring_timers;
mod retry_delay;
mod router_walk;
mod schema;
mod settings;
mod spool;
mod startup;
mod streams;
mod timers;
mod tls;
mod transaction;
mod validation;
