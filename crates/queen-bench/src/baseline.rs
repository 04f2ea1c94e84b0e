//! The physical limits of this machine, measured by the same tool with no
//! broker in the way: the same messages (same transactionIds, partitions and
//! payloads) written by plain SQL.
//!
//! - `rows`: one row per message, one transaction of `batch` rows (one
//!   multi-row `INSERT … SELECT FROM unnest(…)`) per round trip;
//! - `commit`: one row and one commit per message;
//! - `segment`: one row per batch holding the batch's messages as arrays (what
//!   packing messages into segments can reach at best).
//!
//! The table has a unique index on (partition, txn id), like a broker's dedup key.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context as _, Result};
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};

use crate::load::{partition_name, payload_for, salt, txid, AbortOnDrop};
use crate::pg::PgArgs;
use crate::stats::{Latencies, LatencySummary};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    Rows,
    Commit,
    Segment,
}

#[derive(Debug, Clone)]
pub struct Spec {
    pub kind: Kind,
    pub clients: u32,
    /// Messages per transaction (`commit`: always 1).
    pub batch: u32,
    pub partitions: u32,
    pub messages: u64,
    pub seconds: f64,
    pub payload_bytes: usize,
}

#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub messages: u64,
    pub transactions: u64,
    pub seconds: f64,
    /// Per transaction (one round trip).
    pub latency: LatencySummary,
}

pub const SETUP: &str = "
DROP TABLE IF EXISTS bench_rows, bench_segments;
CREATE TABLE bench_rows (
    partition  text NOT NULL,
    txn_id     text NOT NULL,
    payload    text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX bench_rows_key ON bench_rows (partition, txn_id);
CREATE TABLE bench_segments (
    partition  text NOT NULL,
    first_seq  bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    txn_ids    text[] NOT NULL,
    payloads   text[] NOT NULL,
    PRIMARY KEY (partition, first_seq)
);
ALTER TABLE bench_segments ALTER COLUMN payloads SET STORAGE EXTERNAL;
";

const INSERT_ROWS: &str = "INSERT INTO bench_rows (partition, txn_id, payload) \
     SELECT $1, t, p FROM unnest($2::text[], $3::text[]) AS u(t, p)";
const INSERT_ONE: &str = "INSERT INTO bench_rows (partition, txn_id, payload) VALUES ($1, $2, $3)";
const INSERT_SEGMENT: &str =
    "INSERT INTO bench_segments (partition, first_seq, txn_ids, payloads) VALUES ($1, $2, $3, $4)";

/// Connections of a finished baseline, still open: dropping them ends their
/// backends, whose CPU time the caller should read first.
pub struct Connections(#[allow(dead_code)] Vec<tokio_postgres::Client>);

pub async fn run(
    pg: &PgArgs,
    db: &str,
    spec: &Spec,
    label: &str,
) -> Result<(Outcome, Connections)> {
    let setup = pg.connect(db).await?;
    setup
        .batch_execute(SETUP)
        .await
        .context("creating baseline tables")?;
    let prefix = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let batch = if spec.kind == Kind::Commit {
        1
    } else {
        u64::from(spec.batch.max(1))
    };
    let total_batches = spec.messages.div_ceil(batch);
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let (payload_bytes, salt) = (spec.payload_bytes, salt(&prefix));

    // Connect every client before the clock starts.
    let mut clients = Vec::new();
    for _ in 0..spec.clients {
        let c = pg.connect(db).await?;
        let stmt = c
            .prepare(match spec.kind {
                Kind::Rows => INSERT_ROWS,
                Kind::Commit => INSERT_ONE,
                Kind::Segment => INSERT_SEGMENT,
            })
            .await?;
        clients.push((c, stmt));
    }

    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(spec.seconds);
    let _progress = progress(label.to_owned(), Arc::clone(&done), start);
    let mut tasks = JoinSet::new();
    for (client, stmt) in clients {
        let (next, done, prefix) = (Arc::clone(&next), Arc::clone(&done), prefix.clone());
        let (kind, messages, partitions) = (spec.kind, spec.messages, spec.partitions.max(1));
        tasks.spawn(async move {
            let mut lat = Latencies::default();
            let mut last = start;
            while Instant::now() < deadline {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= total_batches {
                    break;
                }
                let first = index * batch;
                let end = (first + batch).min(messages);
                let partition = partition_name(index % u64::from(partitions));
                let sent = Instant::now();
                match kind {
                    Kind::Commit => {
                        let t = txid(&prefix, first);
                        let payload = payload_for(payload_bytes, first, salt);
                        client.execute(&stmt, &[&partition, &t, &payload]).await?;
                    }
                    Kind::Rows | Kind::Segment => {
                        let txids: Vec<String> = (first..end).map(|s| txid(&prefix, s)).collect();
                        let payloads: Vec<String> = (first..end)
                            .map(|s| payload_for(payload_bytes, s, salt))
                            .collect();
                        if kind == Kind::Rows {
                            client
                                .execute(&stmt, &[&partition, &txids, &payloads])
                                .await?;
                        } else {
                            let first_seq = i64::try_from(first)?;
                            client
                                .execute(&stmt, &[&partition, &first_seq, &txids, &payloads])
                                .await?;
                        }
                    }
                }
                last = Instant::now();
                lat.record(last.duration_since(sent));
                done.fetch_add(end - first, Ordering::Relaxed);
            }
            anyhow::Ok((lat, last, client))
        });
    }
    let mut lat = Latencies::default();
    let mut last = start;
    let mut open = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (l, at, client) = joined.map_err(|e| anyhow!("baseline client panicked: {e}"))??;
        lat.merge(l);
        last = last.max(at);
        open.push(client);
    }
    let transactions = lat.len() as u64;
    let outcome = Outcome {
        messages: done.load(Ordering::Relaxed),
        transactions,
        seconds: last.duration_since(start).as_secs_f64(),
        latency: lat.summary(),
    };
    open.push(setup);
    Ok((outcome, Connections(open)))
}

fn progress(label: String, done: Arc<AtomicU64>, start: Instant) -> AbortOnDrop {
    AbortOnDrop(tokio::spawn(async move {
        let mut tick =
            tokio::time::interval_at(start + Duration::from_secs(1), Duration::from_secs(1));
        tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut last = (start, 0u64);
        loop {
            let now = tick.tick().await;
            let n = done.load(Ordering::Relaxed);
            let dt = now.duration_since(last.0).as_secs_f64().max(1e-9);
            eprintln!(
                "[{label}] {:>5.1}s {n} msgs ({:.0}/s)",
                now.duration_since(start).as_secs_f64(),
                n.saturating_sub(last.1) as f64 / dt
            );
            last = (now, n);
        }
    }))
}
