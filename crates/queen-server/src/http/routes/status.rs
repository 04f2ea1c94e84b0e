//! Dashboard status and analytics, computed on read from the log tables.

use axum::extract::{Path, Query, State};
use axum::Json;
use chrono::{DateTime, Duration, Utc};
use queen_proto::admin::Pagination;
use queen_proto::status::{
    Analytics, Buffers, CursorCounts, DataPoint, DeadLetterCount, LeaseCount, PoolCounts,
    PostgresStats, StatusMessage, StatusOverview, StatusPartition, StatusQueue, StatusQueueConfig,
    StatusQueueDetail, StatusQueueInfo, StatusQueueTotals, StatusQueues, SystemMetrics,
    SystemPoint, ThroughputPoint, TimeRange, WorkerRates,
};
use queen_proto::system::ProcessFigures;
use queen_proto::time::format_millis;

use super::resources::{by_queue, partition_counts, queue_summary, Totals};
use crate::app::AppState;
use crate::broker::process::{cpu_times, CpuMeter};
use crate::broker::status_rss_bytes;
use crate::http::body::{query_page, query_str, query_time, Query as Params};
use crate::http::error::ApiError;
use crate::store::{MessageFilter, PoolStatus, QueueScope};

fn window(q: &Params, default: Duration) -> Result<(DateTime<Utc>, DateTime<Utc>), ApiError> {
    let to = query_time(q, "to")?.unwrap_or_else(Utc::now);
    let from = query_time(q, "from")?.unwrap_or(to - default);
    if from > to {
        return Err(ApiError::bad_request("from must not be after to"));
    }
    Ok((from, to))
}

/// The `queue`, `namespace` and `task` filters of a query.
fn scope(q: &Params) -> QueueScope<'_> {
    QueueScope {
        queue: query_str(q, "queue"),
        namespace: query_str(q, "namespace"),
        task: query_str(q, "task"),
    }
}

fn worker_rates(app: &AppState) -> WorkerRates {
    let r = app.broker.rates();
    WorkerRates {
        worker_id: app.broker.config().server_id.clone(),
        pushed_per_second: r.pushed_per_second,
        popped_per_second: r.popped_per_second,
        acked_per_second: r.acked_per_second,
    }
}

fn pool_counts(pool: PoolStatus) -> PoolCounts {
    PoolCounts {
        size: pool.max_size,
        open: pool.open,
        idle: pool.idle,
        waiting: pool.waiting,
    }
}

