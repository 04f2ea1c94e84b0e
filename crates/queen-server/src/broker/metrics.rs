//! Counters of this replica, exposed as JSON (`/metrics`) and in the
//! Prometheus text format (`/metrics/prometheus`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

/// Process-wide counters and the registry that exports them.
#[derive(Debug)]
pub struct Metrics {
    pub registry: Registry,
    pub started: Instant,
    pub http_requests: IntCounter,
    pub pushed: IntCounter,
    pub popped: IntCounter,
    pub acks: IntCounterVec,
    pub uptime: IntGauge,
    pub pool_size: IntGauge,
    pub pool_idle: IntGauge,
    pub pool_active: IntGauge,
    pub pool_waiting: IntGauge,
    pub parked_queues: IntGauge,
    pub push_maintenance: IntGauge,
    pub pop_maintenance: IntGauge,
    /// `queen_dlq_depth{scope="cluster"}`, the reference's label.
    pub dlq_depth: prometheus::IntGaugeVec,
    pub dlq_depth_by_queue: prometheus::IntGaugeVec,
    /// Messages passed over for their queue's ttl and not dead-lettered.
    pub expired_by_queue: prometheus::IntGaugeVec,
    /// Disk spool: records and bytes waiting, entries in `failed/`.
    pub spool_records: IntGauge,
    pub spool_bytes: IntGauge,
    pub spool_failed: IntGauge,
    /// Disk spool: records accepted, and records replayed into PostgreSQL.
    pub spool_buffered: IntCounter,
    pub spool_drained: IntCounter,
    /// Hinted partitions wildcard pops found drained (see `broker/recent.rs`).
    pub pop_hints_drained: IntCounter,
    pub pop_walks: IntCounter,
    pub pop_discoveries: IntCounter,
    /// Pops and acks answered by their one-statement path (`op` = pop | ack).
    pub consume_statement: prometheus::IntCounterVec,
    /// Per mesh peer: connected (0/1), hints sent, dropped, reconnects.
    pub mesh_peer: prometheus::IntGaugeVec,
    /// 1 for the mesh authentication mode in force.
    pub mesh_auth: prometheus::IntGaugeVec,
    /// Mesh connections refused or cut, by reason (`mesh/refusal.rs`).
    pub mesh_refused: IntCounterVec,
    rate_window: Mutex<RateWindow>,
}

/// Throughput of this replica, per second.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rates {
    pub pushed_per_second: f64,
    pub popped_per_second: f64,
    pub acked_per_second: f64,
}

#[derive(Debug)]
struct RateWindow {
    at: Instant,
    pushed: u64,
    popped: u64,
    acked: u64,
    rates: Rates,
}

/// Rates are recomputed at most this often, over the time since the last computation.
const RATE_WINDOW: Duration = Duration::from_secs(5);

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("valid metric name");
    registry
        .register(Box::new(c.clone()))
        .expect("unique metric");
    c
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("valid metric name");
    registry
        .register(Box::new(g.clone()))
        .expect("unique metric");
    g
}

