//! Async Rust client for Queen's HTTP API v1.
//!
//! Shaped like the official clients, so their documentation translates:
//! `client.queue("orders").partition("cust-42").push(..)`, `.group(..)`,
//! `.batch(..)`, `.wait(..)`, `consume` with a handler and concurrency,
//! a transaction builder, buffered pushes.
//!
//! ```no_run
//! use queen_client::{Client, Result};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Order { id: u64, amount: f64 }
//!
//! # async fn run() -> Result<()> {
//! let client = Client::builder()
//!     .urls(["http://queen-a:6632", "http://queen-b:6632"])
//!     .build()?;
//! client
//!     .queue("orders")
//!     .partition("cust-42")
//!     .push(&Order { id: 1, amount: 12.5 })
//!     .await?;
//!
//! client
//!     .queue("orders")
//!     .group("billing")
//!     .concurrency(4)
//!     .batch(10)
//!     .consume(|msg| async move {
//!         let order: Order = msg.data_as().map_err(|e| e.to_string())?;
//!         println!("order {} for {}", order.id, order.amount);
//!         Ok::<_, String>(())
//!     })
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! # What the client does for you
//!
//! - **Failover.** With several URLs (replicas of one cluster) requests
//!   rotate over the brokers that are up; one that cannot be reached is
//!   skipped for a while and the request goes to the next at once.
//! - **Retries.** Connection failures, timeouts, `429`, `502`–`504` and
//!   database outages are retried with exponential backoff, a bounded number
//!   of times ([`RetryPolicy`]). Pushes carry client-made transaction ids
//!   (UUID v7), so a retried push is a `duplicate`, never a second message.
//!   Transactions are retried only when they surely never reached a broker.
//! - **Leases.** `consume` renews the lease while the handler runs and acks
//!   (`completed`) or nacks (`failed`, with the error text) by its outcome.
//! - **Buffered pushes** ([`Queue::buffer`]) flush on size, on a timer, on
//!   request and on drop.
//!
//! Errors are one [`Error`] enum with [`Error::is_retryable`]. Payloads are
//! any `serde` type, or raw JSON through [`PushItem::raw`] and [`Message::data`].

mod admin;
mod buffer;
mod client;
mod consume;
mod dlq;
mod error;
mod path;
mod queue;
mod transaction;
mod transport;
mod types;

pub use admin::{Admin, MessageFilter};
pub use buffer::{BufferOptions, BufferStats, BufferedProducer};
pub use client::{AckRequest, Client, ClientBuilder};
pub use consume::ConsumeStats;
pub use dlq::DlqQuery;
pub use error::{BoxError, Error, Result};
pub use path::segment;
pub use queue::{Queue, QueueOptions, SubscriptionMode};
/// Re-exported for [`Queue::until`].
pub use tokio_util::sync::CancellationToken;
pub use transaction::Transaction;
pub use transport::RetryPolicy;
pub use types::{
    AckResult, AckStatus, ConfigureResult, DeadLetter, DeadLetterPage, DeleteQueueResult,
    LeaseRenewal, Maintenance, Message, PushItem, PushResult, PushStatus, Seek, TransactionResult,
};
