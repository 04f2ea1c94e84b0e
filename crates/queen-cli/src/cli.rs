//! The command line: every subcommand and option, as clap parses them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::output::Format;
use crate::when;

/// Talk to a Queen broker: push, pop and tail messages, inspect and manage
/// queues, consumer groups, dead letters, key/value, locks and timers.
///
/// Exit status: 0 done, 1 user error (bad usage or input, or the broker
/// refused: 4xx), 2 no broker reachable or a 5xx, 3 authentication (401, 403),
/// 4 empty (a pop or look-up found nothing).
#[derive(Debug, Parser)]
#[command(name = "queen", version, about, long_about, max_term_width = 100)]
pub struct Cli {
    /// Broker URL; several replicas comma-separated (tried in turn, a dead one
    /// skipped). Default: the context's, else http://localhost:6632.
    #[arg(long, env = "QUEEN_URL", value_delimiter = ',', global = true)]
    pub url: Vec<String>,

    /// Bearer token (JWT) for brokers with authentication on.
    #[arg(long, env = "QUEEN_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,

    /// Use this context of the configuration file instead of the current one.
    #[arg(long, env = "QUEEN_CONTEXT", global = true, value_name = "NAME")]
    pub context: Option<String>,

    /// Output format of what a command prints.
    #[arg(long, short = 'o', value_enum, global = true, value_name = "FORMAT")]
    pub output: Option<Format>,

    /// The same as -o json.
    #[arg(long, global = true)]
    pub json: bool,

