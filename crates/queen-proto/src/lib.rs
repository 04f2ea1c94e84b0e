//! The wire contract of Queen's HTTP API v1, free of I/O.
//!
//! Server, test kit and load generator share these definitions: validated names,
//! the queue option set of `/configure`, and the response bodies whose field
//! names and casing the official clients depend on (see `shared/spec/http-api.md`).

pub mod mesh;
pub mod names;
pub mod options;
pub mod responses;
pub mod spool;
pub mod time;

pub use names::{ConsumerGroup, NameError, PartitionName, QueueName, QUEUE_MODE};
pub use options::QueueOptions;