impl Default for Metrics {
    fn default() -> Self {
        let registry = Registry::new();
        let acks = IntCounterVec::new(
            Opts::new(
                "queen_ack_total",
                "acknowledgements applied by this replica",
            ),
            &["result"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(acks.clone()))
            .expect("unique metric");
        let consume_statement = IntCounterVec::new(
            Opts::new(
                "queen_consume_statement_total",
                "pops and acks answered by their one-statement path (the rest run queen.pop_queue or queen.ack_batch)",
            ),
            &["op"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(consume_statement.clone()))
            .expect("unique metric");
        let dlq_depth = prometheus::IntGaugeVec::new(
            Opts::new("queen_dlq_depth", "dead letters stored in the cluster"),
            &["scope"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(dlq_depth.clone()))
            .expect("unique metric");
        let dlq_depth_by_queue = prometheus::IntGaugeVec::new(
            Opts::new("queen_dlq_depth_by_queue", "dead letters stored per queue"),
            &["queue"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(dlq_depth_by_queue.clone()))
            .expect("unique metric");
        let expired_by_queue = prometheus::IntGaugeVec::new(
            Opts::new(
                "queen_messages_expired",
                "messages passed over for their queue's ttl and not dead-lettered, per queue (the most any group passed over, summed over partitions)",
            ),
            &["queue"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(expired_by_queue.clone()))
            .expect("unique metric");
        let mesh_peer = prometheus::IntGaugeVec::new(
            Opts::new(
                "queen_mesh_peer",
                "mesh peer state: connected (0/1), sent, dropped, reconnects",
            ),
            &["peer", "stat"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(mesh_peer.clone()))
            .expect("unique metric");
        let mesh_auth = prometheus::IntGaugeVec::new(
            Opts::new(
                "queen_mesh_auth_mode",
                "mesh authentication mode in force (1)",
            ),
            &["mode"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(mesh_auth.clone()))
            .expect("unique metric");
        let mesh_refused = IntCounterVec::new(
            Opts::new(
                "queen_mesh_refused_total",
                "mesh connections refused or cut by the listener, by reason",
            ),
            &["reason"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(mesh_refused.clone()))
            .expect("unique metric");
        Self {
            mesh_peer,
            mesh_auth,
            mesh_refused,
            started: Instant::now(),
            http_requests: counter(
                &registry,
                "queen_http_requests_total",
                "HTTP requests served",
            ),
            pushed: counter(
                &registry,
                "queen_push_messages_total",
                "messages appended by this replica",
            ),
            popped: counter(
                &registry,
                "queen_pop_messages_total",
                "messages delivered by this replica",
            ),
            acks,
            uptime: gauge(
                &registry,
                "queen_uptime_seconds",
                "seconds since this replica started",
            ),
            pool_size: gauge(
                &registry,
                "queen_db_pool_size",
                "largest number of database connections",
            ),
            pool_idle: gauge(&registry, "queen_db_pool_idle", "idle pooled connections"),
            pool_active: gauge(&registry, "queen_db_pool_active", "connections in use"),
            pool_waiting: gauge(
                &registry,
                "queen_db_pool_waiting",
                "requests waiting for a connection",
            ),
            parked_queues: gauge(
                &registry,
                "queen_long_poll_parked_queues",
                "queues with parked long polls",
            ),
            push_maintenance: gauge(
                &registry,
                "queen_maintenance_mode_enabled",
                "1 when push maintenance mode is on",
            ),
            pop_maintenance: gauge(
                &registry,
                "queen_pop_maintenance_mode_enabled",
                "1 when pop maintenance mode is on",
            ),
            dlq_depth,
            dlq_depth_by_queue,
            expired_by_queue,
            spool_records: gauge(
                &registry,
                "queen_spool_records",
                "pushed records waiting in the disk spool",
            ),
            spool_bytes: gauge(
                &registry,
                "queen_spool_bytes",
                "bytes of disk spool segment files",
            ),
            spool_failed: gauge(
                &registry,
                "queen_spool_failed_records",
                "spooled records PostgreSQL refused, and corrupted segments, kept in failed/",
            ),
            spool_buffered: counter(
                &registry,
                "queen_spool_buffered_total",
                "pushed records answered buffered (written to the disk spool)",
            ),
            spool_drained: counter(
                &registry,
                "queen_spool_drained_total",
                "spooled records replayed into PostgreSQL",
            ),
            pop_hints_drained: counter(
                &registry,
                "queen_pop_hints_drained_total",
                "hinted partitions a wildcard pop found drained (they leave the group's candidates until written again)",
            ),
            pop_discoveries: counter(
                &registry,
                "queen_pop_discoveries_total",
                "lookups of a queue's partitions with work for a consumer group, after a walk found work the wildcard pops' list did not know",
            ),
            pop_walks: counter(
                &registry,
                "queen_pop_walks_total",
                "wildcard pops that walked the queue's partitions in the database (their hints did not fill them, or none were given)",
            ),
            consume_statement,
            registry,
            rate_window: Mutex::new(RateWindow {
                at: Instant::now(),
                pushed: 0,
                popped: 0,
                acked: 0,
                rates: Rates::default(),
            }),
        }
    }
}

impl Metrics {
    /// Acknowledgements counted so far, all results.
    pub fn acked_total(&self) -> u64 {
        ["success", "dlq", "failed"]
            .iter()
            .map(|r| self.acks.with_label_values(&[r]).get())
            .sum()
    }

    /// Push, pop and ack rates over the last few seconds.
    pub fn rates(&self) -> Rates {
        let mut w = self.rate_window.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = w.at.elapsed();
        if elapsed >= RATE_WINDOW || w.rates.pushed_per_second == 0.0 {
            let secs = elapsed.as_secs_f64().max(0.001);
            let (pushed, popped, acked) =
                (self.pushed.get(), self.popped.get(), self.acked_total());
            w.rates = Rates {
                pushed_per_second: (pushed - w.pushed) as f64 / secs,
                popped_per_second: (popped - w.popped) as f64 / secs,
                acked_per_second: (acked - w.acked) as f64 / secs,
            };
            if elapsed >= RATE_WINDOW {
                *w = RateWindow {
                    at: Instant::now(),
                    pushed,
                    popped,
                    acked,
                    rates: w.rates,
                };
            }
        }
        w.rates
    }
}

/// Cluster-wide flags, cached from PostgreSQL (the reconcile loop re-reads them).
#[derive(Debug, Default)]
pub struct Flags {
    pub push_maintenance: AtomicBool,
    pub pop_maintenance: AtomicBool,
    /// What set each flag, and the stored value last read (`broker/maintenance.rs`).
    pub origins: super::maintenance::Origins,
}

impl Flags {
    pub fn push_maintenance(&self) -> bool {
        self.push_maintenance.load(Ordering::Relaxed)
    }

    pub fn pop_maintenance(&self) -> bool {
        self.pop_maintenance.load(Ordering::Relaxed)
    }
}
