//! `queen ephemeral` (`/api/v1/ephemeral/*`) and `queen streams` (the
//! registered stream queries and their state).

use clap::{Args, Subcommand, ValueEnum};
use queen_client::{segment, Client};
use serde_json::{json, Map, Value};

use crate::admin::{items, table, table_wide};
use crate::output::{self, cell, Failure, Format};

#[derive(Debug, Subcommand)]
pub enum EphemeralCommand {
    /// Every ephemeral queue with its depth, bytes and drops.
    List,
    /// Declare a queue with its options (a declaration replaces the previous one).
    Configure(EphemeralConfigure),
    /// Push JSON messages (one per argument).
    Push {
        queue: String,
        #[arg(required = true)]
        messages: Vec<String>,
        #[arg(long, short)]
        partition: Option<String>,
    },
    /// Pop messages once, print them, and ack them; status 4 when none.
    Pop(EphemeralPop),
    /// Pending messages per partition and group.
    Depth {
        queue: String,
        #[arg(long, short)]
        group: Option<String>,
    },
    /// Drop every message, void every lease (the declaration stays).
    Reset { queue: String },
    /// Delete the queue with its cursors and declaration.
    Delete {
        queue: String,
        /// Confirm the deletion.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Debug, Args)]
pub struct EphemeralConfigure {
    pub queue: String,
    /// Most payload bytes held (ceiling 16 MiB).
    #[arg(long)]
    pub max_bytes: Option<u64>,
    /// Most messages held (ceiling 10000).
    #[arg(long)]
    pub max_length: Option<u64>,
    /// What a push past the bounds does.
    #[arg(long, value_enum)]
    pub policy: Option<Policy>,
    /// Drop messages older than this many seconds (0: no limit).
    #[arg(long, value_name = "SECONDS")]
    pub ttl_seconds: Option<u64>,
    /// Lease of a popped message (default 30 s).
    #[arg(long, value_name = "SECONDS")]
    pub lease_seconds: Option<u64>,
    /// Deliveries before a message is dropped for a group (default 5).
    #[arg(long)]
    pub retry_limit: Option<u64>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Policy {
    /// Refuse the push (429 queue_full).
    Reject,
    /// Evict the oldest messages.
    DropOldest,
}

#[derive(Debug, Args)]
pub struct EphemeralPop {
    pub queue: String,
    #[arg(long, short)]
    pub partition: Option<String>,
    #[arg(long, short)]
    pub group: Option<String>,
    #[arg(long, short, default_value_t = 1)]
    pub batch: u32,
    /// Wait up to this many seconds for a message.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub wait: u64,
    /// Leave the messages leased instead of acking them.
    #[arg(long)]
    pub no_ack: bool,
}

#[derive(Debug, Subcommand)]
pub enum StreamsCommand {
    /// The registered stream queries with their state rows and lag.
    List,
    /// The state rows of a query on one source partition.
    State {
        query_id: String,
        partition_id: String,
        /// Only keys starting with this.
        #[arg(long)]
        prefix: Option<String>,
    },
}

pub async fn run(client: &Client, cmd: EphemeralCommand, out: Format) -> Result<(), Failure> {
    let admin = client.admin();
    match cmd {
        EphemeralCommand::List => {
            let v = admin.get_json("/api/v1/ephemeral/queues").await?;
            output::show(&v, out, "/queues", |v, wide| {
                table_wide(
                    items(v, "queues"),
                    &[
                        ("QUEUE", "/queue"),
                        ("TIER", "/tier"),
                        ("DEPTH", "/depth"),
                        ("BYTES", "/bytes"),
                        ("PARTITIONS", "/partitions"),
                        ("GROUPS", "/groups"),
                    ],
                    &[("DROPS", "/drops"), ("OPTIONS", "/options")],
                    wide,
                )
                .print_or("no ephemeral queue");
            })
        }
        EphemeralCommand::Configure(a) => {
            let mut options = Map::new();
            for (k, v) in [
                ("maxBytes", a.max_bytes),
                ("maxLength", a.max_length),
                ("ttlSeconds", a.ttl_seconds),
                ("leaseSeconds", a.lease_seconds),
                ("retryLimit", a.retry_limit),
            ] {
                if let Some(n) = v {
                    options.insert(k.into(), json!(n));
                }
            }
            if let Some(p) = a.policy {
                let p = match p {
                    Policy::Reject => "reject",
                    Policy::DropOldest => "dropOldest",
                };
                options.insert("policy".into(), json!(p));
            }
            let body = json!({"queue": a.queue, "options": options});
            let v = admin
                .post_json("/api/v1/ephemeral/configure", &body)
                .await?;
            output::show(&v, out, "", |v, _| {
                crate::outln!("declared {} with {}", a.queue, v["options"]);
            })
        }
        EphemeralCommand::Push {
            queue,
            messages,
            partition,
        } => {
            let mut list = Vec::new();
            for (i, m) in messages.iter().enumerate() {
                let payload: Value = serde_json::from_str(m.trim()).map_err(|e| {
                    Failure::Usage(format!("message {} is not valid JSON: {e}", i + 1))
                })?;
                list.push(json!({ "payload": payload }));
            }
            let mut body = json!({"queue": queue, "messages": list});
            if let Some(p) = partition {
                body["partition"] = json!(p);
            }
            let v = admin.post_json("/api/v1/ephemeral/push", &body).await?;
            output::show(&v, out, "", |v, _| {
                crate::outln!("pushed {} to {queue}", cell(&v["pushed"]));
            })
        }
        EphemeralCommand::Pop(a) => pop(client, a, out).await,
        EphemeralCommand::Depth { queue, group } => {
            let mut path = format!("/api/v1/ephemeral/queues/{}/depth", segment(&queue));
            if let Some(g) = group {
                path.push_str(&format!("?group={}", segment(&g)));
            }
            let v = admin.get_json(&path).await?;
            output::show(&v, out, "/partitions", |v, wide| {
                crate::outln!(
                    "{}: {} pending in {} partition(s), {} bytes",
                    cell(&v["queue"]),
                    cell(&v["pending"]),
                    cell(&v["partitionsPending"]),
                    cell(&v["bytes"])
                );
                table(
                    items(v, "partitions"),
                    &[
                        ("PARTITION", "/partition"),
                        ("PENDING", "/pending"),
                        ("BYTES", "/bytes"),
                    ],
                )
                .wide(wide)
                .print_or("no partition");
            })
        }
        EphemeralCommand::Reset { queue } => {
            let v = admin
                .post_json("/api/v1/ephemeral/reset", &json!({ "queue": queue }))
                .await?;
            output::show(&v, out, "", |v, _| {
                crate::outln!("reset {queue}: {} message(s) dropped", cell(&v["dropped"]));
            })
        }
        EphemeralCommand::Delete { queue, yes } => {
            if !yes {
                return Err(Failure::Usage(format!(
                    "deleting ephemeral queue {queue} drops its messages, cursors and declaration; add --yes to confirm"
                )));
            }
            let v = admin
                .delete_json(&format!("/api/v1/ephemeral/queue/{}", segment(&queue)))
                .await?;
            output::show(&v, out, "", |v, _| {
                if v["deleted"] == true {
                    crate::outln!("deleted ephemeral queue {queue}");
                } else {
                    crate::outln!("ephemeral queue {queue} did not exist");
                }
            })
        }
    }
}

async fn pop(client: &Client, a: EphemeralPop, out: Format) -> Result<(), Failure> {
    let mut path = format!(
        "/api/v1/ephemeral/pop?queue={}&batch={}",
        segment(&a.queue),
        a.batch.max(1)
    );
    if a.wait > 0 {
        path.push_str(&format!("&wait=true&timeout={}", a.wait.min(600) * 1000));
    }
    for (k, v) in [("partition", &a.partition), ("group", &a.group)] {
        if let Some(v) = v {
            path.push_str(&format!("&{k}={}", segment(v)));
        }
    }
    let v = client.admin().get_json(&path).await?;
    let messages = items(&v, "messages").to_vec();
    output::show(&v, out, "/messages", |v, wide| {
        if !messages.is_empty() {
            let t = table(
                items(v, "messages"),
                &[
                    ("PARTITION", "/partition"),
                    ("ID", "/id"),
                    ("ATTEMPTS", "/attempts"),
                    ("PAYLOAD", "/payload"),
                ],
            )
            .wide(wide);
            crate::outln!("{}", t.render());
        }
    })?;
    if messages.is_empty() {
        if out.is_human() {
            eprintln!("queen: no message");
        }
        return Err(Failure::Empty);
    }
    if a.no_ack {
        return Ok(());
    }
    let acks: Vec<Value> = messages.iter().map(|m| json!({"id": m["id"]})).collect();
    let mut body = json!({"queue": a.queue, "acks": acks});
    if let Some(g) = &a.group {
        body["group"] = json!(g);
    }
    let r = client
        .admin()
        .post_json("/api/v1/ephemeral/ack", &body)
        .await
        .map_err(output::printed_not_acked)?;
    let refused: Vec<String> = items(&r, "results")
        .iter()
        .filter(|x| x["outcome"] != "acked")
        .map(|x| format!("{} ({})", cell(&x["id"]), cell(&x["outcome"])))
        .collect();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(Failure::Error(format!(
            "acks not applied: {}",
            refused.join(", ")
        )))
    }
}

pub async fn streams(client: &Client, cmd: StreamsCommand, out: Format) -> Result<(), Failure> {
    let admin = client.admin();
    match cmd {
        StreamsCommand::List => {
            let v = admin.get_json("/api/v1/streams/queries").await?;
            output::show(&v, out, "/queries", |v, wide| {
                table_wide(
                    items(v, "queries"),
                    &[
                        ("NAME", "/name"),
                        ("SOURCE", "/sourceQueue"),
                        ("SINK", "/sinkQueue"),
                        ("STATE ROWS", "/stateRows"),
                        ("LAG", "/lag"),
                    ],
                    &[
                        ("ID", "/id"),
                        ("GROUP", "/consumerGroup"),
                        ("CONFIG HASH", "/configHash"),
                    ],
                    wide,
                )
                .print_or("no stream query");
            })
        }
        StreamsCommand::State {
            query_id,
            partition_id,
            prefix,
        } => {
            let mut body = json!({"query_id": query_id, "partition_id": partition_id});
            if let Some(p) = prefix {
                body["key_prefix"] = json!(p);
            }
            let v = admin.post_json("/streams/v1/state/get", &body).await?;
            output::show(&v, out, "/rows", |v, wide| {
                table(
                    items(v, "rows"),
                    &[
                        ("KEY", "/key"),
                        ("UPDATED", "/updated_at"),
                        ("VALUE", "/value"),
                    ],
                )
                .wide(wide)
                .print_or("no state");
            })
        }
    }
}
