//! Streams (`/streams/v1`): registering the SDK's queries, reading their
//! state, and committing cycles (state, sink pushes and the source ack in
//! one PostgreSQL transaction, see `store/streams.rs`).

use std::time::Instant;

use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGaugeVec, Opts, Registry};
use uuid::Uuid;

use super::{Broker, BrokerError, PushItem};
use crate::store::{
    AckDone, CycleAck, CycleError, CycleInput, CycleOutcome, CyclePush, NewMessage, Registration,
    StateFilter, StateMiss, StateOp, StateRow, StreamQueryStats,
};

/// A cycle as the HTTP layer validated it.
#[derive(Debug, Clone)]
pub struct CycleRequest {
    pub query_id: Uuid,
    pub partition_id: Uuid,
    pub state_ops: Vec<StateOp>,
    pub push_items: Vec<PushItem>,
    pub ack: Option<CycleAck>,
    pub release_lease: bool,
}

/// A committed cycle with the transaction ids its pushes were given.
#[derive(Debug, Clone)]
pub struct CycleDone {
    pub outcome: CycleOutcome,
    /// Per push item: (queue, transactionId).
    pub pushes: Vec<(String, String)>,
}

/// Counters of the streams routes.
#[derive(Debug, Clone)]
pub struct StreamMetrics {
    cycles: IntCounterVec,
    duration: Histogram,
    state_ops: IntCounterVec,
    state_rows: IntGaugeVec,
}

impl StreamMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn new(registry: &Registry) -> Self {
        let cycles = IntCounterVec::new(
            Opts::new(
                "queen_streams_cycles_total",
                "stream cycles by outcome (committed, refused, failed)",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        let duration = Histogram::with_opts(
            HistogramOpts::new(
                "queen_streams_cycle_duration_seconds",
                "time to commit one stream cycle, refused ones included",
            )
            .buckets(vec![
                0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
            ]),
        )
        .expect("valid metric");
        let state_ops = IntCounterVec::new(
            Opts::new(
                "queen_streams_state_ops_total",
                "state operations committed by stream cycles (upsert, delete)",
            ),
            &["op"],
        )
        .expect("valid metric");
        let state_rows = IntGaugeVec::new(
            Opts::new(
                "queen_streams_state_rows",
                "state rows stored per stream query (read from the database at scrape)",
            ),
            &["query"],
        )
        .expect("valid metric");
        for c in [
            Box::new(cycles.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(duration.clone()),
            Box::new(state_ops.clone()),
            Box::new(state_rows.clone()),
        ] {
            if let Err(e) = registry.register(c) {
                tracing::warn!(error = %e, "streams metrics not registered");
            }
        }
        Self {
            cycles,
            duration,
            state_ops,
            state_rows,
        }
    }
}

impl Broker {
    /// Registers (or re-registers) a query by name.
    pub async fn register_stream(
        &self,
        name: &str,
        source_queue: &str,
        sink_queue: Option<&str>,
        config_hash: &str,
        reset: bool,
    ) -> Result<Registration, BrokerError> {
        let r = self
            .store
            .register_stream_query(name, source_queue, sink_queue, config_hash, reset)
            .await?;
        if let Registration::Done {
            reset: true,
            cleared,
            ..
        } = &r
        {
            self.streams.state_ops.with_label_values(&["reset"]).inc();
            tracing::info!(query = name, cleared, "stream query reset");
        }
        Ok(r)
    }

    /// Reads state rows of (query, source partition).
    pub async fn stream_state(
        &self,
        query_id: Uuid,
        partition_id: Uuid,
        filter: &StateFilter,
    ) -> Result<Result<Vec<StateRow>, StateMiss>, BrokerError> {
        Ok(self
            .store
            .stream_state(query_id, partition_id, filter)
            .await?)
    }

    /// Registered queries with their state row counts.
    pub async fn stream_queries(&self) -> Result<Vec<StreamQueryStats>, BrokerError> {
        Ok(self.store.stream_queries().await?)
    }

    /// Commits one cycle. `Ok(Err(_))` is a refused cycle (nothing written).
    pub async fn stream_cycle(
        &self,
        req: CycleRequest,
    ) -> Result<Result<CycleDone, crate::store::CycleRefusal>, BrokerError> {
        let mut pushes = Vec::with_capacity(req.push_items.len());
        let mut names = Vec::with_capacity(req.push_items.len());
        for item in req.push_items {
            let encrypt = self.cipher.is_some()
                && self
                    .queue(item.queue.as_str())
                    .await?
                    .is_some_and(|q| q.options.encryption_enabled);
            let message_id = Uuid::now_v7();
            let transaction_id = item
                .transaction_id
                .clone()
                .unwrap_or_else(|| message_id.to_string());
            let (namespace, task) = item.queue.derived_namespace_task();
            names.push((item.queue.as_str().to_owned(), transaction_id.clone()));
            pushes.push(CyclePush {
                queue: item.queue.as_str().to_owned(),
                namespace,
                task,
                message: NewMessage {
                    queue_id: Uuid::nil(),
                    partition: item.partition.as_str().to_owned(),
                    message_id,
                    transaction_id,
                    trace_id: item.trace_id,
                    payload: self.seal(encrypt, &item.payload)?,
                    producer_sub: item.producer_sub,
                },
            });
        }
        let input = CycleInput {
            query_id: req.query_id,
            partition_id: req.partition_id,
            state_ops: req.state_ops,
            pushes,
            ack: req.ack,
            release_lease: req.release_lease,
        };
        let started = Instant::now();
        let result = self.store.stream_cycle(&input).await;
        self.streams
            .duration
            .observe(started.elapsed().as_secs_f64());
        match result {
            Ok(outcome) => {
                self.streams.cycles.with_label_values(&["committed"]).inc();
                let deletes = input.state_ops.iter().filter(|o| o.value.is_none()).count();
                let upserts = input.state_ops.len() - deletes;
                self.streams
                    .state_ops
                    .with_label_values(&["upsert"])
                    .inc_by(upserts as u64);
                self.streams
                    .state_ops
                    .with_label_values(&["delete"])
                    .inc_by(deletes as u64);
                for p in &input.pushes {
                    self.announce_messages(&p.queue, &p.message.partition);
                }
                if let Some(ack) = &input.ack {
                    self.metrics.acks.with_label_values(&["success"]).inc();
                    if let Some(AckDone {
                        lease_released: true,
                        partition_name: Some(partition),
                    }) = &outcome.acked
                    {
                        {
                            self.announce_partition_free(
                                &outcome.source_queue,
                                partition,
                                &ack.group,
                            );
                        }
                    }
                }
                Ok(Ok(CycleDone {
                    outcome,
                    pushes: names,
                }))
            }
            Err(CycleError::Refused(r)) => {
                self.streams.cycles.with_label_values(&["refused"]).inc();
                Ok(Err(r))
            }
            Err(CycleError::Store(e)) => {
                self.streams.cycles.with_label_values(&["failed"]).inc();
                Err(e.into())
            }
        }
    }

    /// Brings the state-rows gauge up to date (at a Prometheus scrape).
    pub(super) async fn refresh_stream_gauges(&self) {
        if let Ok(queries) = self.store.stream_queries().await {
            self.streams.state_rows.reset();
            for q in queries {
                self.streams
                    .state_rows
                    .with_label_values(&[q.query.name.as_str()])
                    .set(q.state_rows);
            }
        }
    }
}
