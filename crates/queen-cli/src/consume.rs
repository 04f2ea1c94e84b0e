//! `queen pop`, `queen tail` and `queen ack`.

use std::time::Duration;

use queen_client::{AckRequest, AckStatus, Client, Message, Queue, SubscriptionMode};

use crate::cli::{AckArgs, AckStatusArg, ConsumeArgs, PopArgs, Subscription, TailArgs};
use crate::output::{self, Failure, Format, Table};

/// Long-poll wait of each pop of `tail --follow`.
const FOLLOW_WAIT: Duration = Duration::from_secs(30);
/// Pause after a failed pop of `tail --follow` before the next one.
const FOLLOW_RETRY: Duration = Duration::from_secs(1);

fn queue_of(client: &Client, args: &ConsumeArgs) -> Queue {
    let mut q = client
        .queue(args.queue.as_deref().unwrap_or_default())
        .batch(args.batch.max(1))
        .commit_on_delivery(args.auto_ack);
    if let Some(p) = &args.partition {
        q = q.partition(p.as_str());
    }
    if let Some(g) = &args.group {
        q = q.group(g.as_str());
    }
    if let Some(s) = args.subscription {
        q = q.subscription_mode(match s {
            Subscription::All => SubscriptionMode::All,
            Subscription::New => SubscriptionMode::New,
        });
    }
    q
}

/// Acks `messages` as completed unless the flags say otherwise.
async fn ack_popped(
    client: &Client,
    args: &ConsumeArgs,
    messages: &[Message],
) -> Result<(), Failure> {
    if args.no_ack || args.auto_ack || messages.is_empty() {
        return Ok(());
    }
    let results = client
        .ack_batch(messages, AckStatus::Completed, None)
        .await
        .map_err(output::printed_not_acked)?;
    let refused: Vec<String> = results
        .iter()
        .filter(|r| !r.success)
        .map(|r| {
            format!(
                "{} ({})",
                r.transaction_id,
                r.error.as_deref().unwrap_or("refused")
            )
        })
        .collect();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(Failure::Error(format!(
            "the broker refused {} acks: {}",
            refused.len(),
            refused.join(", ")
        )))
    }
}

fn message_table(messages: &[Message], wide: bool) -> Table {
    let mut header = vec!["PARTITION", "TRANSACTION ID", "CREATED", "DATA"];
    if wide {
        header.extend(["PARTITION ID", "LEASE ID", "GROUP"]);
    }
    let mut t = Table::new(&header).wide(wide);
    for m in messages {
        let mut row = vec![
            m.partition.clone(),
            m.transaction_id.clone(),
            m.created_at.clone(),
            m.data.to_string(),
        ];
        if wide {
            row.extend([
                m.partition_id.clone(),
                m.lease_id.clone(),
                m.consumer_group.clone(),
            ]);
        }
        t.row(row);
    }
    t
}

pub async fn pop(client: &Client, args: PopArgs, out: Format) -> Result<(), Failure> {
    if !(0.0..=600.0).contains(&args.wait) {
        return Err(Failure::Usage(
            "--wait must be between 0 and 600 seconds".into(),
        ));
    }
    let queue = queue_of(client, &args.consume)
        .wait(args.wait > 0.0)
        .timeout(Duration::from_secs_f64(args.wait));
    let messages = queue.pop().await?;
    if !out.is_human() {
        output::print(&messages, out, "")?;
    } else if !messages.is_empty() {
        crate::outln!("{}", message_table(&messages, out.is_wide()).render());
    }
    if messages.is_empty() {
        if out.is_human() {
            eprintln!("queen: no message");
        }
        return Err(Failure::Empty);
    }
    ack_popped(client, &args.consume, &messages).await
}

pub async fn tail(client: &Client, args: TailArgs, out: Format) -> Result<(), Failure> {
    if args.limit == Some(0) {
        return Ok(());
    }
    let base = queue_of(client, &args.consume);
    let queue = if args.follow {
        base.wait(true).timeout(FOLLOW_WAIT)
    } else {
        base.wait(false)
    };
    let mut seen = 0u64;
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        // never pop more than the limit leaves room for
        let this_pop = match args.limit {
            Some(limit) => queue.clone().batch(
                args.consume
                    .batch
                    .max(1)
                    .min(u32::try_from(limit - seen).unwrap_or(u32::MAX)),
            ),
            None => queue.clone(),
        };
        let popped = tokio::select! {
            _ = &mut interrupted => return Ok(()),
            r = this_pop.pop() => r,
        };
        let messages = match popped {
            Ok(m) => m,
            // a follower rides out outages; a one-shot tail reports them
            Err(e) if args.follow && e.is_retryable() => {
                eprintln!("queen: {}; retrying", output::one_line(&e));
                tokio::time::sleep(FOLLOW_RETRY).await;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if messages.is_empty() {
            if args.follow {
                continue;
            }
            return Ok(());
        }
        for m in &messages {
            if out == Format::Yaml {
                let doc = serde_yaml_ng::to_string(m).map_err(|e| Failure::Error(e.to_string()))?;
                output::write_out(format_args!("---\n{doc}"));
            } else if !out.is_human() {
                let line = serde_json::to_string(m).map_err(|e| Failure::Error(e.to_string()))?;
                crate::outln!("{line}");
            } else {
                crate::outln!(
                    "{}  {}  {}  {}",
                    m.created_at,
                    m.partition,
                    m.transaction_id,
                    m.data
                );
            }
        }
        ack_popped(client, &args.consume, &messages).await?;
        seen += messages.len() as u64;
        if args.limit.is_some_and(|l| seen >= l) {
            return Ok(());
        }
    }
}

pub async fn ack(client: &Client, args: AckArgs, out: Format) -> Result<(), Failure> {
    let status = match args.status {
        AckStatusArg::Completed => AckStatus::Completed,
        AckStatusArg::Failed => AckStatus::Failed,
        AckStatusArg::Retry => AckStatus::Retry,
        AckStatusArg::Dlq => AckStatus::Dlq,
    };
    let mut req =
        AckRequest::new(args.partition_id.as_str(), args.transaction_id.as_str()).status(status);
    if let Some(l) = &args.lease_id {
        req = req.lease_id(l.as_str());
    }
    if let Some(g) = &args.group {
        req = req.group(g.as_str());
    }
    if let Some(e) = &args.error {
        req = req.error(e.as_str());
    }
    let result = client.ack_ids(&req).await?;
    if !out.is_human() {
        output::print(&result, out, "")?;
    } else if result.success {
        let extra = if result.dlq { ", dead-lettered" } else { "" };
        crate::outln!(
            "acknowledged {} as {}{extra}",
            result.transaction_id,
            status.as_str()
        );
    }
    if result.success {
        Ok(())
    } else {
        Err(Failure::Error(format!(
            "the broker refused the ack: {}",
            result.error.as_deref().unwrap_or("unknown status")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn message_tables_have_one_row_per_message() {
        let m: Message = serde_json::from_value(json!({
            "id": "m1", "transactionId": "t1", "traceId": null, "data": {"a": 1},
            "producerSub": null, "createdAt": "2026-05-02T08:15:30.123456Z",
            "partitionId": "p1", "partition": "Default", "leaseId": "l1",
            "consumerGroup": "__QUEUE_MODE__"
        }))
        .unwrap();
        let text = message_table(&[m], false).render();
        let row: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(
            row,
            ["Default", "t1", "2026-05-02T08:15:30.123456Z", r#"{"a":1}"#],
            "{text}"
        );
    }
}
