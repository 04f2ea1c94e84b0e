//! `queen analytics`: the dashboard's figures (`/api/v1/status`) and the
//! time series of `/api/v1/analytics/*`.

use clap::{Args, Subcommand};
use queen_client::{segment, Client};
use serde_json::Value;

use crate::admin::{flatten, items, table};
use crate::output::{self, cell, Failure, Format, Table};
use crate::when;

#[derive(Debug, Subcommand)]
pub enum AnalyticsCommand {
    /// Throughput, totals and lag as the dashboard shows them (`/api/v1/status`).
    Status,
    /// Pushed, popped, acked and dead-lettered per queue and bucket.
    QueueOps(Series),
    /// Lag and depth per queue and bucket.
    QueueLag(Series),
    /// Throughput per broker replica and bucket.
    Workers(Series),
    /// Replicas holding a long-poll pop per queue and bucket.
    Parked(Series),
    /// Retention policies and the retention and eviction runs (default: the last 24 h).
    Retention(Series),
    /// This replica's process figures.
    System,
    /// PostgreSQL figures: connections, size, cache hit, longest transaction.
    Postgres,
}

#[derive(Debug, Args)]
pub struct Series {
    /// Window start (RFC 3339, a date, or relative: '6h ago'); default an hour ago.
    #[arg(long, value_parser = when::time_arg)]
    pub from: Option<String>,
    /// Window end (RFC 3339, a date, now, or relative); default now.
    #[arg(long, value_parser = when::time_arg)]
    pub to: Option<String>,
    /// Bucket width: second, minute, hour, day, or 10s, 5m, 2h, 1d.
    #[arg(long)]
    pub interval: Option<String>,
    /// Only this queue.
    #[arg(long, short)]
    pub queue: Option<String>,
}

impl Series {
    fn path(&self, route: &str) -> String {
        let mut q = Vec::new();
        for (k, v) in [
            ("from", &self.from),
            ("to", &self.to),
            ("interval", &self.interval),
            ("queue", &self.queue),
        ] {
            if let Some(v) = v {
                q.push(format!("{k}={}", segment(v)));
            }
        }
        let sep = if q.is_empty() { "" } else { "?" };
        format!("/api/v1/analytics/{route}{sep}{}", q.join("&"))
    }
}

/// One row per point of every series in `v[list]`, with the series' `name`.
fn points(v: &Value, list: &str, name: &str) -> Vec<Value> {
    let mut rows = Vec::new();
    for s in items(v, list) {
        for p in items(s, "points") {
            let mut row = p.clone();
            row["_series"] = s[name].clone();
            rows.push(row);
        }
    }
    rows
}

/// Prints the points of `v[list]` as a table with `columns` after the series name.
fn series(
    v: &Value,
    out: Format,
    list: &str,
    name: (&'static str, &str),
    columns: &[(&'static str, &str)],
) -> Result<(), Failure> {
    output::show(v, out, &format!("/{list}"), |v, wide| {
        let mut all = vec![(name.0, "/_series"), ("TIME", "/timestamp")];
        all.extend_from_slice(columns);
        table(&points(v, list, name.1), &all)
            .wide(wide)
            .print_or("no sample in the window");
    })
}

/// Prints `v` as METRIC/VALUE rows for people.
fn figures(v: &Value, out: Format) -> Result<(), Failure> {
    output::show(v, out, "", |v, wide| {
        let mut t = Table::new(&["METRIC", "VALUE"]).wide(wide);
        flatten("", v, &mut t);
        crate::outln!("{}", t.render());
    })
}

pub async fn run(client: &Client, cmd: AnalyticsCommand, out: Format) -> Result<(), Failure> {
    let admin = client.admin();
    match cmd {
        AnalyticsCommand::Status => figures(&admin.status().await?, out),
        AnalyticsCommand::System => figures(
            &admin.get_json("/api/v1/analytics/system-metrics").await?,
            out,
        ),
        AnalyticsCommand::Postgres => figures(
            &admin.get_json("/api/v1/analytics/postgres-stats").await?,
            out,
        ),
        AnalyticsCommand::QueueOps(s) => {
            let v = admin.get_json(&s.path("queue-ops")).await?;
            series(
                &v,
                out,
                "queues",
                ("QUEUE", "queue"),
                &[
                    ("PUSHED", "/pushed"),
                    ("POPPED", "/popped"),
                    ("ACKED", "/acked"),
                    ("DEAD LETTERED", "/deadLettered"),
                    ("PUSHED/S", "/pushedPerSecond"),
                ],
            )
        }
        AnalyticsCommand::QueueLag(s) => {
            let v = admin.get_json(&s.path("queue-lag")).await?;
            series(
                &v,
                out,
                "queues",
                ("QUEUE", "queue"),
                &[
                    ("LAG S", "/lagSeconds"),
                    ("AVG LAG S", "/avgLagSeconds"),
                    ("OFFSET LAG", "/offsetLag"),
                    ("PENDING", "/pending"),
                    ("PROCESSING", "/processing"),
                ],
            )
        }
        AnalyticsCommand::Workers(s) => {
            let v = admin.get_json(&s.path("worker-metrics")).await?;
            series(
                &v,
                out,
                "workers",
                ("WORKER", "workerId"),
                &[
                    ("PUSHED", "/pushed"),
                    ("POPPED", "/popped"),
                    ("ACKED", "/acked"),
                    ("SAMPLES", "/samples"),
                ],
            )
        }
        AnalyticsCommand::Parked(s) => {
            let v = admin.get_json(&s.path("queue-parked-replicas")).await?;
            series(
                &v,
                out,
                "queues",
                ("QUEUE", "queue"),
                &[("COUNT", "/count"), ("REPLICAS", "/replicas")],
            )
        }
        AnalyticsCommand::Retention(s) => {
            let v = admin.get_json(&s.path("retention")).await?;
            output::show(&v, out, "/runs", |v, wide| {
                table(
                    items(v, "policies"),
                    &[
                        ("QUEUE", "/queue"),
                        ("RETENTION", "/retentionEnabled"),
                        ("SECONDS", "/retentionSeconds"),
                        ("COMPLETED SECONDS", "/completedRetentionSeconds"),
                        ("TTL", "/ttl"),
                        ("STORED", "/storedMessages"),
                    ],
                )
                .wide(wide)
                .print_or("no queue");
                crate::outln!("");
                table(
                    items(v, "runs"),
                    &[
                        ("JOB", "/job"),
                        ("STARTED", "/startedAt"),
                        ("FINISHED", "/finishedAt"),
                        ("AFFECTED", "/affected"),
                        ("WORKER", "/workerId"),
                    ],
                )
                .wide(wide)
                .print_or("no run in the window");
                let t = &v["totals"];
                crate::outln!(
                    "runs {}, deleted {}, evicted {}",
                    cell(&t["runs"]),
                    cell(&t["retentionDeleted"]),
                    cell(&t["evicted"])
                );
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn series_paths_and_points() {
        let s = Series {
            from: Some("2026-05-01T00:00:00.000Z".into()),
            to: None,
            interval: Some("5m".into()),
            queue: Some("a b".into()),
        };
        assert_eq!(
            s.path("queue-ops"),
            "/api/v1/analytics/queue-ops?from=2026-05-01T00%3A00%3A00.000Z&interval=5m&queue=a%20b"
        );
        let v = json!({"queues": [{"queue": "q", "points": [{"timestamp": "t1", "pushed": 1}, {"timestamp": "t2", "pushed": 2}]}]});
        let rows = points(&v, "queues", "queue");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1]["_series"], "q");
    }
}
