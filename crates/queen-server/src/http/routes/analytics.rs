//! `GET /api/v1/analytics/{queue-ops, queue-lag, worker-metrics,
//! queue-parked-replicas, retention}`: time series over the metrics history
//! that the stats job writes (`jobs/stats.rs`), bucketed by `interval`.
//!
//! Parameters: `from`, `to` (ISO-8601; default the last hour), `interval`
//! (`minute` (default), `hour`, `day`, or a width such as `10s`, `5m`, `2h`,
//! or plain seconds), `queue`, `namespace`, `task` (queue-ops, queue-lag),
//! and for the per-replica series `workerId` / `hostname`. A window of more than [`MAX_BUCKETS`] buckets is refused.

use std::collections::BTreeMap;

use axum::extract::{Query, State};
use axum::Json;
use chrono::{DateTime, Duration, Utc};
use queen_proto::analytics::{
    LagPoint, OpsCounts, OpsPoint, ParkedPoint, QueueLag, QueueLagSeries, QueueOps, QueueOpsSeries,
    QueueParkedReplicas, QueueParkedSeries, Retention, RetentionPolicy, RetentionRun,
    RetentionTotals, WorkerCounts, WorkerHealthPoint, WorkerMetrics, WorkerPoint, WorkerSeries,
};
use queen_proto::status::TimeRange;
use queen_proto::time::format_millis;

use crate::app::AppState;
use crate::http::body::{query_str, query_time, Query as Params};
use crate::http::error::ApiError;
use crate::store::SeriesQuery;

/// Most buckets one answer may span.
pub const MAX_BUCKETS: i64 = 10_000;
/// Widest bucket: a week.
const MAX_BUCKET_SECS: i64 = 7 * 86_400;

/// Parses `interval` into a bucket width in seconds.
pub fn bucket_seconds(interval: &str) -> Option<i64> {
    let s = interval.trim();
    let named = match s {
        "second" => Some(1),
        "minute" => Some(60),
        "hour" => Some(3_600),
        "day" => Some(86_400),
        _ => None,
    };
    if named.is_some() {
        return named;
    }
    let (digits, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: i64 = digits.parse().ok()?;
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return None,
    };
    let secs = n.checked_mul(mult)?;
    (1..=MAX_BUCKET_SECS).contains(&secs).then_some(secs)
}

struct Window {
    query: SeriesQuery,
    interval: String,
    range: TimeRange,
}

impl Window {
    fn per_second(&self, n: i64) -> f64 {
        n as f64 / f64::from(self.query.bucket_secs)
    }
}

fn window(q: &Params) -> Result<Window, ApiError> {
    let to = query_time(q, "to")?.unwrap_or_else(Utc::now);
    let from = query_time(q, "from")?.unwrap_or(to - Duration::hours(1));
    if from > to {
        return Err(ApiError::bad_request("from must not be after to"));
    }
    let interval = query_str(q, "interval").unwrap_or("minute").to_owned();
    let secs = bucket_seconds(&interval).ok_or_else(|| {
        ApiError::bad_request(
            "interval must be minute, hour, day, or a width such as 10s, 5m, 2h (at most 7d)",
        )
    })?;
    if (to - from).num_seconds() / secs > MAX_BUCKETS {
        return Err(ApiError::bad_request(format!(
            "the window spans more than {MAX_BUCKETS} buckets: widen interval or narrow from/to"
        )));
    }
    let server_id = query_str(q, "workerId")
        .or_else(|| query_str(q, "hostname"))
        .map(str::to_owned);
    Ok(Window {
        query: SeriesQuery {
            from,
            to,
            bucket_secs: secs as i32,
            queue: query_str(q, "queue").map(str::to_owned),
            namespace: query_str(q, "namespace").map(str::to_owned),
            task: query_str(q, "task").map(str::to_owned),
            server_id,
        },
        interval,
        range: TimeRange {
            from: format_millis(from),
            to: format_millis(to),
        },
    })
}

fn ts(t: DateTime<Utc>) -> String {
    format_millis(t)
}

