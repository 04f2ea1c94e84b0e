//! The reference's Prometheus series (issue 36), beside this broker's own:
//! per-queue gauges over the last complete minute, cluster counters, the
//! live replicas and this process's resident memory. Everything but the
//! memory is read from PostgreSQL at the scrape (`store/admin/activity.rs`),
//! so each replica answers the same figures; what a replica counted reaches
//! PostgreSQL at its next flush (`jobs/activity.rs`).

use prometheus::{GaugeVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

use super::Broker;
use crate::store::ClusterFigures;

/// The `scope` label the reference puts on its cluster-wide series.
const CLUSTER: &str = "cluster";

/// The registered families; refreshed by [`Broker::refresh_reference_series`].
#[derive(Debug)]
pub struct ReferenceSeries {
    push_per_minute: IntGaugeVec,
    pop_per_minute: IntGaugeVec,
    ack_per_minute: IntGaugeVec,
    pop_lag_ms: GaugeVec,
    parked: IntGaugeVec,
    pop_empty_per_minute: IntGaugeVec,
    transactions_per_minute: IntGaugeVec,
    /// `queen_cluster_<name>_total{scope}`, by the name in `queen.cluster_counters`
    /// (or a sum of them, see [`cluster_value`]).
    cluster: Vec<(&'static str, IntCounterVec)>,
    ack_total: IntCounterVec,
    servers: IntGauge,
    rss: IntGauge,
}

/// The plain cluster counters: family name and the counter it shows.
const CLUSTER_FAMILIES: [(&str, &str, &str); 9] = [
    (
        "push_messages",
        "queen_cluster_push_messages_total",
        "messages pushed (through /push and /transaction, duplicates excluded), all replicas",
    ),
    (
        "push_requests",
        "queen_cluster_push_requests_total",
        "push requests that wrote to PostgreSQL, all replicas",
    ),
    (
        "pop_messages",
        "queen_cluster_pop_messages_total",
        "messages handed out by pops, all replicas",
    ),
    (
        "pop_requests",
        "queen_cluster_pop_requests_total",
        "pop requests answered (with messages or empty), all replicas",
    ),
    (
        "ack_messages",
        "queen_cluster_ack_messages_total",
        "acknowledgements applied (every result but refused), all replicas",
    ),
    (
        "ack_requests",
        "queen_cluster_ack_requests_total",
        "ack requests (/ack, /ack/batch), all replicas",
    ),
    (
        "ack_dlq",
        "queen_cluster_dlq_total",
        "messages an ack dead-lettered, all replicas",
    ),
    (
        "db_errors",
        "queen_cluster_db_errors_total",
        "failed database operations (refusals of the SQL logic excluded), all replicas",
    ),
    (
        "transactions",
        "queen_cluster_transactions_total",
        "committed /transaction requests, all replicas",
    ),
];

/// The value of counter `name` in the figures (`ack_messages` is the sum
/// of the applied results).
fn cluster_value(f: &ClusterFigures, name: &str) -> u64 {
    let get = |n: &str| {
        f.counters
            .iter()
            .find(|(k, _)| k == n)
            .map_or(0, |(_, v)| u64::try_from(*v).unwrap_or(0))
    };
    match name {
        "ack_messages" => get("ack_success") + get("ack_failed") + get("ack_dlq"),
        other => get(other),
    }
}

fn register<C: prometheus::core::Collector + Clone + 'static>(registry: &Registry, c: C) -> C {
    if let Err(e) = registry.register(Box::new(c.clone())) {
        tracing::warn!(error = %e, "metric not registered");
    }
    c
}

fn per_queue(registry: &Registry, name: &str, help: &str) -> IntGaugeVec {
    register(
        registry,
        IntGaugeVec::new(Opts::new(name, help), &["queue"]).expect("valid metric"),
    )
}

impl ReferenceSeries {
    pub fn new(registry: &Registry) -> Self {
        Self {
            push_per_minute: per_queue(
                registry,
                "queen_queue_push_messages_per_minute",
                "messages pushed to the queue in the last complete minute, all replicas",
            ),
            pop_per_minute: per_queue(
                registry,
                "queen_queue_pop_messages_per_minute",
                "messages of the queue handed out by pops in the last complete minute, all replicas",
            ),
            ack_per_minute: per_queue(
                registry,
                "queen_queue_ack_per_minute",
                "acknowledgements applied on the queue in the last complete minute, all replicas",
            ),
            pop_lag_ms: register(
                registry,
                GaugeVec::new(
                    Opts::new(
                        "queen_queue_pop_lag_milliseconds",
                        "mean time between push and pop of the messages popped in the last complete minute",
                    ),
                    &["queue"],
                )
                .expect("valid metric"),
            ),
            parked: per_queue(
                registry,
                "queen_queue_parked_consumers",
                "long-poll pops parked on the queue now, all live replicas",
            ),
            pop_empty_per_minute: per_queue(
                registry,
                "queen_queue_pop_empty_per_minute",
                "pops of the queue answered empty in the last complete minute, all replicas",
            ),
            transactions_per_minute: per_queue(
                registry,
                "queen_queue_transactions_per_minute",
                "committed transactions that pushed to or acked on the queue in the last complete minute",
            ),
            cluster: CLUSTER_FAMILIES
                .iter()
                .map(|&(key, name, help)| {
                    let c = IntCounterVec::new(Opts::new(name, help), &["scope"])
                        .expect("valid metric");
                    (key, register(registry, c))
                })
                .collect(),
            ack_total: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "queen_cluster_ack_total",
                        "acknowledgements by result (success, failed, dlq, refused), all replicas",
                    ),
                    &["scope", "result"],
                )
                .expect("valid metric"),
            ),
            servers: register(
                registry,
                IntGauge::new(
                    "queen_servers",
                    "broker processes that reported to PostgreSQL within three stats intervals",
                )
                .expect("valid metric"),
            ),
            rss: register(
                registry,
                IntGauge::new(
                    "queen_process_resident_memory_bytes",
                    "resident memory of this broker process",
                )
                .expect("valid metric"),
            ),
        }
    }

    /// Sets every family from `figures`.
    fn set(&self, figures: &ClusterFigures) {
        let gauges = [
            &self.push_per_minute,
            &self.pop_per_minute,
            &self.ack_per_minute,
            &self.parked,
            &self.pop_empty_per_minute,
            &self.transactions_per_minute,
        ];
        for g in gauges {
            g.reset();
        }
        self.pop_lag_ms.reset();
        for q in &figures.queues {
            let l = [q.queue.as_str()];
            self.push_per_minute
                .with_label_values(&l)
                .set(q.push_messages);
            self.pop_per_minute
                .with_label_values(&l)
                .set(q.pop_messages);
            self.ack_per_minute.with_label_values(&l).set(q.acks);
            self.pop_lag_ms.with_label_values(&l).set(q.pop_lag_ms);
            self.parked.with_label_values(&l).set(q.parked);
            self.pop_empty_per_minute
                .with_label_values(&l)
                .set(q.pop_empty);
            self.transactions_per_minute
                .with_label_values(&l)
                .set(q.transactions);
        }
        // counters only move up: PostgreSQL's totals never go down
        let raise = |c: prometheus::IntCounter, to: u64| c.inc_by(to.saturating_sub(c.get()));
        for (key, family) in &self.cluster {
            raise(
                family.with_label_values(&[CLUSTER]),
                cluster_value(figures, key),
            );
        }
        for (result, key) in [
            ("success", "ack_success"),
            ("failed", "ack_failed"),
            ("dlq", "ack_dlq"),
            ("refused", "ack_refused"),
        ] {
            raise(
                self.ack_total.with_label_values(&[CLUSTER, result]),
                cluster_value(figures, key),
            );
        }
        self.servers.set(figures.servers);
    }
}

impl Broker {
    /// Brings the reference's series up to date from PostgreSQL (left as
    /// they were when it does not answer) and this process's memory; returns
    /// the dead letters stored, when read.
    pub(super) async fn refresh_reference_series(&self) -> Option<i64> {
        let series = &self.reference_series;
        series
            .rss
            .set(i64::try_from(super::status::rss_bytes()).unwrap_or(i64::MAX));
        let max = i64::try_from(self.config.jobs.metrics_queue_series_max).unwrap_or(i64::MAX);
        match self
            .store
            .cluster_figures(max, super::activity::fresh_secs(&self.config))
            .await
        {
            Ok(figures) => {
                series.set(&figures);
                Some(figures.dlq_depth)
            }
            Err(e) => {
                tracing::debug!(error = %e, "reading the cluster figures failed");
                None
            }
        }
    }
}