    /// Seconds one request may take (long polls add their wait).
    #[arg(long, default_value_t = 30, global = true, value_name = "SECONDS")]
    pub timeout: u64,

    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// `-o`, else `--json`, else a table.
    pub fn format(&self) -> Format {
        self.output.unwrap_or(if self.json {
            Format::Json
        } else {
            Format::Table
        })
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Health of every broker URL, totals, and the maintenance switches.
    Status,
    /// List, describe, configure and delete queues (list by default).
    Queues(QueuesArgs),
    /// Create or reconfigure the queues of a YAML manifest.
    Apply(crate::apply::ApplyArgs),
    /// Push a JSON message, or JSON lines from a file or standard input.
    Push(PushArgs),
    /// Pop messages once, print them, and ack them.
    Pop(PopArgs),
    /// Print messages as they arrive (with --follow, until interrupted).
    Tail(TailArgs),
    /// Acknowledge a message by its partition id and transaction id.
    Ack(AckArgs),
    /// Run a transaction (acks and pushes, all or nothing) from a JSON or YAML file.
    Tx(crate::tx::TxArgs),
    /// Leases: extend one.
    #[command(subcommand)]
    Lease(crate::tx::LeaseCommand),
    /// Dead-letter queue: list, retry, delete.
    #[command(subcommand)]
    Dlq(DlqCommand),
    /// Consumer groups: list, lag, show, seek, delete.
    #[command(subcommand)]
    Groups(GroupsCommand),
    /// Messages: list, show, delete, retry.
    #[command(subcommand)]
    Messages(MessagesCommand),
    /// Trace events: of a message, by name, the names in use.
    #[command(subcommand)]
    Traces(TracesCommand),
    /// Key/value: get, put, delete, list.
    #[command(subcommand)]
    Kv(crate::kv::KvCommand),
    /// Locks: acquire, release, show.
    #[command(subcommand)]
    Locks(crate::kv::LocksCommand),
    /// Timers: schedule (once or recurring), list, peek, cancel.
    #[command(subcommand)]
    Timers(crate::timers::TimersCommand),
    /// Ephemeral queues: list, configure, push, pop, depth, reset, delete.
    #[command(subcommand)]
    Ephemeral(crate::ephemeral::EphemeralCommand),
    /// Stream queries: list them, read their state.
    #[command(subcommand)]
    Streams(crate::ephemeral::StreamsCommand),
    /// Throughput, lag, workers, retention, system and PostgreSQL figures.
    #[command(subcommand)]
    Analytics(crate::analytics::AnalyticsCommand),
    /// Show or switch maintenance mode (pushes spooled; with --pop, pops paused).
    Maintenance(MaintenanceArgs),
    /// The broker's metrics (JSON, or Prometheus text with --prometheus).
    Metrics(MetricsArgs),
    /// Contexts: named brokers with their token and default queue.
    #[command(subcommand)]
    Config(crate::config::ConfigCommand),
    /// Print a shell completion script.
    Completion(CompletionArgs),
}

#[derive(Debug, Args)]
pub struct QueuesArgs {
    #[command(subcommand)]
    pub command: Option<QueuesCommand>,
}

#[derive(Debug, Subcommand)]
pub enum QueuesCommand {
    /// Every queue with its partition and message counts.
    List,
    /// One queue: partitions with their message counts.
    Describe { queue: String },
    /// Create a queue or replace its options (options not given take their defaults).
    Configure(ConfigureArgs),
    /// Delete a queue with its messages, cursors and dead letters.
    Delete {
        queue: String,
        /// Confirm the deletion.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Debug, Args)]
pub struct ConfigureArgs {
    pub queue: String,
    /// Options as a JSON object (`{"leaseTime": 60}`); the flags below override it.
    #[arg(long, value_name = "JSON")]
    pub options: Option<String>,
    #[arg(long)]
    pub namespace: Option<String>,
    #[arg(long)]
    pub task: Option<String>,
    /// Seconds a popped message stays leased (default 300).
    #[arg(long, value_name = "SECONDS")]
    pub lease_time: Option<u32>,
    /// Failed acks before a message is dead-lettered (default 3).
    #[arg(long)]
    pub retry_limit: Option<u32>,
    /// Namespace pops try higher-priority queues first (default 0).
    #[arg(long)]
    pub priority: Option<u32>,
    /// Seconds after which a message is no longer delivered (default 0: never).
    #[arg(long, value_name = "SECONDS")]
    pub ttl: Option<u32>,
    /// Keep failed and expired messages in the group's dead-letter queue.
    #[arg(long)]
    pub dead_letter_queue: bool,
    /// Seconds a message stays invisible after its push.
    #[arg(long, value_name = "SECONDS")]
    pub delayed_processing: Option<u32>,
    /// Seconds a partition must be quiet before it is delivered.
    #[arg(long, value_name = "SECONDS")]
    pub window_buffer: Option<u32>,
    /// Turn the retention jobs on for this queue.
    #[arg(long)]
    pub retention: bool,
    #[arg(long, value_name = "SECONDS")]
    pub retention_seconds: Option<u32>,
    #[arg(long, value_name = "SECONDS")]
    pub completed_retention_seconds: Option<u32>,
    /// Dead-letter messages no group consumed within this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub max_wait_time_seconds: Option<u32>,
    /// Encrypt payloads at rest (the broker needs QUEEN_ENCRYPTION_KEY).
    #[arg(long)]
    pub encryption: bool,
    /// Most messages the queue holds unconsumed (0: no bound).
    #[arg(long)]
    pub max_size: Option<u32>,
    /// Milliseconds before a failed message is delivered again.
    #[arg(long, value_name = "MS")]
    pub retry_delay: Option<u32>,
    /// Multiplier of the retry delay per further attempt (e.g. 2).
    #[arg(long, value_name = "FACTOR")]
    pub retry_backoff: Option<f64>,
    /// Milliseconds the growing retry delay never passes.
    #[arg(long, value_name = "MS")]
    pub retry_delay_max: Option<u32>,
    /// Dead-letter a message once its retries are spent.
    #[arg(long)]
    pub dlq_after_max_retries: bool,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    pub queue: String,
    /// The message, one JSON value. Without it, JSON lines are read from
    /// --file or standard input (one message per line, blank lines skipped).
    pub message: Option<String>,
    #[arg(long, short)]
    pub partition: Option<String>,
    /// Read JSON lines from this file ("-" for standard input).
    #[arg(long, short, conflicts_with = "message")]
    pub file: Option<PathBuf>,
    /// Transaction id of the message (a repeat is stored once); only with a JSON argument.
    #[arg(long, requires = "message")]
    pub transaction_id: Option<String>,
    /// Trace id (a UUID) of the message; only with a JSON argument.
    #[arg(long, requires = "message")]
    pub trace_id: Option<String>,
    /// Messages per request.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// Requests in flight at once. 1 keeps the lines' order in the partition;
    /// more is faster but batches may be stored out of order.
    #[arg(long, default_value_t = 1)]
    pub in_flight: usize,
    /// Show a progress bar even for small inputs (drawn only on a terminal;
    /// elsewhere a line a second).
    #[arg(long, conflicts_with = "no_progress")]
    pub progress: bool,
    /// Never show progress.
    #[arg(long)]
    pub no_progress: bool,
}

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    /// The queue (default: QUEEN_QUEUE, else the context's queue).
    pub queue: Option<String>,
    /// Only this partition (default: any).
    #[arg(long, short)]
    pub partition: Option<String>,
    /// Consumer group (default: queue mode).
    #[arg(long, short)]
    pub group: Option<String>,
    /// Most messages per pop.
    #[arg(long, short, default_value_t = 1)]
    pub batch: u32,
    /// Leave the messages leased instead of acking them (they come back after the lease).
    #[arg(long, conflicts_with = "auto_ack")]
    pub no_ack: bool,
    /// The broker commits on delivery: no lease, no ack, at-most-once.
    #[arg(long)]
    pub auto_ack: bool,
    /// Where a new group starts: all (oldest kept) or new (from now).
    #[arg(long, value_enum)]
    pub subscription: Option<Subscription>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Subscription {
    All,
    New,
}

#[derive(Debug, Args)]
pub struct PopArgs {
    #[command(flatten)]
    pub consume: ConsumeArgs,
    /// Wait up to this many seconds for a message (default: answer at once).
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub wait: f64,
}

#[derive(Debug, Args)]
pub struct TailArgs {
    #[command(flatten)]
    pub consume: ConsumeArgs,
    /// Keep waiting for new messages until interrupted (or --limit).
    #[arg(long, short = 'F')]
    pub follow: bool,
    /// Stop after this many messages.
    #[arg(long)]
    pub limit: Option<u64>,
}

#[derive(Debug, Args)]
pub struct AckArgs {
    pub partition_id: String,
    pub transaction_id: String,
    /// The lease the message was popped under (refused if it is gone).
    #[arg(long)]
    pub lease_id: Option<String>,
    #[arg(long, short)]
    pub group: Option<String>,
    #[arg(long, value_enum, default_value_t = AckStatusArg::Completed)]
    pub status: AckStatusArg,
    /// Text stored on the dead letter.
    #[arg(long)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum AckStatusArg {
    Completed,
    Failed,
    Retry,
    Dlq,
}

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// Dead letters, newest first.
    List(DlqListArgs),
    /// Move a dead letter back into its partition, to be consumed again.
    Retry {
        partition_id: String,
        transaction_id: String,
    },
    /// Delete the dead letters of a message (the message itself stays).
    Delete {
        partition_id: String,
        transaction_id: String,
        /// Only this consumer group's dead letter (default: every group's).
        #[arg(long, short)]
        group: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct DlqListArgs {
    #[arg(long, short)]
    pub queue: Option<String>,
    #[arg(long, short)]
    pub group: Option<String>,
    #[arg(long, short)]
    pub partition: Option<String>,
    /// Failed at or after (RFC 3339, a date, or relative: '15m ago').
    #[arg(long, value_parser = when::time_arg)]
    pub from: Option<String>,
    /// Failed at or before (RFC 3339, a date, now, or relative: '5m ago').
    #[arg(long, value_parser = when::time_arg)]
    pub to: Option<String>,
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
    #[arg(long, default_value_t = 0)]
    pub offset: u32,
}

#[derive(Debug, Subcommand)]
pub enum GroupsCommand {
    /// Every (group, queue) with its state and lag.
    List,
    /// Partitions whose oldest unconsumed message is older than --min-lag.
    Lag {
        #[arg(long, value_name = "SECONDS", default_value_t = 0)]
        min_lag: u64,
    },
    /// One group: per queue, per partition.
    Show { group: String },
    /// Move a group's cursors on a queue.
    Seek(SeekArgs),
    /// Delete a group's cursors (on one queue with --queue).
    Delete {
        group: String,
        #[arg(long, short)]
        queue: Option<String>,
        /// Keep the stored subscription (the group restarts from it).
        #[arg(long)]
        keep_metadata: bool,
    },
}

#[derive(Debug, Args)]
pub struct SeekArgs {
    pub group: String,
    pub queue: String,
    /// Past every message stored now.
    #[arg(long, conflicts_with = "to", required_unless_present = "to")]
    pub to_end: bool,
    /// Past the last message created at or before this time (RFC 3339, a
    /// date, now, or relative: '1h ago').
    #[arg(long, value_parser = when::time_arg)]
    pub to: Option<String>,
    /// Only this partition (with --to-end).
    #[arg(long, short, requires = "to_end")]
    pub partition: Option<String>,
}

#[derive(Debug, Args)]
pub struct MaintenanceArgs {
    /// Switch it on or off; without it, show both switches.
    pub state: Option<OnOff>,
    /// The pop switch instead of the push switch.
    #[arg(long)]
    pub pop: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

#[derive(Debug, Subcommand)]
pub enum MessagesCommand {
    /// Messages (no payloads), newest first; the broker's default window is the last hour.
    List(MessagesListArgs),
    /// One message with its payload and per-group state.
    Show {
        partition_id: String,
        transaction_id: String,
    },
    /// Delete a message (pops skip it; its transaction id is free again).
    Delete {
        partition_id: String,
        transaction_id: String,
    },
    /// Move a dead-lettered message back into its partition.
    Retry {
        partition_id: String,
        transaction_id: String,
    },
}

#[derive(Debug, Args)]
pub struct MessagesListArgs {
    #[arg(long, short)]
    pub queue: Option<String>,
    #[arg(long, short)]
    pub partition: Option<String>,
    /// pending, processing, completed or dead_letter.
    #[arg(long)]
    pub status: Option<String>,
    /// Created at or after (RFC 3339, a date, or relative: '15m ago').
    #[arg(long, value_parser = when::time_arg)]
    pub from: Option<String>,
    /// Created at or before (RFC 3339, a date, now, or relative).
    #[arg(long, value_parser = when::time_arg)]
    pub to: Option<String>,
    #[arg(long, default_value_t = 200)]
    pub limit: u32,
    #[arg(long, default_value_t = 0)]
    pub offset: u32,
}

#[derive(Debug, Subcommand)]
pub enum TracesCommand {
    /// The trace events of one message.
    Show {
        partition_id: String,
        transaction_id: String,
    },
    /// The trace events recorded under a name.
    Name {
        name: String,
        #[arg(long, default_value_t = 100)]
        limit: u32,
        #[arg(long, default_value_t = 0)]
        offset: u32,
    },
    /// The trace names in use.
    Names {
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
}

#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// The Prometheus text exposition instead of JSON.
    #[arg(long)]
    pub prometheus: bool,
}

#[derive(Debug, Args)]
pub struct CompletionArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}
