//! Resources: overview, queues, queue detail, namespaces, tasks.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::Json;
use chrono::Utc;
use queen_proto::status::{
    LagSpread, MessageTotals, Namespaces, PartitionResource, PendingCounts, QueueGroupSummary,
    QueueList, QueueMessageCounts, QueueResource, QueueSummary, ResourcesOverview, Spread, Tasks,
    Throughput,
};
use queen_proto::time::format_millis;

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
    pub expired: i64,
    pub partitions: i64,
}

impl Totals {
    /// The totals of `parts` (rows without a partition count nothing).
    pub fn of<'a>(parts: impl IntoIterator<Item = &'a PartitionStats>) -> Self {
        let mut t = Self::default();
        parts.into_iter().for_each(|p| t.add(p));
        t
    }

    pub fn add(&mut self, s: &PartitionStats) {
        if s.partition_id.is_none() {
            return;
        }
        self.total += s.total;
        self.pending += s.pending();
        self.processing += s.processing;
        self.completed += s.completed;
        self.dead_letter += s.dead_letter;
        self.expired += s.expired;
        self.partitions += 1;
    }

    pub fn messages(&self) -> MessageTotals {
        MessageTotals {
            total: self.total,
            pending: self.pending,
            processing: self.processing,
            completed: self.completed,
            failed: 0,
            dead_letter: self.dead_letter,
            expired: self.expired,
        }
    }

    pub fn queue_counts(&self) -> QueueMessageCounts {
        QueueMessageCounts {
            total: self.total,
            pending: self.pending,
            processing: self.processing,
        }
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

fn spread(values: &mut [i64]) -> Spread {
    if values.is_empty() {
        return Spread::default();
    }
    values.sort_unstable();
    let sum: i64 = values.iter().sum();
    Spread {
        avg: sum / values.len() as i64,
        median: values[values.len() / 2],
        min: values[0],
        max: values[values.len() - 1],
    }
}

pub async fn overview(State(app): State<AppState>) -> Result<Json<ResourcesOverview>, ApiError> {
    let rows = app.broker.queue_stats(None).await?;
    let cursors = app.broker.cursors(None).await?;
    let totals = Totals::of(&rows);
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
    Ok(Json(ResourcesOverview {
        queues: queues.len(),
        partitions: totals.partitions,
        namespaces: namespaces.len(),
        tasks: tasks.len(),
        messages: totals.messages(),
        lag: LagSpread {
            time: spread(&mut time_lags),
            offset: spread(&mut offset_lags),
        },
        throughput: Throughput {
            ingested_per_second: rates.pushed_per_second,
            processed_per_second: rates.acked_per_second,
        },
        timestamp: format_millis(now),
        stats_age: 0,
    }))
}

/// A queue of the queue lists.
pub fn queue_summary(head: &PartitionStats, parts: &[&PartitionStats]) -> QueueSummary {
    let t = Totals::of(parts.iter().copied());
    QueueSummary {
        id: head.queue_id.to_string(),
        name: head.queue.clone(),
        namespace: head.namespace.clone(),
        task: head.task.clone(),
        created_at: format_millis(head.queue_created_at),
        partitions: t.partitions,
        messages: t.queue_counts(),
    }
}

pub async fn queues(State(app): State<AppState>) -> Result<Json<QueueList>, ApiError> {
    let rows = app.broker.queue_stats(None).await?;
    Ok(Json(QueueList {
        queues: by_queue(&rows)
            .iter()
            .map(|(head, parts)| queue_summary(head, parts))
            .collect(),
    }))
}

/// The counts of one partition.
pub fn partition_counts(p: &PartitionStats) -> MessageTotals {
    MessageTotals {
        total: p.total,
        pending: p.pending(),
        processing: p.processing,
        completed: p.completed,
        failed: 0,
        dead_letter: p.dead_letter,
        expired: p.expired,
    }
}

pub async fn queue(
    State(app): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<QueueResource>, ApiError> {
    let rows = app.broker.queue_stats(Some(&name)).await?;
    let Some((head, parts)) = by_queue(&rows).into_iter().next() else {
        return Err(ApiError::not_found("Queue not found"));
    };
    let parts: Vec<&PartitionStats> = parts
        .into_iter()
        .filter(|p| p.partition_id.is_some())
        .collect();
    let totals = Totals::of(parts.iter().copied());
    Ok(Json(QueueResource {
        id: head.queue_id.to_string(),
        name: head.queue.clone(),
        namespace: head.namespace.clone(),
        task: head.task.clone(),
        created_at: format_millis(head.queue_created_at),
        partitions: parts
            .iter()
            .map(|p| PartitionResource {
                id: p.partition_id.map(|id| id.to_string()),
                name: p.partition.clone(),
                created_at: p.created_at.map(format_millis),
                stats: partition_counts(p),
                oldest_message: p.oldest_message.map(format_millis),
                newest_message: p.newest_message.map(format_millis),
            })
            .collect(),
        totals: totals.messages(),
    }))
}

async fn grouped(app: &AppState, by_task: bool) -> Result<Vec<QueueGroupSummary>, ApiError> {
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
    Ok(groups
        .into_iter()
        .map(|(key, (queues, t))| QueueGroupSummary {
            namespace: (!by_task).then(|| key.clone()),
            task: by_task.then_some(key),
            queues,
            partitions: t.partitions,
            messages: PendingCounts {
                total: t.total,
                pending: t.pending,
            },
        })
        .collect())
}

pub async fn namespaces(State(app): State<AppState>) -> Result<Json<Namespaces>, ApiError> {
    Ok(Json(Namespaces {
        namespaces: grouped(&app, false).await?,
    }))
}

pub async fn tasks(State(app): State<AppState>) -> Result<Json<Tasks>, ApiError> {
    Ok(Json(Tasks {
        tasks: grouped(&app, true).await?,
    }))
}