pub async fn overview(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<StatusOverview>, ApiError> {
    let (from, to) = window(&q, Duration::hours(1))?;
    let queue = query_str(&q, "queue");
    let scope = scope(&q);
    let points = app.broker.ingested_per_minute(from, to, scope).await?;
    let mut rows = app.broker.queue_stats(queue).await?;
    rows.retain(|r| {
        scope.namespace.is_none_or(|n| r.namespace == n) && scope.task.is_none_or(|t| r.task == t)
    });
    let totals = Totals::of(&rows);
    let throughput: Vec<ThroughputPoint> = points
        .iter()
        .map(|(minute, n)| ThroughputPoint {
            timestamp: format_millis(*minute),
            ingested: *n,
            processed: 0,
            ingested_per_second: *n as f64 / 60.0,
            processed_per_second: 0,
        })
        .collect();
    let queues = by_queue(&rows)
        .iter()
        .map(|(head, parts)| StatusQueue {
            id: head.queue_id.to_string(),
            name: head.queue.clone(),
            namespace: head.namespace.clone(),
            task: head.task.clone(),
            partitions: Totals::of(parts.iter().copied()).partitions,
            messages: Totals::of(parts.iter().copied()).messages(),
        })
        .collect();
    Ok(Json(StatusOverview {
        time_range: TimeRange {
            from: format_millis(from),
            to: format_millis(to),
        },
        bucket_minutes: 1,
        point_count: throughput.len(),
        throughput,
        queues,
        messages: totals.messages(),
        leases: LeaseCount {
            active: totals.processing,
        },
        dead_letter_queue: DeadLetterCount {
            total_messages: totals.dead_letter,
        },
        workers: vec![worker_rates(&app)],
        errors: Default::default(),
        stats_age: 0,
    }))
}

pub async fn queues(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<StatusQueues>, ApiError> {
    let (limit, offset) = query_page(&q, 100);
    let namespace = query_str(&q, "namespace");
    let task = query_str(&q, "task");
    let rows = app.broker.queue_stats(None).await?;
    let list = by_queue(&rows)
        .into_iter()
        .filter(|(h, _)| namespace.is_none_or(|n| h.namespace == n))
        .filter(|(h, _)| task.is_none_or(|t| h.task == t))
        .skip(offset as usize)
        .take(limit as usize)
        .map(|(head, parts)| queue_summary(head, &parts))
        .collect();
    Ok(Json(StatusQueues {
        queues: list,
        pagination: Pagination { limit, offset },
    }))
}

pub async fn queue(
    State(app): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<StatusQueueDetail>, ApiError> {
    let Some(config) = app.broker.queue_config(&name).await? else {
        return Err(ApiError::not_found("Queue not found"));
    };
    let rows = app.broker.queue_stats(Some(&name)).await?;
    let cursors = app.broker.cursors(None).await?;
    let mut totals = Totals::default();
    let partitions = rows
        .iter()
        .filter(|p| p.partition_id.is_some())
        .map(|p| {
            totals.add(p);
            let (consumed, batches) = cursors
                .iter()
                .filter(|c| Some(c.partition_id) == p.partition_id)
                .fold((0, 0), |(n, b), c| {
                    (
                        n + c.total_consumed,
                        b + i64::from(c.last_consumed_at.is_some()),
                    )
                });
            StatusPartition {
                id: p.partition_id.map(|id| id.to_string()),
                name: p.partition.clone(),
                created_at: p.created_at.map(format_millis),
                messages: partition_counts(p),
                stats: partition_counts(p),
                cursor: CursorCounts {
                    total_consumed: consumed,
                    batches_consumed: batches,
                },
                last_activity: p.last_consumed_at.or(p.newest_message).map(format_millis),
                oldest_message: p.oldest_message.map(format_millis),
                newest_message: p.newest_message.map(format_millis),
            }
        })
        .collect();
    let o = &config.options;
    Ok(Json(StatusQueueDetail {
        queue: StatusQueueInfo {
            id: config.id.to_string(),
            name: config.name.clone(),
            namespace: config.namespace.clone(),
            task: config.task.clone(),
            priority: o.priority,
            created_at: format_millis(config.created_at),
            config: StatusQueueConfig {
                lease_time: o.lease_time,
                retry_limit: o.retry_limit,
                retry_delay: o.retry_delay,
                retry_backoff: o.retry_backoff,
                retry_delay_max: o.retry_delay_max,
                ttl: o.ttl,
                max_queue_size: o.max_size,
                dead_letter_queue: o.dead_letter_queue,
            },
            options: o.clone(),
        },
        partitions,
        totals: StatusQueueTotals {
            totals: totals.messages(),
            messages: totals.messages(),
        },
    }))
}

pub async fn queue_messages(
    State(app): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<Params>,
) -> Result<Json<Vec<StatusMessage>>, ApiError> {
    let (limit, offset) = query_page(&q, 50);
    let filter = MessageFilter {
        queue: Some(name),
        from: Some(DateTime::<Utc>::UNIX_EPOCH),
        to: Some(Utc::now() + Duration::minutes(1)),
        limit,
        offset,
        ..MessageFilter::default()
    };
    let messages = app.broker.messages(&filter).await?;
    Ok(Json(
        messages
            .into_iter()
            .map(|m| StatusMessage {
                id: m.message_id.to_string(),
                transaction_id: m.transaction_id,
                partition_id: m.partition_id.to_string(),
                queue_path: format!("{}/{}", m.queue, m.partition),
                queue: m.queue,
                partition: m.partition,
                status: m.status,
                created_at: format_millis(m.created_at),
            })
            .collect(),
    ))
}

pub async fn analytics(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<Analytics>, ApiError> {
    let (from, to) = window(&q, Duration::hours(24))?;
    let interval = query_str(&q, "interval").unwrap_or("hour");
    if !matches!(interval, "minute" | "hour" | "day") {
        return Err(ApiError::bad_request(
            "interval must be minute, hour or day",
        ));
    }
    let minutes = app.broker.ingested_per_minute(from, to, scope(&q)).await?;
    let bucket = match interval {
        "minute" => Duration::minutes(1),
        "hour" => Duration::hours(1),
        _ => Duration::days(1),
    };
    let mut points: Vec<(DateTime<Utc>, i64)> = Vec::new();
    for (minute, n) in minutes {
        let secs = bucket.num_seconds();
        let start = DateTime::from_timestamp(minute.timestamp() / secs * secs, 0).unwrap_or(minute);
        match points.last_mut() {
            Some((t, total)) if *t == start => *total += n,
            _ => points.push((start, n)),
        }
    }
    Ok(Json(Analytics {
        data_points: points
            .iter()
            .map(|(t, n)| DataPoint {
                timestamp: format_millis(*t),
                messages: *n,
            })
            .collect(),
        interval: interval.to_owned(),
        from: format_millis(from),
        to: format_millis(to),
    }))
}

pub async fn buffers(State(app): State<AppState>) -> Json<Buffers> {
    let healthy = app.broker.database_answers().await;
    let spool = app.broker.spool_status().stats;
    Json(Buffers {
        pending: spool.records,
        failed: spool.failed,
        db_healthy: healthy,
        worker: app.broker.config().server_id.clone(),
    })
}

/// `/api/v1/analytics/*`: dashboard charts from this replica's live numbers.
/// CPU use between reads of `system-metrics` (of any client).
static SYSTEM_CPU: std::sync::LazyLock<CpuMeter> = std::sync::LazyLock::new(CpuMeter::new);

pub async fn system_metrics(State(app): State<AppState>) -> Json<SystemMetrics> {
    let uptime = app.broker.metrics_summary().uptime_secs;
    let cpu = cpu_times();
    Json(SystemMetrics {
        points: vec![SystemPoint {
            timestamp: format_millis(Utc::now()),
            rates: worker_rates(&app),
            db_pool: pool_counts(app.broker.pool_status()),
        }],
        process: ProcessFigures {
            pid: std::process::id(),
            uptime_seconds: uptime,
            rss_bytes: status_rss_bytes(),
            threads: cpu.threads,
            cpu_user_seconds: cpu.user_seconds,
            cpu_system_seconds: cpu.system_seconds,
            cpu_percent: SYSTEM_CPU.percent(
                cpu,
                uptime as f64,
                std::time::Duration::from_millis(500),
            ),
        },
        spool: super::system::buffer_stats(&app.broker.spool_status()),
    })
}

pub async fn postgres_stats(State(app): State<AppState>) -> Result<Json<PostgresStats>, ApiError> {
    let rows = app.broker.queue_stats(None).await?;
    let totals = Totals::of(&rows);
    let database = app.broker.database_health().await?;
    Ok(Json(PostgresStats {
        pool: pool_counts(app.broker.pool_status()),
        messages: totals.messages(),
        partitions: totals.partitions,
        database,
    }))
}
