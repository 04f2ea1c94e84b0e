//! `queen-server import`: brings a reference Queen 0.15 database across
//! (`docs/migrating.md`; the layout is `reference-schema-0.15.md`).
//!
//! What it writes goes through this broker's storage code (`store::import`):
//! queues with every option, partitions, messages in their order with their
//! ids, transactionIds, traceIds, payloads and times (`queen.push_batch`),
//! consumer groups' and queue mode's positions, subscription starts, dead
//! letters, traces and the maintenance flags. Derived tables of the
//! reference (`partition_lookup`, `stats`, watermarks) are not read: this
//! broker's own are written by the same statements as for any push.
//!
//! Each source partition is read in one snapshot and written in one
//! transaction with its progress row, so a run stopped anywhere leaves every
//! partition imported up to a message of the source or not touched, and the
//! next run (the catch-up pass) takes only what is new. Everything that can
//! be checked before writing is: the source's layout and permissions, and
//! that the configured key opens the source's envelopes.
//!
//! May call: `store`, `broker::crypto` (the envelope), `config`.

mod partition;
mod progress;
pub mod report;

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use queen_proto::mesh::MaintenanceKind;
use queen_proto::names::{ConsumerGroup, PartitionName, QueueName};
use uuid::Uuid;

use crate::broker::crypto::PayloadCipher;
use crate::config::Config;
use crate::store::import::{
    describe_url, Source, SourcePartition, SourceQueue, SourceSubscription,
};
use crate::store::Store;
use progress::Progress;
use report::{QueueReport, Report, Skipped};

/// Messages read per keyset page of the source, appended per
/// `queen.push_batch` call: large enough that a call's fixed cost is small
/// next to its rows, small enough that a page of 4 KiB payloads stays ~20 MiB.
pub const DEFAULT_PAGE: i64 = 5_000;
/// How far before the previous run's last message a catch-up reads again
/// (seconds): a push transaction of the reference that committed after the
/// last run read past its time (reference-schema-0.15.md §4, §5.2); the
/// reference's pushes are single short transactions.
pub const DEFAULT_OVERLAP_SECS: u64 = 10;

/// What to import and how.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The reference database (a PostgreSQL URL).
    pub from: String,
    /// The schema of the reference's tables there (`queen`).
    pub schema: String,
    /// Count what would be imported, write nothing.
    pub dry_run: bool,
    /// No progress bar (`--json`).
    pub quiet: bool,
    /// Partitions imported at once, each on its own connections.
    pub jobs: usize,
    pub overlap: Duration,
    pub page: i64,
}

/// What the partitions' imports share: subscription starts and the names
/// this broker refuses.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    subscriptions: Vec<SourceSubscription>,
    refused_groups: Mutex<BTreeSet<String>>,
}

impl Plan {
    /// A group's stored start on a partition: the partition's own, else the queue's.
    fn subscription(
        &self,
        group: &str,
        queue: &str,
        partition: &str,
    ) -> Option<&SourceSubscription> {
        let of = |name: &str| {
            self.subscriptions
                .iter()
                .find(|s| s.group == group && s.queue == queue && s.partition == name)
        };
        of(partition).or_else(|| of(""))
    }

    /// Whether this broker takes the group's name (refused ones are listed).
    fn group_ok(&self, group: &str) -> bool {
        let ok = ConsumerGroup::new(group).is_ok();
        if !ok {
            if let Ok(mut refused) = self.refused_groups.lock() {
                refused.insert(group.to_owned());
            }
        }
        ok
    }
}

/// Checks, before anything is written, that the configured key opens the
/// source's envelopes (one of them: a wrong key opens none).
async fn check_key(source: &Source, cipher: Option<&PayloadCipher>) -> anyhow::Result<()> {
    let Some((queue, partition, txn, body)) = source.first_envelope().await? else {
        return Ok(());
    };
    match cipher {
        None => bail!(
            "the source holds encrypted payloads (message {txn} of queue {queue} partition {partition}) and QUEEN_ENCRYPTION_KEY is not set: set it to the reference's key"
        ),
        Some(c) => match c.reseal_foreign(&body) {
            Ok(_) => Ok(()),
            Err(why) => bail!(
                "QUEEN_ENCRYPTION_KEY does not open the source's payloads: message {txn} of queue {queue} partition {partition}: {why}"
            ),
        },
    }
}

