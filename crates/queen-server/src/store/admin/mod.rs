//! Reads and admin writes of the ADMIN/SECONDARY routes, one file per area:
//! dead letters, traces, consumer groups, statistics, single messages.

mod activity;
mod analytics;
mod dlq;
mod dlq_delete;
mod groups;
mod health;
mod messages;
mod pg_health;
mod stats;
mod traces;

pub use activity::{ActivityFlush, ClusterFigures, QueueMinute, ACTIVITY_COLUMNS};
pub use analytics::{
    LagPoint, OpsPoint, ParkedPoint, QueuePolicy, RetentionRun, SeriesQuery, WorkerPoint,
};
pub use dlq::{DeadLetter, DeadLetterFilter};
pub use groups::{Cursor, Subscription};
pub use health::{HealthPoint, HealthSample};
pub use messages::{GroupState, MessageDetail, MessageFilter, MessageSummary};
pub use stats::{PartitionStats, QueueScope};
pub use traces::{NewTrace, Trace, TraceName};