pub async fn queue_ops(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<QueueOps>, ApiError> {
    let w = window(&q)?;
    let rows = app.broker.queue_ops(&w.query).await?;
    let mut by_queue: BTreeMap<String, QueueOpsSeries> = BTreeMap::new();
    let mut totals = OpsCounts::default();
    for r in rows {
        let counts = OpsCounts {
            pushed: r.pushed,
            popped: r.popped,
            acked: r.acked,
            dead_lettered: r.dead_lettered,
        };
        add_ops(&mut totals, counts);
        let series = by_queue
            .entry(r.queue.clone())
            .or_insert_with(|| QueueOpsSeries {
                queue: r.queue.clone(),
                points: Vec::new(),
                totals: OpsCounts::default(),
            });
        add_ops(&mut series.totals, counts);
        series.points.push(OpsPoint {
            timestamp: ts(r.bucket),
            counts,
            pushed_per_second: w.per_second(r.pushed),
            popped_per_second: w.per_second(r.popped),
            acked_per_second: w.per_second(r.acked),
        });
    }
    Ok(Json(QueueOps {
        time_range: w.range,
        interval: w.interval,
        bucket_seconds: w.query.bucket_secs,
        queues: by_queue.into_values().collect(),
        totals,
    }))
}

fn add_ops(into: &mut OpsCounts, c: OpsCounts) {
    into.pushed += c.pushed;
    into.popped += c.popped;
    into.acked += c.acked;
    into.dead_lettered += c.dead_lettered;
}

pub async fn queue_lag(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<QueueLag>, ApiError> {
    let w = window(&q)?;
    let rows = app.broker.queue_lag(&w.query).await?;
    let mut by_queue: BTreeMap<String, Vec<LagPoint>> = BTreeMap::new();
    for r in rows {
        by_queue.entry(r.queue).or_default().push(LagPoint {
            timestamp: ts(r.bucket),
            lag_seconds: r.lag_seconds,
            avg_lag_seconds: r.avg_lag_seconds,
            offset_lag: r.offset_lag,
            pending: r.pending,
            processing: r.processing,
        });
    }
    let queues = by_queue
        .into_iter()
        .map(|(queue, points)| QueueLagSeries {
            queue,
            current: points.last().cloned(),
            points,
        })
        .collect();
    Ok(Json(QueueLag {
        time_range: w.range,
        interval: w.interval,
        bucket_seconds: w.query.bucket_secs,
        queues,
    }))
}

pub async fn worker_metrics(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<WorkerMetrics>, ApiError> {
    let w = window(&q)?;
    let rows = app.broker.worker_metrics(&w.query).await?;
    let health = app.broker.worker_health(&w.query).await?;
    let counts: BTreeMap<(&str, DateTime<Utc>), WorkerCounts> = rows
        .iter()
        .map(|r| {
            let c = WorkerCounts {
                pushed: r.pushed,
                popped: r.popped,
                acked: r.acked,
            };
            ((r.server_id.as_str(), r.bucket), c)
        })
        .collect();
    let time_series = health
        .iter()
        .map(|h| {
            let c = counts
                .get(&(h.server_id.as_str(), h.bucket))
                .copied()
                .unwrap_or_default();
            WorkerHealthPoint {
                timestamp: ts(h.bucket),
                hostname: h.server_id.clone(),
                worker_id: h.server_id.clone(),
                avg_event_loop_lag_ms: h.loop_lag_avg_ms,
                max_event_loop_lag_ms: h.loop_lag_max_ms,
                avg_cpu_percent: h.cpu_avg_percent,
                max_cpu_percent: h.cpu_max_percent,
                max_rss_bytes: h.rss_max_bytes,
                db_pool_size: h.pool_size,
                db_pool_active: h.pool_active_max,
                db_connections: h.pool_open_max,
                db_pool_waiting: h.pool_waiting_max,
                spool_pending: h.spool_pending_max,
                push_message_count: c.pushed,
                pop_message_count: c.popped,
                ack_message_count: c.acked,
                samples: h.samples,
            }
        })
        .collect();
    let mut by_worker: BTreeMap<String, WorkerSeries> = BTreeMap::new();
    for r in rows {
        let series = by_worker
            .entry(r.server_id.clone())
            .or_insert_with(|| WorkerSeries {
                worker_id: r.server_id.clone(),
                hostname: r.server_id.clone(),
                last_seen: ts(r.last_seen),
                points: Vec::new(),
                totals: WorkerCounts::default(),
            });
        series.last_seen = ts(r.last_seen);
        series.totals.pushed += r.pushed;
        series.totals.popped += r.popped;
        series.totals.acked += r.acked;
        series.points.push(WorkerPoint {
            timestamp: ts(r.bucket),
            counts: WorkerCounts {
                pushed: r.pushed,
                popped: r.popped,
                acked: r.acked,
            },
            pushed_per_second: w.per_second(r.pushed),
            popped_per_second: w.per_second(r.popped),
            acked_per_second: w.per_second(r.acked),
            samples: r.samples,
        });
    }
    Ok(Json(WorkerMetrics {
        time_range: w.range,
        interval: w.interval,
        bucket_seconds: w.query.bucket_secs,
        workers: by_worker.into_values().collect(),
        time_series,
    }))
}

pub async fn queue_parked_replicas(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<QueueParkedReplicas>, ApiError> {
    let w = window(&q)?;
    let rows = app.broker.parked_replicas(&w.query).await?;
    let mut by_queue: BTreeMap<String, QueueParkedSeries> = BTreeMap::new();
    for r in rows {
        let series = by_queue
            .entry(r.queue.clone())
            .or_insert_with(|| QueueParkedSeries {
                queue: r.queue.clone(),
                points: Vec::new(),
                max_replicas: 0,
            });
        series.max_replicas = series.max_replicas.max(r.replicas.len());
        series.points.push(ParkedPoint {
            timestamp: ts(r.bucket),
            count: r.replicas.len(),
            replicas: r.replicas,
        });
    }
    Ok(Json(QueueParkedReplicas {
        time_range: w.range,
        interval: w.interval,
        bucket_seconds: w.query.bucket_secs,
        queues: by_queue.into_values().collect(),
    }))
}

pub async fn retention(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<Retention>, ApiError> {
    let to = query_time(&q, "to")?.unwrap_or_else(Utc::now);
    let from = query_time(&q, "from")?.unwrap_or(to - Duration::days(1));
    if from > to {
        return Err(ApiError::bad_request("from must not be after to"));
    }
    let (policies, runs) = app
        .broker
        .retention_report(query_str(&q, "queue"), from, to)
        .await?;
    let mut totals = RetentionTotals {
        runs: runs.len(),
        ..RetentionTotals::default()
    };
    for r in &runs {
        match r.job.as_str() {
            "retention" => totals.retention_deleted += r.affected,
            _ => totals.evicted += r.affected,
        }
    }
    Ok(Json(Retention {
        time_range: TimeRange {
            from: format_millis(from),
            to: format_millis(to),
        },
        metrics_retention_days: app.broker.config().jobs.metrics_retention_days,
        policies: policies
            .into_iter()
            .map(|p| RetentionPolicy {
                queue: p.queue,
                retention_enabled: p.retention_enabled,
                retention_seconds: p.retention_seconds,
                completed_retention_seconds: p.completed_retention_seconds,
                ttl: p.ttl,
                stored_messages: p.total,
            })
            .collect(),
        runs: runs
            .into_iter()
            .map(|r| RetentionRun {
                job: r.job,
                cycle: r.cycle,
                worker_id: r.server_id,
                started_at: format_millis(r.started_at),
                finished_at: r.finished_at.map(format_millis),
                affected: r.affected,
            })
            .collect(),
        totals,
    }))
}

#[cfg(test)]
mod tests {
    use super::bucket_seconds;

    #[test]
    fn intervals_parse_to_bucket_widths() {
        assert_eq!(bucket_seconds("minute"), Some(60));
        assert_eq!(bucket_seconds("hour"), Some(3_600));
        assert_eq!(bucket_seconds("day"), Some(86_400));
        assert_eq!(bucket_seconds("10s"), Some(10));
        assert_eq!(bucket_seconds("5m"), Some(300));
        assert_eq!(bucket_seconds("2h"), Some(7_200));
        assert_eq!(bucket_seconds("30"), Some(30));
        for bad in [
            "",
            "0",
            "0s",
            "-5",
            "5x",
            "week",
            "8d",
            "99999999999999999999",
        ] {
            assert_eq!(bucket_seconds(bad), None, "{bad}");
        }
    }
}
