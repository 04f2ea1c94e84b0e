//! `queen dlq`: list, retry and delete dead letters.

use queen_client::Client;
use serde_json::Value;

use super::{by_ids, items, show, succeeded, table_wide, ById};
use crate::cli::DlqCommand;
use crate::output::{cell, Failure, Format};

pub async fn dlq(client: &Client, cmd: DlqCommand, out: Format) -> Result<(), Failure> {
    match cmd {
        DlqCommand::List(a) => {
            let mut q = client.dlq().limit(a.limit).offset(a.offset);
            if let Some(v) = a.queue {
                q = q.queue(v);
            }
            if let Some(v) = a.group {
                q = q.group(v);
            }
            if let Some(v) = a.partition {
                q = q.partition(v);
            }
            if let Some(v) = a.from {
                q = q.from(v);
            }
            if let Some(v) = a.to {
                q = q.to(v);
            }
            let page = q.get().await?;
            let v = serde_json::to_value(&page).unwrap_or(Value::Null);
            show(&v, out, "/messages", |p, wide| {
                let t = table_wide(
                    items(p, "messages"),
                    &[
                        ("QUEUE", "/queue"),
                        ("PARTITION", "/partition"),
                        ("GROUP", "/consumerGroup"),
                        ("PARTITION ID", "/partitionId"),
                        ("TRANSACTION ID", "/transactionId"),
                        ("RETRIES", "/retryCount"),
                        ("FAILED AT", "/failedAt"),
                        ("ERROR", "/errorMessage"),
                    ],
                    &[("CREATED", "/createdAt"), ("DATA", "/data")],
                    wide,
                );
                t.print_or("no dead letter");
                if !t.is_empty() {
                    crate::outln!("{} of {}", items(p, "messages").len(), cell(&p["total"]));
                }
            })
        }
        DlqCommand::Retry {
            partition_id,
            transaction_id,
        } => by_ids(client, ById::Retry, &partition_id, &transaction_id, out).await,
        DlqCommand::Delete {
            partition_id,
            transaction_id,
            group,
        } => {
            let v = client
                .admin()
                .delete_dead_letter(&partition_id, &transaction_id, group.as_deref())
                .await?;
            succeeded(&v, "error", "nothing deleted")?;
            show(&v, out, "", |v, _| {
                crate::outln!(
                    "deleted {} dead letter(s) of {transaction_id}",
                    cell(&v["deleted"])
                );
            })
        }
    }
}
