//! Response bodies of the routes that report state: health, metrics,
//! resources, the dashboard's status and analytics, maintenance modes and the
//! mesh view. Numbers the reference always answers as `0` are integers here
//! too (`"processed": 0`, `"statsAge": 0`), rates are floats.

use std::collections::BTreeMap;

use serde::Serialize;

/// Message counts over a set of partitions.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageTotals {
    pub total: i64,
    pub pending: i64,
    pub processing: i64,
    pub completed: i64,
    /// Always 0: failed messages are retried or dead-lettered.
    pub failed: i64,
    pub dead_letter: i64,
    /// Passed over for the queue's ttl and not dead-lettered.
    pub expired: i64,
}

/// Total, pending and leased messages (queue lists).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct QueueMessageCounts {
    pub total: i64,
    pub pending: i64,
    pub processing: i64,
}

/// Total and pending messages (namespace and task lists).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PendingCounts {
    pub total: i64,
    pub pending: i64,
}

/// `GET /health` (snake_case keys, as the reference).
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    pub status: &'static str,
    pub database: &'static str,
    /// Why the database cannot be used, when the server said so (it
    /// refused the credentials); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_error: Option<String>,
    pub server: &'static str,
    pub version: &'static str,
    /// The git commit the binary was built from (`unknown` outside a checkout).
    pub commit: &'static str,
    pub worker_id: String,
    pub shared_state: SharedStateFlag,
    pub queen: HealthWorker,
}

/// `shared_state` of the health answer: whether the mesh runs and, when it
/// does, how many of its peers are connected now.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SharedStateFlag {
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers_connected: Option<usize>,
}

/// `queen` of the health answer.
#[derive(Debug, Clone, Serialize)]
pub struct HealthWorker {
    pub worker_id: String,
    pub status: &'static str,
}

/// `GET /metrics`.
#[derive(Debug, Clone, Serialize)]
pub struct Metrics {
    pub uptime: u64,
    pub requests: RequestMetrics,
    pub messages: MessageMetrics,
    pub database: PoolMetrics,
    pub memory: MemoryMetrics,
    pub cpu: CpuMetrics,
    /// Present when the mesh runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh: Option<MeshGuard>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct RequestMetrics {
    pub total: u64,
    /// Always 0.
    pub rate: i64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct MessageMetrics {
    pub total: u64,
    pub rate: f64,
    pub popped: u64,
    pub acked: u64,
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolMetrics {
    pub pool_size: usize,
    pub open_connections: usize,
    pub idle_connections: usize,
    pub waiting_requests: usize,
}

/// Memory of the process; only `rss` is measured, the rest are the
/// reference's Node.js fields, answered 0.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryMetrics {
    pub rss: u64,
    pub heap_total: i64,
    pub heap_used: i64,
    pub external: i64,
    pub array_buffers: i64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct CpuMetrics {
    pub user: i64,
    pub system: i64,
}

/// `avg`, `median`, `min`, `max` of a set of lags (all 0 when empty).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Spread {
    pub avg: i64,
    pub median: i64,
    pub min: i64,
    pub max: i64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct LagSpread {
    pub time: Spread,
    pub offset: Spread,
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Throughput {
    pub ingested_per_second: f64,
    pub processed_per_second: f64,
}

/// `GET /api/v1/resources/overview`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesOverview {
    pub queues: usize,
    pub partitions: i64,
    pub namespaces: usize,
    pub tasks: usize,
    pub messages: MessageTotals,
    pub lag: LagSpread,
    pub throughput: Throughput,
    pub timestamp: String,
    pub stats_age: i64,
}

/// A queue in the queue lists (`/resources/queues`, `/status/queues`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueSummary {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub task: String,
    pub created_at: String,
    pub partitions: i64,
    pub messages: QueueMessageCounts,
}

/// `GET /api/v1/resources/queues`.
#[derive(Debug, Clone, Serialize)]
pub struct QueueList {
    pub queues: Vec<QueueSummary>,
}

/// A partition in `GET /api/v1/resources/queues/:queue`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionResource {
    pub id: Option<String>,
    pub name: Option<String>,
    pub created_at: Option<String>,
    pub stats: MessageTotals,
    pub oldest_message: Option<String>,
    pub newest_message: Option<String>,
}

