//! Dashboard status and analytics, computed on read from the log tables.

use axum::extract::{Path, Query, State};
use axum::Json;
use chrono::{DateTime, Duration, Utc};
use queen_proto::time::format_millis;
use serde_json::{json, Value};

use super::resources::{by_queue, partition_counts, Totals};
use crate::app::AppState;
use crate::http::body::{query_page, query_str, query_time, Query as Params};
use crate::http::error::ApiError;
use crate::store::MessageFilter;

fn window(q: &Params, default: Duration) -> Result<(DateTime<Utc>, DateTime<Utc>), ApiError> {
    let to = query_time(q, "to")?.unwrap_or_else(Utc::now);
    let from = query_time(q, "from")?.unwrap_or(to - default);
    if from > to {
        return Err(ApiError::bad_request("from must not be after to"));
    }
    Ok((from, to))
}

pub async fn overview(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<Value>, ApiError> {
    let (from, to) = window(&q, Duration::hours(1))?;
    let queue = query_str(&q, "queue");
    let points = app.broker.ingested_per_minute(from, to, queue).await?;
    let rows = app.broker.queue_stats(queue).await?;
    let mut totals = Totals::default();
    rows.iter().for_each(|r| totals.add(r));
    let rates = app.broker.rates();
    let throughput: Vec<Value> = points
        .iter()
        .map(|(minute, n)| {
            json!({
                "timestamp": format_millis(*minute),
                "ingested": n,
                "processed": 0,
                "ingestedPerSecond": *n as f64 / 60.0,
                "processedPerSecond": 0,
            })
        })
        .collect();
    let queues: Vec<Value> = by_queue(&rows)
        .iter()
        .map(|(head, parts)| {
            let mut t = Totals::default();
            parts.iter().for_each(|p| t.add(p));
            json!({"id": head.queue_id.to_string(), "name": head.queue, "namespace": head.namespace,
                   "task": head.task, "partitions": t.partitions, "messages": t.json()})
        })
        .collect();
    Ok(Json(json!({
        "timeRange": {"from": format_millis(from), "to": format_millis(to)},
        "bucketMinutes": 1,
        "pointCount": throughput.len(),
        "throughput": throughput,
        "queues": queues,
        "messages": totals.json(),
        "leases": {"active": totals.processing},
        "deadLetterQueue": {"totalMessages": totals.dead_letter},
        "workers": [{
            "workerId": app.broker.config().server_id,
            "pushedPerSecond": rates.pushed_per_second,
            "poppedPerSecond": rates.popped_per_second,
            "ackedPerSecond": rates.acked_per_second,
        }],
        "errors": {},
        "statsAge": 0,
    })))
}

pub async fn queues(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<Value>, ApiError> {
    let (limit, offset) = query_page(&q, 100);
    let namespace = query_str(&q, "namespace");
    let task = query_str(&q, "task");
    let rows = app.broker.queue_stats(None).await?;
    let list: Vec<Value> = by_queue(&rows)
        .into_iter()
        .filter(|(h, _)| namespace.is_none_or(|n| h.namespace == n))
        .filter(|(h, _)| task.is_none_or(|t| h.task == t))
        .skip(offset as usize)
        .take(limit as usize)
        .map(|(head, parts)| {
            let mut t = Totals::default();
            parts.iter().for_each(|p| t.add(p));
            json!({
                "id": head.queue_id.to_string(), "name": head.queue, "namespace": head.namespace,
                "task": head.task, "createdAt": format_millis(head.queue_created_at),
                "partitions": t.partitions,
                "messages": {"total": t.total, "pending": t.pending, "processing": t.processing},
            })
        })
        .collect();
    Ok(Json(json!({
        "queues": list,
        "pagination": {"limit": limit, "offset": offset},
    })))
}

pub async fn queue(
    State(app): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let Some(config) = app.broker.queue(&name).await? else {
        return Err(ApiError::not_found("Queue not found"));
    };
    let rows = app.broker.queue_stats(Some(&name)).await?;
    let cursors = app.broker.cursors(None).await?;
    let mut totals = Totals::default();
    let partitions: Vec<Value> = rows
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
            json!({
                "id": p.partition_id.map(|id| id.to_string()),
                "name": p.partition,
                "createdAt": p.created_at.map(format_millis),
                "messages": partition_counts(p),
                "stats": partition_counts(p),
                "cursor": {"totalConsumed": consumed, "batchesConsumed": batches},
                "lastActivity": p.last_consumed_at.or(p.newest_message).map(format_millis),
                "oldestMessage": p.oldest_message.map(format_millis),
                "newestMessage": p.newest_message.map(format_millis),
            })
        })
        .collect();
    let mut total_json = totals.json();
    total_json["messages"] = totals.json();
    let o = &config.options;
    Ok(Json(json!({
        "queue": {
            "id": config.id.to_string(), "name": config.name, "namespace": config.namespace,
            "task": config.task, "priority": o.priority, "createdAt": format_millis(config.created_at),
            "config": {
                "leaseTime": o.lease_time, "retryLimit": o.retry_limit, "retryDelay": o.retry_delay,
                "ttl": o.ttl, "maxQueueSize": o.max_size, "deadLetterQueue": o.dead_letter_queue,
            },
        },
        "partitions": partitions,
        "totals": total_json,
    })))
}