/// Clears the options the reference stores but never applies to its clients
/// (sheet §1.2: `ttl` and `retry_delay` are read by no pop, ack, retention or
/// eviction; `max_queue_size` by no push), which this broker enforces: carried
/// across, they would expire, hold back or refuse messages the reference
/// takes and delivers. Returns what was left out, for the report.
fn unenforced_options(q: &mut SourceQueue) -> Vec<Skipped> {
    let mut out = Vec::new();
    for (option, value) in [
        ("ttl", &mut q.options.ttl),
        ("retryDelay", &mut q.options.retry_delay),
        ("maxSize", &mut q.options.max_size),
    ] {
        if *value != 0 {
            out.push(Skipped {
                what: format!("option {option}={value} of queue {:?}", q.name),
                why: "the reference stores it but never applies it; this broker would (imported as none: set it with /configure to have it)".into(),
            });
            *value = 0;
        }
    }
    out
}

/// One partition to import, with the queue it goes into.
struct Work {
    index: usize,
    partition: SourcePartition,
    queue_id: Option<Uuid>,
}

/// Runs an import (or a dry run) and returns its report. An error names what
/// stopped it; partitions imported before it stay imported.
pub async fn run(config: &Config, opts: &ImportOptions) -> anyhow::Result<Report> {
    let started = Instant::now();
    let source = Source::connect(&opts.from, &opts.schema, &config.db).await?;
    let cipher = config.encryption_key.as_ref().map(PayloadCipher::new);
    check_key(&source, cipher.as_ref()).await?;
    let mut queues = source.queues().await?;
    let partitions = source.partitions().await?;
    let subscriptions = source.subscriptions().await?;
    let flags = source.maintenance_flags().await?;
    let streams = source.stream_queries().await?;

    let mut report = Report {
        dry_run: opts.dry_run,
        source: format!("{} (schema {})", describe_url(&opts.from), opts.schema),
        ..Report::default()
    };
    let store = Arc::new(Store::new(&config.db).map_err(|e| anyhow!("{e}"))?);
    if !opts.dry_run {
        store.migrate().await.map_err(|e| {
            anyhow!(
                "cannot prepare this broker's schema at {} ({e}); if the reference's schema `queen` is in the same database, rename it first (docs/migrating.md)",
                config.db.target()
            )
        })?;
    }

    // queues: refused names are skipped with their partitions
    let mut queue_ids = std::collections::HashMap::new();
    for q in &mut queues {
        report.skipped.extend(unenforced_options(q));
        if let Err(e) = QueueName::new(q.name.as_str()) {
            report.skipped.push(Skipped {
                what: format!("queue {:?} and its messages", q.name),
                why: format!("this broker refuses the name: {e}"),
            });
            continue;
        }
        let (id, written) = if opts.dry_run {
            (None, false)
        } else {
            let (id, w) = store.import_queue(q).await?;
            (Some(id), w)
        };
        queue_ids.insert(q.name.clone(), id);
        report.queues.push(QueueReport {
            name: q.name.clone(),
            options_written: written,
            partitions: Vec::new(),
        });
    }
    let plan = Plan {
        subscriptions: subscriptions
            .into_iter()
            .filter(|s| {
                let why = if s.queue.is_empty() {
                    Some("scoped to a namespace or task, not a queue: this broker stores a group's start per queue (no 0.15 code writes such rows)".to_owned())
                } else if !queue_ids.contains_key(&s.queue) {
                    Some("its queue is not imported".to_owned())
                } else {
                    ConsumerGroup::new(s.group.as_str())
                        .err()
                        .map(|e| format!("this broker refuses the group name: {e}"))
                };
                if let Some(why) = &why {
                    report.skipped.push(Skipped {
                        what: format!(
                            "subscription of group {:?} on queue {:?} partition {:?} (mode {})",
                            s.group, s.queue, s.partition, s.mode
                        ),
                        why: why.clone(),
                    });
                }
                why.is_none()
            })
            .collect(),
        refused_groups: Mutex::new(BTreeSet::new()),
    };
    if !opts.dry_run {
        for s in &plan.subscriptions {
            if store.import_subscription(s).await? {
                report.subscriptions_written += 1;
            }
        }
        for (key, on) in &flags {
            let kind = if key == "pop_maintenance_mode" {
                MaintenanceKind::Pop
            } else {
                MaintenanceKind::Push
            };
            if store.maintenance(kind).await? != *on {
                store.set_maintenance(kind, *on).await?;
            }
        }
    }
    report.maintenance = flags;
    if streams > 0 {
        report.skipped.push(Skipped {
            what: format!("{streams} queries of the streams engine and their state"),
            why: "register the queries with this broker again (their state starts empty)".into(),
        });
    }

    let mut work = VecDeque::new();
    for p in partitions {
        let Some(&queue_id) = queue_ids.get(&p.queue) else {
            continue;
        };
        if let Err(e) = PartitionName::new(p.name.as_str()) {
            report.skipped.push(Skipped {
                what: format!("partition {:?} of queue {:?}", p.name, p.queue),
                why: format!("this broker refuses the name: {e}"),
            });
            continue;
        }
        work.push_back(Work {
            index: work.len(),
            partition: p,
            queue_id,
        });
    }
    let progress = Progress::new(queue_ids.len(), work.len(), opts.quiet);
    let ctx = Arc::new(partition::Ctx {
        store: Arc::clone(&store),
        cipher,
        plan,
        page: opts.page.max(1),
        overlap: chrono::Duration::from_std(opts.overlap).unwrap_or_default(),
        progress,
        dry_run: opts.dry_run,
        db: config.db.clone(),
    });
    let results = run_partitions(&ctx, opts, source, work).await;
    ctx.progress.finish();
    let done = results?;
    for (p, r) in done {
        if let Some(q) = report.queues.iter_mut().find(|q| q.name == p.queue) {
            q.partitions.push(r);
        }
    }
    if let Ok(refused) = ctx.plan.refused_groups.lock() {
        for g in refused.iter() {
            report.skipped.push(Skipped {
                what: format!("consumer group {g:?} (its positions and dead letters)"),
                why: ConsumerGroup::new(g.as_str())
                    .err()
                    .map_or_else(String::new, |e| {
                        format!("this broker refuses the name: {e}")
                    }),
            });
        }
    }
    report.sum(started.elapsed().as_secs_f64());
    Ok(report)
}

