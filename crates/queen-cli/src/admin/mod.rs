//! `queen status`, `queues`, `dlq`, `groups`, `maintenance`, `messages`,
//! `traces` and `metrics`.

use queen_client::{Client, RetryPolicy, Seek};
use serde_json::{json, Value};

use crate::cli::{ConfigureArgs, GroupsCommand, MaintenanceArgs, OnOff, QueuesCommand};
use crate::output::{self, cell, Failure, Format, Table};

mod dlq;
mod inspect;

pub use dlq::dlq;
pub(crate) use inspect::flatten;
pub use inspect::{messages, metrics, traces};

pub(crate) use crate::output::show;
/// The elements of the array at `key` of `v` (or of `v` itself with an empty key).
pub(crate) fn items<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    let arr = if key.is_empty() { v } else { &v[key] };
    arr.as_array().map_or(&[], Vec::as_slice)
}

/// A table with one row per element of `list`, a column per JSON pointer.
pub(crate) fn table(list: &[Value], columns: &[(&'static str, &str)]) -> Table {
    let header: Vec<&'static str> = columns.iter().map(|(h, _)| *h).collect();
    let mut t = Table::new(&header);
    for item in list {
        t.row(
            columns
                .iter()
                .map(|(_, ptr)| cell(item.pointer(ptr).unwrap_or(&Value::Null)))
                .collect(),
        );
    }
    t
}

/// [`table`] with the `extra` columns too when `wide`, and nothing cut then.
pub(crate) fn table_wide(
    list: &[Value],
    columns: &[(&'static str, &str)],
    extra: &[(&'static str, &str)],
    wide: bool,
) -> Table {
    if wide {
        let all: Vec<(&'static str, &str)> = columns.iter().chain(extra).copied().collect();
        table(list, &all).wide(true)
    } else {
        table(list, columns)
    }
}

pub async fn status(client: &Client, out: Format) -> Result<(), Failure> {
    let mut brokers = Vec::new();
    for url in client.urls() {
        // each URL on its own, so one dead replica shows as such
        let one = Client::builder()
            .url(url.as_str())
            .retry(RetryPolicy {
                attempts: 1,
                ..RetryPolicy::default()
            })
            .build()?;
        let entry = match one.admin().health().await {
            Ok(h) => {
                json!({"url": url, "status": h["status"], "database": h["database"], "version": h["version"], "error": null})
            }
            Err(e) if e.status() == Some(503) => {
                json!({"url": url, "status": "unhealthy", "database": "disconnected", "version": null, "error": output::one_line(&e)})
            }
            Err(e) => {
                json!({"url": url, "status": "unreachable", "database": null, "version": null, "error": output::one_line(&e)})
            }
        };
        brokers.push(entry);
    }
    let healthy = brokers.iter().any(|b| b["status"] == "healthy");
    let (overview, maintenance) = if healthy {
        let o = client.admin().overview().await?;
        let m = client.admin().maintenance().await?;
        (o, serde_json::to_value(m).unwrap_or(Value::Null))
    } else {
        (Value::Null, Value::Null)
    };
    let all = json!({"brokers": brokers, "overview": overview, "maintenance": maintenance});
    show(&all, out, "/brokers", |v, wide| {
        let t = table(
            items(v, "brokers"),
            &[
                ("URL", "/url"),
                ("STATUS", "/status"),
                ("DATABASE", "/database"),
                ("VERSION", "/version"),
                ("ERROR", "/error"),
            ],
        )
        .wide(wide);
        crate::outln!("{}", t.render());
        let o = &v["overview"];
        if !o.is_null() {
            let m = &o["messages"];
            crate::outln!(
                "queues {}  partitions {}  messages {} (pending {}, processing {}, completed {}, dead letter {})",
                cell(&o["queues"]), cell(&o["partitions"]), cell(&m["total"]), cell(&m["pending"]),
                cell(&m["processing"]), cell(&m["completed"]), cell(&m["deadLetter"])
            );
            let mt = &v["maintenance"];
            let onoff = |b: &Value| {
                if b.as_bool() == Some(true) {
                    "on"
                } else {
                    "off"
                }
            };
            crate::outln!(
                "maintenance: push {}, pop {}, spooled messages {}",
                onoff(&mt["maintenanceMode"]),
                onoff(&mt["popMaintenanceMode"]),
                cell(&mt["bufferedMessages"])
            );
        }
    })?;
    if healthy {
        Ok(())
    } else {
        Err(Failure::Unreachable("no broker is healthy".into()))
    }
}

pub async fn queues(
    client: &Client,
    cmd: Option<QueuesCommand>,
    out: Format,
) -> Result<(), Failure> {
    match cmd.unwrap_or(QueuesCommand::List) {
        QueuesCommand::List => {
            let v = client.admin().queues().await?;
            let list = Value::Array(items(&v, "queues").to_vec());
            show(&list, out, "", |l, wide| {
                table_wide(
                    items(l, ""),
                    &[
                        ("QUEUE", "/name"),
                        ("NAMESPACE", "/namespace"),
                        ("TASK", "/task"),
                        ("PARTITIONS", "/partitions"),
                        ("MESSAGES", "/messages/total"),
                        ("PENDING", "/messages/pending"),
                        ("PROCESSING", "/messages/processing"),
                    ],
                    &[("CREATED", "/createdAt"), ("ID", "/id")],
                    wide,
                )
                .print_or("no queue");
            })
        }
        QueuesCommand::Describe { queue } => {
            let v = client.admin().queue(&queue).await?;
            show(&v, out, "/partitions", |q, wide| {
                crate::outln!(
                    "queue {}  namespace {}  task {}  created {}",
                    cell(&q["name"]),
                    cell(&q["namespace"]),
                    cell(&q["task"]),
                    cell(&q["createdAt"])
                );
                let t = table(
                    items(q, "partitions"),
                    &[
                        ("PARTITION", "/name"),
                        ("TOTAL", "/stats/total"),
                        ("PENDING", "/stats/pending"),
                        ("PROCESSING", "/stats/processing"),
                        ("COMPLETED", "/stats/completed"),
                        ("DEAD LETTER", "/stats/deadLetter"),
                        ("NEWEST", "/newestMessage"),
                    ],
                )
                .wide(wide);
                t.print_or("no partition");
            })
        }
        QueuesCommand::Configure(args) => configure(client, args, out).await,
        QueuesCommand::Delete { queue, yes } => {
            if !yes {
                return Err(Failure::Usage(format!(
                    "deleting queue {queue} removes its messages, cursors and dead letters; add --yes to confirm"
                )));
            }
            let r = client.queue(queue.as_str()).delete().await?;
            let v = serde_json::to_value(&r).unwrap_or(Value::Null);
            show(&v, out, "", |_, _| {
                if r.existed {
                    crate::outln!("deleted queue {}", r.queue);
                } else {
                    crate::outln!("queue {} did not exist", r.queue);
                }
            })
        }
    }
}

async fn configure(client: &Client, args: ConfigureArgs, out: Format) -> Result<(), Failure> {
    let mut options = match &args.options {
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => return Err(Failure::Usage("--options must be a JSON object".into())),
            Err(e) => return Err(Failure::Usage(format!("--options is not valid JSON: {e}"))),
        },
        None => json!({}),
    };
    let numbers = [
        ("leaseTime", args.lease_time),
        ("retryLimit", args.retry_limit),
        ("priority", args.priority),
        ("ttl", args.ttl),
        ("delayedProcessing", args.delayed_processing),
        ("windowBuffer", args.window_buffer),
        ("retentionSeconds", args.retention_seconds),
        (
            "completedRetentionSeconds",
            args.completed_retention_seconds,
        ),
        ("maxWaitTimeSeconds", args.max_wait_time_seconds),
        ("maxSize", args.max_size),
        ("retryDelay", args.retry_delay),
        ("retryDelayMax", args.retry_delay_max),
    ];
    for (key, value) in numbers {
        if let Some(n) = value {
            options[key] = json!(n);
        }
    }
    if args.retention {
        options["retentionEnabled"] = json!(true);
    }
    if args.encryption {
        options["encryptionEnabled"] = json!(true);
    }
    if args.dead_letter_queue {
        options["deadLetterQueue"] = json!(true);
    }
    if args.dlq_after_max_retries {
        options["dlqAfterMaxRetries"] = json!(true);
    }
    if let Some(f) = args.retry_backoff {
        if !f.is_finite() || f < 1.0 {
            return Err(Failure::Usage(
                "--retry-backoff must be a number of at least 1".into(),
            ));
        }
        options["retryBackoff"] = json!(f);
    }
    let mut queue = client.queue(args.queue.as_str());
    if let Some(ns) = &args.namespace {
        queue = queue.namespace(ns.as_str());
    }
    if let Some(t) = &args.task {
        queue = queue.task(t.as_str());
    }
    let r = queue.configure_json(&options).await?;
    let v = serde_json::to_value(&r).unwrap_or(Value::Null);
    show(&v, out, "", |_, wide| {
        crate::outln!("configured queue {}", r.queue);
        let mut t = Table::new(&["OPTION", "VALUE"]).wide(wide);
        if let Some(map) = r.options.as_object() {
            for (k, val) in map {
                t.row(vec![k.clone(), cell(val)]);
            }
        }
        crate::outln!("{}", t.render());
    })
}

pub async fn groups(client: &Client, cmd: GroupsCommand, out: Format) -> Result<(), Failure> {
    let admin = client.admin();
    match cmd {
        GroupsCommand::List => {
            let v = admin.consumer_groups().await?;
            show(&v, out, "", |v, wide| {
                table(
                    items(v, ""),
                    &[
                        ("GROUP", "/name"),
                        ("QUEUE", "/queueName"),
                        ("STATE", "/state"),
                        ("PARTITIONS LAGGING", "/partitionsWithLag"),
                        ("MAX LAG S", "/maxTimeLag"),
                        ("SUBSCRIPTION", "/subscriptionMode"),
                    ],
                )
                .wide(wide)
                .print_or("no consumer group");
            })
        }
        GroupsCommand::Lag { min_lag } => {
            let v = admin.lagging(min_lag).await?;
            show(&v, out, "", |v, wide| {
                table(
                    items(v, ""),
                    &[
                        ("GROUP", "/consumer_group"),
                        ("QUEUE", "/queue_name"),
                        ("PARTITION", "/partition_name"),
                        ("OFFSET LAG", "/offset_lag"),
                        ("TIME LAG S", "/time_lag_seconds"),
                        ("OLDEST UNCONSUMED", "/oldest_unconsumed_at"),
                    ],
                )
                .wide(wide)
                .print_or("no lagging partition");
            })
        }
        GroupsCommand::Show { group } => {
            let v = admin.consumer_group(&group).await?;
            show(&v, out, "", |v, wide| {
                let mut t = Table::new(&[
                    "QUEUE",
                    "PARTITION",
                    "CONSUMED",
                    "OFFSET LAG",
                    "TIME LAG S",
                    "LEASED",
                    "LAST CONSUMED",
                ])
                .wide(wide);
                for (queue, detail) in v.as_object().into_iter().flatten() {
                    for p in items(detail, "partitions") {
                        t.row(vec![
                            queue.clone(),
                            cell(&p["partition"]),
                            cell(&p["totalConsumed"]),
                            cell(&p["offsetLag"]),
                            cell(&p["timeLagSeconds"]),
                            cell(&p["leaseActive"]),
                            cell(&p["lastConsumedAt"]),
                        ]);
                    }
                }
                t.print_or("the group has no cursor");
            })
        }
        GroupsCommand::Seek(a) => {
            let v = match (&a.partition, &a.to) {
                (Some(p), _) => admin.seek_partition_to_end(&a.group, &a.queue, p).await?,
                (None, Some(t)) => admin.seek(&a.group, &a.queue, &Seek::To(t.clone())).await?,
                (None, None) => admin.seek(&a.group, &a.queue, &Seek::ToEnd).await?,
            };
            succeeded(&v, "error", "seek refused")?;
            show(&v, out, "", |v, _| {
                let moved = v
                    .get("partitionsUpdated")
                    .or_else(|| v.get("updated"))
                    .unwrap_or(&Value::Null);
                crate::outln!(
                    "moved group {} on {}: {} partitions",
                    a.group,
                    a.queue,
                    cell(moved)
                );
            })
        }
        GroupsCommand::Delete {
            group,
            queue,
            keep_metadata,
        } => {
            let v = admin
                .delete_consumer_group(&group, queue.as_deref(), !keep_metadata)
                .await?;
            show(&v, out, "", |v, _| {
                crate::outln!(
                    "deleted group {group}: {} partition cursors",
                    cell(&v["deletedPartitions"])
                );
            })
        }
    }
}

pub async fn maintenance(
    client: &Client,
    args: MaintenanceArgs,
    out: Format,
) -> Result<(), Failure> {
    let admin = client.admin();
    if let Some(state) = args.state {
        let on = state == OnOff::On;
        if args.pop {
            admin.set_pop_maintenance(on).await?;
        } else {
            admin.set_maintenance(on).await?;
        }
    }
    let m = admin.maintenance().await?;
    let v = serde_json::to_value(&m).unwrap_or(Value::Null);
    show(&v, out, "", |_, _| {
        let onoff = |b: bool| if b { "on" } else { "off" };
        crate::outln!(
            "push maintenance {} (pushes are {}), pop maintenance {} (pops {}); spooled messages {}",
            onoff(m.maintenance_mode),
            if m.maintenance_mode { "spooled on the broker's disk" } else { "stored" },
            onoff(m.pop_maintenance_mode),
            if m.pop_maintenance_mode { "answer empty" } else { "deliver" },
            m.buffered_messages
        );
    })
}

/// Fails with `what: <v[reason]>` unless the answer says `"success": true`.
fn succeeded(v: &Value, reason: &str, what: &str) -> Result<(), Failure> {
    if v["success"] == true {
        Ok(())
    } else {
        Err(Failure::Error(format!("{what}: {}", cell(&v[reason]))))
    }
}

/// What `dlq`/`messages` do to one message by its ids.
#[derive(Debug, Clone, Copy)]
enum ById {
    Retry,
    Delete,
}

async fn by_ids(
    client: &Client,
    op: ById,
    partition_id: &str,
    transaction_id: &str,
    out: Format,
) -> Result<(), Failure> {
    let admin = client.admin();
    let v = match op {
        ById::Retry => {
            let v = admin.retry_message(partition_id, transaction_id).await?;
            succeeded(&v, "error", "the broker did not retry the message")?;
            v
        }
        ById::Delete => {
            let v = admin.delete_message(partition_id, transaction_id).await?;
            succeeded(&v, "message", "nothing deleted")?;
            v
        }
    };
    show(&v, out, "", |v, _| match op {
        ById::Retry => crate::outln!(
            "moved {transaction_id} back into its partition ({})",
            cell(&v["result"])
        ),
        ById::Delete => crate::outln!("deleted message {transaction_id}"),
    })
}