pub async fn queue_messages(
    State(app): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<Params>,
) -> Result<Json<Vec<Value>>, ApiError> {
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
            .iter()
            .map(|m| {
                json!({
                    "id": m.message_id.to_string(), "transactionId": m.transaction_id,
                    "partitionId": m.partition_id.to_string(),
                    "queuePath": format!("{}/{}", m.queue, m.partition), "queue": m.queue,
                    "partition": m.partition, "status": m.status,
                    "createdAt": format_millis(m.created_at),
                })
            })
            .collect(),
    ))
}

pub async fn analytics(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<Value>, ApiError> {
    let (from, to) = window(&q, Duration::hours(24))?;
    let interval = query_str(&q, "interval").unwrap_or("hour");
    if !matches!(interval, "minute" | "hour" | "day") {
        return Err(ApiError::bad_request(
            "interval must be minute, hour or day",
        ));
    }
    let minutes = app
        .broker
        .ingested_per_minute(from, to, query_str(&q, "queue"))
        .await?;
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
    Ok(Json(json!({
        "dataPoints": points.iter().map(|(t, n)| json!({"timestamp": format_millis(*t), "messages": n})).collect::<Vec<_>>(),
        "interval": interval,
        "from": format_millis(from),
        "to": format_millis(to),
    })))
}

pub async fn buffers(State(app): State<AppState>) -> Json<Value> {
    let healthy = app.broker.database_answers().await;
    let spool = app.broker.spool_status().stats;
    Json(json!({
        "pending": spool.records,
        "failed": spool.failed,
        "dbHealthy": healthy,
        "worker": app.broker.config().server_id,
    }))
}

/// `/api/v1/analytics/*`: dashboard charts from this replica's live numbers.
pub async fn system_metrics(State(app): State<AppState>) -> Json<Value> {
    let r = app.broker.rates();
    let pool = app.broker.pool_status();
    Json(json!({
        "points": [{
            "timestamp": format_millis(Utc::now()),
            "workerId": app.broker.config().server_id,
            "pushedPerSecond": r.pushed_per_second,
            "poppedPerSecond": r.popped_per_second,
            "ackedPerSecond": r.acked_per_second,
            "dbPool": {"size": pool.max_size, "open": pool.open, "idle": pool.idle, "waiting": pool.waiting},
        }]
    }))
}

pub async fn postgres_stats(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    let rows = app.broker.queue_stats(None).await?;
    let mut totals = Totals::default();
    rows.iter().for_each(|r| totals.add(r));
    let pool = app.broker.pool_status();
    Ok(Json(json!({
        "pool": {"size": pool.max_size, "open": pool.open, "idle": pool.idle, "waiting": pool.waiting},
        "messages": totals.json(),
        "partitions": totals.partitions,
    })))
}