/// Imports (or counts) the partitions of `work` on `opts.jobs` workers, each
/// with a source connection of its own; the first error stops the others
/// after the partition they are on.
async fn run_partitions(
    ctx: &Arc<partition::Ctx>,
    opts: &ImportOptions,
    first: Source,
    work: VecDeque<Work>,
) -> anyhow::Result<Vec<(SourcePartition, report::PartitionReport)>> {
    let total = work.len();
    let queue = Arc::new(Mutex::new(work));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    let mut first = Some(first);
    for _ in 0..opts.jobs.clamp(1, total.max(1)) {
        let source = match first.take() {
            Some(s) => s,
            None => Source::connect(&opts.from, &opts.schema, &ctx.db).await?,
        };
        let (ctx, queue, stop) = (Arc::clone(ctx), Arc::clone(&queue), Arc::clone(&stop));
        tasks.spawn(async move {
            let mut source = source;
            let mut out = Vec::new();
            loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let next = queue.lock().ok().and_then(|mut q| q.pop_front());
                let Some(w) = next else { break };
                match partition::run_one(&ctx, &mut source, &w.partition, w.queue_id).await {
                    Ok(r) => {
                        ctx.progress.partition_done(&w.partition.queue);
                        out.push((w.index, w.partition, r));
                    }
                    Err(e) => {
                        stop.store(true, Ordering::Relaxed);
                        return Err(e);
                    }
                }
            }
            Ok(out)
        });
    }
    let mut done = Vec::with_capacity(total);
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(mut part)) => done.append(&mut part),
            Ok(Err(e)) => failure = failure.or(Some(e)),
            Err(e) => failure = failure.or(Some(anyhow!("an import worker failed: {e}"))),
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    done.sort_by_key(|d| d.0);
    Ok(done.into_iter().map(|(_, p, r)| (p, r)).collect())
}
