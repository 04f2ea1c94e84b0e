//! `queen dlq`: list, retry and delete dead letters.

use queen_client::Client;
use serde_json::Value;

use super::{by_ids, items, show, table, ById};
use crate::cli::DlqCommand;
use crate::output::{cell, Failure};

pub async fn dlq(client: &Client, cmd: DlqCommand, json: bool) -> Result<(), Failure> {
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
            show(&v, json, |p| {
                let t = table(
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
        } => by_ids(client, ById::Retry, &partition_id, &transaction_id, json).await,
        DlqCommand::Delete {
            partition_id,
            transaction_id,
        } => delete_dead_letter(client, &partition_id, &transaction_id, json).await,
    }
}

/// Deletes a dead-lettered message (`DELETE /api/v1/messages/:p/:t`, which in
/// the contract takes the message's dead letters with it) and checks that
/// the dead letter is gone, since a broker may keep it.
async fn delete_dead_letter(
    client: &Client,
    partition_id: &str,
    transaction_id: &str,
    json: bool,
) -> Result<(), Failure> {
    let detail = client.admin().message(partition_id, transaction_id).await?;
    by_ids(client, ById::Delete, partition_id, transaction_id, json).await?;
    let (Some(queue), Some(partition)) = (detail["queue"].as_str(), detail["partition"].as_str())
    else {
        return Ok(());
    };
    let page = client
        .dlq()
        .queue(queue)
        .partition(partition)
        .limit(1000)
        .get()
        .await?;
    if page
        .messages
        .iter()
        .any(|d| d.transaction_id == transaction_id && d.partition_id == partition_id)
    {
        return Err(Failure::Error(
            "the message is deleted, but the broker still lists its dead letter (it does not remove dead letters with their message)".into(),
        ));
    }
    Ok(())
}
