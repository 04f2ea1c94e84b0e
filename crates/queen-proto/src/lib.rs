//! The wire contract of Queen's HTTP API v1, free of I/O.
//!
//! Server, test kit and load generator share these definitions: validated names,
//! the queue option set of `/configure`, and every response body of API v1,
//! whose field names and casing the official clients depend on (see
//! `shared/spec/http-api.md`): [`responses`] for push, pop, ack and lease,
//! [`admin`] for the routes on messages and groups, [`status`] for the routes
//! that report state. The mesh frame and spool record codecs live here too, the
//! binary push and transaction bodies of the 2.6 clients ([`push_binary`]),
//! and the strict mesh handshake ([`mesh_auth`]) as a pure state machine.

pub mod admin;
pub mod analytics;
pub mod mesh;
pub mod mesh_auth;
pub mod migration;
pub mod names;
pub mod options;
pub mod payload;
pub mod push_binary;
pub mod responses;
pub mod spool;
pub mod status;
pub mod system;
pub mod time;

pub use names::{ConsumerGroup, NameError, PartitionName, QueueName, QUEUE_MODE};
pub use options::QueueOptions;
