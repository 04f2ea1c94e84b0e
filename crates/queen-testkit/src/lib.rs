//! Test tools for Queen: a fresh PostgreSQL database per test, an in-process
//! broker on a free port, a TCP fault proxy to cut the database link, and a
//! recording proxy that captures what crosses a mesh link.
//!
//! The admin connection comes from `QUEEN_TEST_PG` (a libpq-style connection
//! string), default `host=127.0.0.1 port=5432 user=postgres dbname=postgres`.

mod broker;
mod cluster;
mod db;
mod private_pg;
mod proxy;
mod recorder;

pub use broker::{base_env, fresh_broker, TestBroker};
pub use cluster::{free_port, TestCluster};
pub use db::TestDb;
pub use private_pg::{pg_bin_dir, pg_os_user, PrivatePg};
pub use proxy::FaultProxy;
pub use recorder::RecordingProxy;
