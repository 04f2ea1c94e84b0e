//! Bodies of `GET /api/v1/analytics/{worker-metrics, queue-lag, queue-ops,
//! queue-parked-replicas, retention}`: time series over the metrics history,
//! one series per queue (or replica), bucketed by `interval`
//! (docs/http-api.md, "Analytics").

use serde::Serialize;

use crate::status::TimeRange;

/// Push, pop, ack and dead-letter counts (one bucket, or a sum).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OpsCounts {
    pub pushed: i64,
    pub popped: i64,
    pub acked: i64,
    pub dead_lettered: i64,
}

/// One bucket of a queue's operations.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpsPoint {
    pub timestamp: String,
    #[serde(flatten)]
    pub counts: OpsCounts,
    pub pushed_per_second: f64,
    pub popped_per_second: f64,
    pub acked_per_second: f64,
}

/// The operations series of one queue.
#[derive(Debug, Clone, Serialize)]
pub struct QueueOpsSeries {
    pub queue: String,
    pub points: Vec<OpsPoint>,
    pub totals: OpsCounts,
}

/// `GET /api/v1/analytics/queue-ops`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueOps {
    pub time_range: TimeRange,
    pub interval: String,
    pub bucket_seconds: i32,
    pub queues: Vec<QueueOpsSeries>,
    pub totals: OpsCounts,
}

/// One bucket of a queue's lag: the worst and mean `lagSeconds` of its
/// samples; `offsetLag`, `pending`, `processing` of its newest sample.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LagPoint {
    pub timestamp: String,
    pub lag_seconds: f64,
    pub avg_lag_seconds: f64,
    pub offset_lag: i64,
    pub pending: i64,
    pub processing: i64,
}

/// The lag series of one queue; `current` is its newest bucket.
#[derive(Debug, Clone, Serialize)]
pub struct QueueLagSeries {
    pub queue: String,
    pub points: Vec<LagPoint>,
    pub current: Option<LagPoint>,
}

/// `GET /api/v1/analytics/queue-lag`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueLag {
    pub time_range: TimeRange,
    pub interval: String,
    pub bucket_seconds: i32,
    pub queues: Vec<QueueLagSeries>,
}

/// Push, pop and ack counts of a replica.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct WorkerCounts {
    pub pushed: i64,
    pub popped: i64,
    pub acked: i64,
}

/// One bucket of a replica's throughput.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerPoint {
    pub timestamp: String,
    #[serde(flatten)]
    pub counts: WorkerCounts,
    pub pushed_per_second: f64,
    pub popped_per_second: f64,
    pub acked_per_second: f64,
    /// Throughput rows the replica wrote in the bucket.
    pub samples: i64,
}

/// The throughput series of one replica.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerSeries {
    pub worker_id: String,
    pub hostname: String,
    pub last_seen: String,
    pub points: Vec<WorkerPoint>,
    pub totals: WorkerCounts,
}

/// One replica's health in one bucket, one flat row per (replica, bucket)
/// as the reference's app reads its worker rows: event loop lag, CPU,
/// memory, pool, with the bucket's message counts.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerHealthPoint {
    pub timestamp: String,
    pub hostname: String,
    pub worker_id: String,
    /// Mean and worst lateness of the runtime's 100 ms probe timer, ms.
    pub avg_event_loop_lag_ms: f64,
    pub max_event_loop_lag_ms: f64,
    /// Percent of one core, mean and worst of the bucket's intervals.
    pub avg_cpu_percent: f64,
    pub max_cpu_percent: f64,
    pub max_rss_bytes: i64,
    pub db_pool_size: i32,
    /// Most connections in use by a request at a sample.
    pub db_pool_active: i32,
    /// Most connections open at a sample.
    pub db_connections: i32,
    pub db_pool_waiting: i32,
    pub spool_pending: i64,
    pub push_message_count: i64,
    pub pop_message_count: i64,
    pub ack_message_count: i64,
    /// Health rows the replica wrote in the bucket.
    pub samples: i64,
}

/// `GET /api/v1/analytics/worker-metrics`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerMetrics {
    pub time_range: TimeRange,
    pub interval: String,
    pub bucket_seconds: i32,
    pub workers: Vec<WorkerSeries>,
    /// By replica, then time.
    pub time_series: Vec<WorkerHealthPoint>,
}

/// One bucket: the replicas that had a pop parked on the queue.
#[derive(Debug, Clone, Serialize)]
pub struct ParkedPoint {
    pub timestamp: String,
    pub replicas: Vec<String>,
    pub count: usize,
}

/// The parked-replicas series of one queue.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueParkedSeries {
    pub queue: String,
    pub points: Vec<ParkedPoint>,
    pub max_replicas: usize,
}

/// `GET /api/v1/analytics/queue-parked-replicas`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueParkedReplicas {
    pub time_range: TimeRange,
    pub interval: String,
    pub bucket_seconds: i32,
    pub queues: Vec<QueueParkedSeries>,
}

/// A queue's retention settings.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetentionPolicy {
    pub queue: String,
    pub retention_enabled: bool,
    pub retention_seconds: i32,
    pub completed_retention_seconds: i32,
    pub ttl: i32,
    pub stored_messages: i64,
}

/// One cycle of the retention or eviction job.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetentionRun {
    pub job: String,
    pub cycle: i64,
    pub worker_id: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub affected: i64,
}

/// Sums over the runs of the window.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetentionTotals {
    pub runs: usize,
    pub retention_deleted: i64,
    pub evicted: i64,
}

/// `GET /api/v1/analytics/retention`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Retention {
    pub time_range: TimeRange,
    pub metrics_retention_days: i32,
    pub policies: Vec<RetentionPolicy>,
    pub runs: Vec<RetentionRun>,
    pub totals: RetentionTotals,
}
