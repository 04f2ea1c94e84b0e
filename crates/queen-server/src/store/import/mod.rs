//! The SQL of `queen-server import` (`crate::import`): reading a reference
//! 0.15 database (`source.rs`, layout in `reference-schema-0.15.md`) and
//! writing what it holds into this broker's schema (`target.rs`), through
//! the same `queen.push_batch` as every push, with the progress of each
//! partition (`queen.import_progress`) written in the transaction of its
//! messages.

mod snapshot;
mod source;
mod target;

use chrono::{DateTime, Utc};
use uuid::Uuid;

pub use snapshot::SourceSnapshot;
pub use source::{describe_url, Source};
pub use target::{ImportTx, TargetCounts, Watermark};

/// The reference's group name for queue mode (also ours).
pub const QUEUE_MODE: &str = queen_proto::names::QUEUE_MODE;

/// A queue of the source with its options (reference columns, this broker's names).
#[derive(Debug, Clone)]
pub struct SourceQueue {
    pub name: String,
    pub namespace: String,
    pub task: String,
    pub options: queen_proto::QueueOptions,
    pub created_at: DateTime<Utc>,
}

/// A partition of the source.
#[derive(Debug, Clone)]
pub struct SourcePartition {
    pub id: Uuid,
    pub queue: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

/// A message of the source, its payload as the `jsonb` text the source
/// stores (an envelope included).
#[derive(Debug, Clone)]
pub struct SourceMessage {
    pub id: Uuid,
    pub transaction_id: String,
    pub trace_id: Option<Uuid>,
    pub payload: String,
    pub created_at: DateTime<Utc>,
    pub producer_sub: Option<String>,
}

impl SourceMessage {
    /// The source's order key within a partition: (created_at, id).
    pub fn key(&self) -> (DateTime<Utc>, Uuid) {
        (self.created_at, self.id)
    }
}

/// A `partition_consumers` row: one group's cursor and lease on a partition.
#[derive(Debug, Clone)]
pub struct SourceCursor {
    pub group: String,
    /// The cursor, `None` when unset (nil id, NULL time).
    pub cursor: Option<(DateTime<Utc>, Uuid)>,
    /// A lease live at read time (`worker_id` set, not expired).
    pub live_lease: bool,
    pub batch_size: i32,
    pub acked_count: i32,
    pub batch_retry_count: i32,
    pub total_consumed: i64,
    pub total_batches: i64,
    pub last_consumed_at: Option<DateTime<Utc>>,
}

/// A `consumer_groups_metadata` row: the stored start of a group in mode
/// `new` or `timestamp`.
#[derive(Debug, Clone)]
pub struct SourceSubscription {
    pub group: String,
    pub queue: String,
    /// '' = the whole queue.
    pub partition: String,
    pub namespace: String,
    pub task: String,
    pub mode: String,
    pub timestamp: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
}

/// A dead-letter row joined to its message.
#[derive(Debug, Clone)]
pub struct SourceDeadLetter {
    pub group: String,
    pub message: SourceMessage,
    pub error: Option<String>,
    pub retry_count: i32,
    pub failed_at: DateTime<Utc>,
}

/// A trace row with its names.
#[derive(Debug, Clone)]
pub struct SourceTrace {
    pub id: Uuid,
    pub transaction_id: String,
    pub group: String,
    pub event_type: String,
    /// `data` as JSON text.
    pub data: String,
    pub names: Vec<String>,
    pub worker_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A message to append: a source message whose payload was put in this
/// broker's stored form (opened and sealed again with this broker's key).
pub type ImportMessage = SourceMessage;

/// A cursor to write: the group's position as a source key (the next message
/// is the first imported one after it), `None` = from the oldest.
#[derive(Debug, Clone)]
pub struct CursorWrite {
    pub group: String,
    pub position: Option<(DateTime<Utc>, Uuid)>,
    pub retry_count: i32,
    pub total_consumed: i64,
    pub batches_consumed: i64,
    pub last_consumed_at: Option<DateTime<Utc>>,
}

/// A dead letter to write, its payload in this broker's stored form.
#[derive(Debug, Clone)]
pub struct DeadLetterWrite {
    pub group: String,
    pub message: ImportMessage,
    pub error: Option<String>,
    pub retry_count: i32,
    pub failed_at: DateTime<Utc>,
}
