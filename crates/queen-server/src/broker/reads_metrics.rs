//! Counters of the issue-21 surfaces (reads by offset, discovery, depth,
//! dead-letter retry, ephemeral queues), registered in the broker's registry.

use prometheus::{IntCounter, IntCounterVec, Opts, Registry};

/// Counters of reads and ephemeral queues.
#[derive(Debug)]
pub struct ReadsMetrics {
    /// `POST /api/v1/fetch` calls and the records they returned.
    pub fetch_calls: IntCounter,
    pub fetch_records: IntCounter,
    /// `POST /api/v1/partitions/changed` pages.
    pub changed_pages: IntCounter,
    /// `GET …/depth` answers.
    pub depth_reads: IntCounter,
    /// Dead-letter retries by result (`moved`, `duplicate`, `gone`).
    pub dlq_retries: IntCounterVec,
    /// Ephemeral messages accepted, handed out, and acks by outcome.
    pub eph_pushed: IntCounter,
    pub eph_popped: IntCounter,
    pub eph_acks: IntCounterVec,
    /// Ephemeral pushes refused (`queue_full`) and messages evicted to make room.
    pub eph_refused: IntCounter,
    pub eph_evicted: IntCounter,
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("valid metric name");
    if let Err(e) = registry.register(Box::new(c.clone())) {
        tracing::warn!(error = %e, metric = name, "metric not registered");
    }
    c
}

fn counter_vec(registry: &Registry, name: &str, help: &str, label: &str) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid metric name");
    if let Err(e) = registry.register(Box::new(c.clone())) {
        tracing::warn!(error = %e, metric = name, "metric not registered");
    }
    c
}

impl ReadsMetrics {
    pub fn new(registry: &Registry) -> Self {
        Self {
            fetch_calls: counter(
                registry,
                "queen_fetch_calls_total",
                "POST /api/v1/fetch calls answered",
            ),
            fetch_records: counter(
                registry,
                "queen_fetch_records_total",
                "records returned by reads by offset",
            ),
            changed_pages: counter(
                registry,
                "queen_partitions_changed_pages_total",
                "partition discovery pages answered",
            ),
            depth_reads: counter(
                registry,
                "queen_queue_depth_reads_total",
                "queue depth answers",
            ),
            dlq_retries: counter_vec(
                registry,
                "queen_dlq_retries_total",
                "dead-letter retries by result",
                "result",
            ),
            eph_pushed: counter(
                registry,
                "queen_ephemeral_pushed_total",
                "messages accepted by ephemeral queues",
            ),
            eph_popped: counter(
                registry,
                "queen_ephemeral_popped_total",
                "messages handed out by ephemeral queues (redeliveries included)",
            ),
            eph_acks: counter_vec(
                registry,
                "queen_ephemeral_acks_total",
                "ephemeral acks by outcome",
                "outcome",
            ),
            eph_refused: counter(
                registry,
                "queen_ephemeral_refused_total",
                "ephemeral pushes refused because the queue was full",
            ),
            eph_evicted: counter(
                registry,
                "queen_ephemeral_evicted_total",
                "ephemeral messages evicted from the head by policy dropOldest",
            ),
        }
    }
}