/// `GET /api/v1/resources/queues/:queue`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueResource {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub task: String,
    pub created_at: String,
    pub partitions: Vec<PartitionResource>,
    pub totals: MessageTotals,
}

/// A namespace or a task with its queues (`/resources/namespaces`, `/resources/tasks`).
#[derive(Debug, Clone, Serialize)]
pub struct QueueGroupSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    pub queues: i64,
    pub partitions: i64,
    pub messages: PendingCounts,
}

/// `GET /api/v1/resources/namespaces`.
#[derive(Debug, Clone, Serialize)]
pub struct Namespaces {
    pub namespaces: Vec<QueueGroupSummary>,
}

/// `GET /api/v1/resources/tasks`.
#[derive(Debug, Clone, Serialize)]
pub struct Tasks {
    pub tasks: Vec<QueueGroupSummary>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TimeRange {
    pub from: String,
    pub to: String,
}

/// One minute of `GET /api/v1/status`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThroughputPoint {
    pub timestamp: String,
    pub ingested: i64,
    /// Always 0: processing is not recorded per minute.
    pub processed: i64,
    pub ingested_per_second: f64,
    pub processed_per_second: i64,
}

/// A queue in `GET /api/v1/status`.
#[derive(Debug, Clone, Serialize)]
pub struct StatusQueue {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub task: String,
    pub partitions: i64,
    pub messages: MessageTotals,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct LeaseCount {
    pub active: i64,
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterCount {
    pub total_messages: i64,
}

/// This replica's rates.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerRates {
    pub worker_id: String,
    pub pushed_per_second: f64,
    pub popped_per_second: f64,
    pub acked_per_second: f64,
}

/// `GET /api/v1/status` (and `/analytics/queue-ops`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusOverview {
    pub time_range: TimeRange,
    pub bucket_minutes: i64,
    pub point_count: usize,
    pub throughput: Vec<ThroughputPoint>,
    pub queues: Vec<StatusQueue>,
    pub messages: MessageTotals,
    pub leases: LeaseCount,
    pub dead_letter_queue: DeadLetterCount,
    pub workers: Vec<WorkerRates>,
    /// Always empty.
    pub errors: BTreeMap<String, i64>,
    pub stats_age: i64,
}

/// `GET /api/v1/status/queues`.
#[derive(Debug, Clone, Serialize)]
pub struct StatusQueues {
    pub queues: Vec<QueueSummary>,
    pub pagination: crate::admin::Pagination,
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusQueueConfig {
    pub lease_time: i32,
    pub retry_limit: i32,
    pub retry_delay: i32,
    pub retry_backoff: f64,
    pub retry_delay_max: i32,
    pub ttl: i32,
    pub max_queue_size: i32,
    pub dead_letter_queue: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusQueueInfo {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub task: String,
    pub priority: i32,
    pub created_at: String,
    pub config: StatusQueueConfig,
    /// Every option of the queue, as `POST /api/v1/configure` echoes them.
    pub options: crate::QueueOptions,
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CursorCounts {
    pub total_consumed: i64,
    pub batches_consumed: i64,
}

/// A partition in `GET /api/v1/status/queues/:queue`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusPartition {
    pub id: Option<String>,
    pub name: Option<String>,
    pub created_at: Option<String>,
    pub messages: MessageTotals,
    pub stats: MessageTotals,
    pub cursor: CursorCounts,
    pub last_activity: Option<String>,
    pub oldest_message: Option<String>,
    pub newest_message: Option<String>,
}

/// The totals of a queue, with themselves once more under `messages`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct StatusQueueTotals {
    #[serde(flatten)]
    pub totals: MessageTotals,
    pub messages: MessageTotals,
}

/// `GET /api/v1/status/queues/:queue`.
#[derive(Debug, Clone, Serialize)]
pub struct StatusQueueDetail {
    pub queue: StatusQueueInfo,
    pub partitions: Vec<StatusPartition>,
    pub totals: StatusQueueTotals,
}

/// A message of `GET /api/v1/status/queues/:queue/messages`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusMessage {
    pub id: String,
    pub transaction_id: String,
    pub partition_id: String,
    pub queue_path: String,
    pub queue: String,
    pub partition: String,
    pub status: String,
    pub created_at: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct DataPoint {
    pub timestamp: String,
    pub messages: i64,
}

/// `GET /api/v1/status/analytics`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Analytics {
    pub data_points: Vec<DataPoint>,
    pub interval: String,
    pub from: String,
    pub to: String,
}

