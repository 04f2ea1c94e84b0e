//! Resources: overview, queues, queue detail, namespaces, tasks.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::Json;
use chrono::Utc;
use queen_proto::time::format_millis;
use serde_json::{json, Value};

use crate::app::AppState;
use crate::http::error::ApiError;
use crate::store::PartitionStats;

/// Totals over a set of partitions.
#[derive(Debug, Default, Clone, Copy)]
pub struct Totals {
    pub total: i64,
    pub pending: i64,
    pub processing: i64,
    pub completed: i64,
    pub dead_letter: i64,
    pub partitions: i64,
}

impl Totals {
    pub fn add(&mut self, s: &PartitionStats) {
        if s.partition_id.is_none() {
            return;
        }
        self.total += s.total;
        self.pending += s.pending();
        self.processing += s.processing;
        self.completed += s.completed;
        self.dead_letter += s.dead_letter;
        self.partitions += 1;
    }

    pub fn json(&self) -> Value {
        json!({
            "total": self.total,
            "pending": self.pending,
            "processing": self.processing,
            "completed": self.completed,
            "failed": 0,
            "deadLetter": self.dead_letter,
        })
    }
}

/// Groups partition rows by queue, keeping the store's order (newest queue first).
pub fn by_queue(rows: &[PartitionStats]) -> Vec<(&PartitionStats, Vec<&PartitionStats>)> {
    let mut out: Vec<(&PartitionStats, Vec<&PartitionStats>)> = Vec::new();
    for r in rows {
        match out.last_mut() {
            Some((head, parts)) if head.queue_id == r.queue_id => parts.push(r),
            _ => out.push((r, vec![r])),
        }
    }
    out
}

fn stats(values: &mut [i64]) -> Value {
    if values.is_empty() {
        return json!({"avg": 0, "median": 0, "min": 0, "max": 0});
    }
    values.sort_unstable();
    let sum: i64 = values.iter().sum();
    json!({
        "avg": sum / values.len() as i64,
        "median": values[values.len() / 2],
        "min": values[0],
        "max": values[values.len() - 1],
    })
}

pub async fn overview(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    let rows = app.broker.queue_stats(None).await?;
    let cursors = app.broker.cursors(None).await?;
    let mut totals = Totals::default();
    rows.iter().for_each(|r| totals.add(r));
    let queues = by_queue(&rows);
    let mut namespaces: Vec<&str> = queues.iter().map(|(q, _)| q.namespace.as_str()).collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    let mut tasks: Vec<&str> = queues
        .iter()
        .map(|(q, _)| q.task.as_str())
        .filter(|t| !t.is_empty())
        .collect();
    tasks.sort_unstable();
    tasks.dedup();
    let now = Utc::now();
    let mut time_lags: Vec<i64> = cursors
        .iter()
        .map(|c| {
            c.oldest_unconsumed_at
                .map_or(0, |t| (now - t).num_seconds().max(0))
        })
        .collect();
    let mut offset_lags: Vec<i64> = cursors.iter().map(|c| c.offset_lag).collect();
    let rates = app.broker.rates();
    Ok(Json(json!({
        "queues": queues.len(),
        "partitions": totals.partitions,
        "namespaces": namespaces.len(),
        "tasks": tasks.len(),
        "messages": totals.json(),
        "lag": {"time": stats(&mut time_lags), "offset": stats(&mut offset_lags)},
        "throughput": {
            "ingestedPerSecond": rates.pushed_per_second,
            "processedPerSecond": rates.acked_per_second,
        },
        "timestamp": format_millis(now),
        "statsAge": 0,
    })))
}

fn queue_summary(head: &PartitionStats, parts: &[&PartitionStats]) -> Value {
    let mut t = Totals::default();
    parts.iter().for_each(|p| t.add(p));
    json!({
        "id": head.queue_id.to_string(),
        "name": head.queue,
        "namespace": head.namespace,
        "task": head.task,
        "createdAt": format_millis(head.queue_created_at),
        "partitions": t.partitions,
        "messages": {"total": t.total, "pending": t.pending, "processing": t.processing},
    })
}

pub async fn queues(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    let rows = app.broker.queue_stats(None).await?;
    let list: Vec<Value> = by_queue(&rows)
        .iter()
        .map(|(head, parts)| queue_summary(head, parts))
        .collect();
    Ok(Json(json!({ "queues": list })))
}

/// The `stats` object of one partition.
pub fn partition_counts(p: &PartitionStats) -> Value {
    json!({
        "total": p.total,
        "pending": p.pending(),
        "processing": p.processing,
        "completed": p.completed,
        "failed": 0,
        "deadLetter": p.dead_letter,
    })
}

pub async fn queue(
    State(app): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let rows = app.broker.queue_stats(Some(&name)).await?;
    let Some((head, parts)) = by_queue(&rows).into_iter().next() else {
        return Err(ApiError::not_found("Queue not found"));
    };
    let mut totals = Totals::default();
    let partitions: Vec<Value> = parts
        .iter()
        .filter(|p| p.partition_id.is_some())
        .map(|p| {
            totals.add(p);
            json!({
                "id": p.partition_id.map(|id| id.to_string()),
                "name": p.partition,
                "createdAt": p.created_at.map(format_millis),
                "stats": partition_counts(p),
                "oldestMessage": p.oldest_message.map(format_millis),
                "newestMessage": p.newest_message.map(format_millis),
            })
        })
        .collect();
    Ok(Json(json!({
        "id": head.queue_id.to_string(),
        "name": head.queue,
        "namespace": head.namespace,
        "task": head.task,
        "createdAt": format_millis(head.queue_created_at),
        "partitions": partitions,
        "totals": totals.json(),
    })))
}

async fn grouped(app: &AppState, by_task: bool) -> Result<Vec<Value>, ApiError> {
    let rows = app.broker.queue_stats(None).await?;
    let mut groups: BTreeMap<String, (i64, Totals)> = BTreeMap::new();
    for (head, parts) in by_queue(&rows) {
        let key = if by_task { &head.task } else { &head.namespace };
        if by_task && key.is_empty() {
            continue;
        }
        let entry = groups.entry(key.clone()).or_default();
        entry.0 += 1;
        parts.iter().for_each(|p| entry.1.add(p));
    }
    let field = if by_task { "task" } else { "namespace" };
    Ok(groups
        .into_iter()
        .map(|(key, (queues, t))| {
            json!({
                field: key,
                "queues": queues,
                "partitions": t.partitions,
                "messages": {"total": t.total, "pending": t.pending},
            })
        })
        .collect())
}

pub async fn namespaces(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "namespaces": grouped(&app, false).await? })))
}

pub async fn tasks(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "tasks": grouped(&app, true).await? })))
}
