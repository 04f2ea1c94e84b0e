//! `queen messages`, `traces` and `metrics`: looking at what the broker holds and counts.

use queen_client::{Client, MessageFilter};
use serde_json::Value;

use super::{by_ids, items, show, table, ById};
use crate::cli::{MessagesCommand, MetricsArgs, TracesCommand};
use crate::output::{cell, Failure, Format, Table};

pub async fn messages(client: &Client, cmd: MessagesCommand, out: Format) -> Result<(), Failure> {
    match cmd {
        MessagesCommand::List(a) => {
            let filter = MessageFilter {
                queue: a.queue,
                partition: a.partition,
                status: a.status,
                from: a.from,
                to: a.to,
                limit: Some(a.limit),
                offset: Some(a.offset),
                ..Default::default()
            };
            let v = client.admin().messages(&filter).await?;
            show(&v, out, "/messages", |v, wide| {
                table(
                    items(v, "messages"),
                    &[
                        ("QUEUE", "/queue"),
                        ("PARTITION", "/partition"),
                        ("PARTITION ID", "/partitionId"),
                        ("TRANSACTION ID", "/transactionId"),
                        ("STATUS", "/status"),
                        ("CREATED", "/createdAt"),
                    ],
                )
                .wide(wide)
                .print_or("no message");
            })
        }
        MessagesCommand::Show {
            partition_id,
            transaction_id,
        } => {
            let v = client
                .admin()
                .message(&partition_id, &transaction_id)
                .await?;
            show(&v, out, "", |m, _| {
                crate::outln!(
                    "{} {}/{}  status {}  created {}",
                    cell(&m["transactionId"]),
                    cell(&m["queue"]),
                    cell(&m["partition"]),
                    cell(&m["status"]),
                    cell(&m["createdAt"])
                );
                crate::outln!("{}", m["payload"]);
            })
        }
        MessagesCommand::Delete {
            partition_id,
            transaction_id,
        } => by_ids(client, ById::Delete, &partition_id, &transaction_id, out).await,
        MessagesCommand::Retry {
            partition_id,
            transaction_id,
        } => by_ids(client, ById::Retry, &partition_id, &transaction_id, out).await,
    }
}

pub async fn traces(client: &Client, cmd: TracesCommand, out: Format) -> Result<(), Failure> {
    let admin = client.admin();
    match cmd {
        TracesCommand::Show {
            partition_id,
            transaction_id,
        } => {
            let v = admin.traces(&partition_id, &transaction_id).await?;
            show(&v, out, "/traces", |v, wide| {
                table(
                    items(v, "traces"),
                    &[
                        ("AT", "/created_at"),
                        ("EVENT", "/event_type"),
                        ("GROUP", "/consumer_group"),
                        ("NAMES", "/trace_names"),
                        ("DATA", "/data"),
                    ],
                )
                .wide(wide)
                .print_or("no trace");
            })
        }
        TracesCommand::Name {
            name,
            limit,
            offset,
        } => {
            let v = admin.traces_by_name(&name, limit, offset).await?;
            show(&v, out, "/traces", |v, wide| {
                table(
                    items(v, "traces"),
                    &[
                        ("AT", "/created_at"),
                        ("QUEUE", "/queue_name"),
                        ("PARTITION", "/partition_name"),
                        ("TRANSACTION ID", "/transaction_id"),
                        ("EVENT", "/event_type"),
                        ("DATA", "/data"),
                    ],
                )
                .wide(wide)
                .print_or("no trace");
            })
        }
        TracesCommand::Names { limit } => {
            let v = admin.trace_names(limit, 0).await?;
            show(&v, out, "/trace_names", |v, wide| {
                table(
                    items(v, "trace_names"),
                    &[
                        ("NAME", "/trace_name"),
                        ("EVENTS", "/trace_count"),
                        ("MESSAGES", "/message_count"),
                        ("LAST SEEN", "/last_seen"),
                    ],
                )
                .wide(wide)
                .print_or("no trace name");
            })
        }
    }
}

pub async fn metrics(client: &Client, args: MetricsArgs, out: Format) -> Result<(), Failure> {
    if args.prometheus {
        crate::output::write_out(format_args!("{}", client.admin().prometheus().await?));
        return Ok(());
    }
    let v = client.admin().metrics().await?;
    show(&v, out, "", |v, wide| {
        let mut t = Table::new(&["METRIC", "VALUE"]).wide(wide);
        flatten("", v, &mut t);
        crate::outln!("{}", t.render());
    })
}

/// Rows `a.b.c  value` for every leaf of `v`.
pub(crate) fn flatten(prefix: &str, v: &Value, t: &mut Table) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, child, t);
            }
        }
        leaf => t.row(vec![prefix.to_owned(), cell(leaf)]),
    }
}