/// `GET /api/v1/status/buffers`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Buffers {
    pub pending: u64,
    pub failed: u64,
    pub db_healthy: bool,
    pub worker: String,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct PoolCounts {
    pub size: usize,
    pub open: usize,
    pub idle: usize,
    pub waiting: usize,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemPoint {
    pub timestamp: String,
    #[serde(flatten)]
    pub rates: WorkerRates,
    pub db_pool: PoolCounts,
}

/// `GET /api/v1/analytics/system-metrics`: this replica now.
#[derive(Debug, Clone, Serialize)]
pub struct SystemMetrics {
    pub points: Vec<SystemPoint>,
    pub process: crate::system::ProcessFigures,
    pub spool: BufferStats,
}

/// `GET /api/v1/analytics/postgres-stats`.
#[derive(Debug, Clone, Serialize)]
pub struct PostgresStats {
    pub pool: PoolCounts,
    pub messages: MessageTotals,
    pub partitions: i64,
    pub database: crate::system::DatabaseHealth,
}

/// The disk spool's numbers in the maintenance answers.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BufferStats {
    pub pending: u64,
    pub failed: u64,
    pub bytes: u64,
    pub max_bytes: u64,
    pub segments: u64,
    pub drained: u64,
    pub writable: bool,
    pub database_reachable: bool,
    pub directory: String,
}

/// `GET/POST /api/v1/system/maintenance`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PushMaintenance {
    pub maintenance_mode: bool,
    pub pop_maintenance_mode: bool,
    pub buffered_messages: u64,
    pub buffer_healthy: bool,
    pub buffer_stats: BufferStats,
    /// Present on the answer to a switch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<&'static str>,
    /// What this replica applies, what PostgreSQL holds, and what set it.
    pub effective: MaintenanceModes,
}

/// The effective state of both maintenance modes on this replica.
#[derive(Debug, Clone, Serialize)]
pub struct MaintenanceModes {
    pub push: MaintenanceModeState,
    pub pop: MaintenanceModeState,
}

/// One maintenance mode as this replica applies it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceModeState {
    /// What the replica does right now (the top-level flag says the same).
    pub enabled: bool,
    /// The flag in PostgreSQL; `null` when it could not be read.
    pub stored: Option<bool>,
    /// What set the applied value: `database` (read by the reconcile loop or
    /// this route), `api` (a switch on this replica), `mesh` (a peer's frame),
    /// or `default` (nothing yet).
    pub source: &'static str,
    /// For `mesh`: the sending peer, `server_id (address)`; the id is only a
    /// claim in the base mesh mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// When the source set it (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// `GET/POST /api/v1/system/maintenance/pop`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PopMaintenance {
    pub pop_maintenance_mode: bool,
    pub message: &'static str,
    pub effective: MaintenanceModes,
}

/// `POST /api/v1/stats/refresh`.
#[derive(Debug, Clone, Serialize)]
pub struct StatsRefreshed {
    pub success: bool,
    pub message: &'static str,
}

/// A mesh peer as this replica sees it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MeshPeer {
    pub addr: String,
    pub connected: bool,
    pub sent: u64,
    pub dropped: u64,
    pub reconnects: u64,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct MeshInbound {
    pub open: usize,
    pub accepted: u64,
    pub rejected: u64,
    pub frames: u64,
}

/// The mesh listener's pre-authentication numbers (shared-state and `/metrics`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MeshGuard {
    /// Accepted connections not authenticated yet.
    pub unauthenticated: usize,
    /// Refused or cut connections since start, by reason.
    pub refused: std::collections::BTreeMap<&'static str, u64>,
}

/// `GET /api/v1/system/shared-state`.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum SharedState {
    #[serde(rename_all = "camelCase")]
    Off {
        enabled: bool,
        server_id: String,
        auth: &'static str,
        reason: &'static str,
        peers: Vec<MeshPeer>,
    },
    #[serde(rename_all = "camelCase")]
    On {
        enabled: bool,
        server_id: String,
        auth: &'static str,
        mesh_host: String,
        mesh_port: u16,
        listening: bool,
        heartbeat_ms: u64,
        peers_connected: usize,
        peers: Vec<MeshPeer>,
        inbound: MeshInbound,
        guard: MeshGuard,
    },
}

#[cfg(test)]
mod tests;
