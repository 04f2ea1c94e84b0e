//! One partition of the source: read in one snapshot, written in one
//! transaction (`store::import::ImportTx`), or counted for a dry run.

use std::collections::HashSet;

use anyhow::{anyhow, Context as _};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::report::{GroupReport, PartitionReport};
use std::sync::Arc;

use super::progress::Progress;
use super::Plan;
use crate::broker::crypto::PayloadCipher;
use crate::config::DbConfig;
use crate::store::import::{
    CursorWrite, DeadLetterWrite, ImportMessage, Source, SourceCursor, SourceMessage,
    SourcePartition, SourceSnapshot, QUEUE_MODE,
};
use crate::store::Store;

/// What every partition's import shares.
pub(super) struct Ctx {
    pub store: Arc<Store>,
    pub cipher: Option<PayloadCipher>,
    pub plan: Plan,
    /// Messages read per keyset page (and appended per `queen.push_batch` call).
    pub page: i64,
    /// How far before the previous run's end a catch-up reads again.
    pub overlap: chrono::Duration,
    pub progress: Progress,
    pub dry_run: bool,
    /// The broker's database settings (TLS certificates for the source too).
    pub db: DbConfig,
}

/// Imports or (dry run) counts one partition; `queue_id` is `None` in a dry run.
pub(super) async fn run_one(
    ctx: &Ctx,
    source: &mut Source,
    p: &SourcePartition,
    queue_id: Option<Uuid>,
) -> anyhow::Result<PartitionReport> {
    match queue_id {
        Some(id) if !ctx.dry_run => import(ctx, source, p, id).await,
        _ => dry_run(ctx, source, p).await,
    }
}

/// A message's payload in this broker's stored form: an envelope of the
/// reference is opened (to check the key) and kept, re-serialized in this
/// broker's field order; anything else is the source's JSON text.
pub(super) fn stored_payload(
    cipher: Option<&PayloadCipher>,
    queue: &str,
    partition: &str,
    m: &SourceMessage,
) -> anyhow::Result<String> {
    let Some(c) = cipher else {
        if crate::broker::crypto::is_envelope(&m.payload) {
            return Err(anyhow!(
                "message {} of queue {queue} partition {partition} is encrypted and QUEEN_ENCRYPTION_KEY is not set",
                m.transaction_id
            ));
        }
        return Ok(m.payload.clone());
    };
    match c.reseal_foreign(&m.payload) {
        Ok(Some((_, ours))) => Ok(ours),
        Ok(None) => Ok(m.payload.clone()),
        Err(why) => Err(anyhow!(
            "cannot decrypt message {} of queue {queue} partition {partition}: {why}",
            m.transaction_id
        )),
    }
}

fn import_message(
    cipher: Option<&PayloadCipher>,
    queue: &str,
    partition: &str,
    m: &SourceMessage,
) -> anyhow::Result<ImportMessage> {
    Ok(ImportMessage {
        id: m.id,
        transaction_id: m.transaction_id.clone(),
        trace_id: m.trace_id,
        payload: stored_payload(cipher, queue, partition, m)?,
        created_at: m.created_at,
        producer_sub: m.producer_sub.clone(),
    })
}

/// A group's position on a partition (reference-schema-0.15.md §2): its
/// cursor, else (not queue mode) its subscription start, the partition's
/// own entry before the queue's; `None` = before every message.
fn position(
    plan: &Plan,
    p: &SourcePartition,
    c: &SourceCursor,
) -> (Option<(DateTime<Utc>, Uuid)>, String) {
    if c.group == QUEUE_MODE {
        return (c.cursor, "queue".into());
    }
    let sub = plan.subscription(&c.group, &p.queue, &p.name);
    let mode = sub.map_or_else(|| "all".to_owned(), |s| s.mode.clone());
    match (c.cursor, sub) {
        (Some(at), _) => (Some(at), mode),
        (None, Some(s)) => (Some((s.timestamp, Uuid::nil())), mode),
        (None, None) => (None, mode),
    }
}

/// The groups of a partition as the report shows them, with their
/// positions; groups whose names this broker refuses are left out (the plan
/// lists them as skipped).
async fn groups(
    ctx: &Ctx,
    snap: &SourceSnapshot<'_>,
    p: &SourcePartition,
) -> anyhow::Result<Vec<(SourceCursor, Option<(DateTime<Utc>, Uuid)>, GroupReport)>> {
    let mut out = Vec::new();
    for c in snap.cursors(p.id).await? {
        if !ctx.plan.group_ok(&c.group) {
            continue;
        }
        let (pos, mode) = position(&ctx.plan, p, &c);
        let unconsumed = snap.count_after(p.id, pos).await?;
        let leased = if c.live_lease {
            i64::from((c.batch_size - c.acked_count).max(0)).min(unconsumed)
        } else {
            0
        };
        let report = GroupReport {
            group: c.group.clone(),
            mode,
            source_unconsumed: unconsumed,
            leased_redelivered: leased,
            target_pending: None,
        };
        out.push((c, pos, report));
    }
    Ok(out)
}

/// Counts what importing `p` would do.
pub(super) async fn dry_run(
    ctx: &Ctx,
    source: &mut Source,
    p: &SourcePartition,
) -> anyhow::Result<PartitionReport> {
    let mark = ctx.store.import_watermark(p.id).await?.and_then(|w| w.last);
    let snap = source.snapshot().await?;
    let source_messages = snap.count_after(p.id, None).await?;
    let imported = snap.count_after(p.id, mark).await?;
    let groups = groups(ctx, &snap, p).await?;
    let dead = snap.dead_letters(p.id).await?;
    let folded = dead.len() - fold(&dead).len();
    let traces = snap.traces(p.id).await?.len();
    snap.close().await?;
    Ok(PartitionReport {
        name: p.name.clone(),
        source_messages,
        imported,
        late: 0,
        target_messages: None,
        groups: groups.into_iter().map(|g| g.2).collect(),
        source_dead_letters: dead.len() as i64,
        dead_letters_folded: folded as i64,
        target_dead_letters: None,
        source_traces: traces as i64,
        target_traces: None,
    })
}

/// Dead-letter rows with one row per (group, message): the first failure.
fn fold(
    dead: &[crate::store::import::SourceDeadLetter],
) -> Vec<&crate::store::import::SourceDeadLetter> {
    let mut seen = HashSet::new();
    dead.iter()
        .filter(|d| seen.insert((d.group.clone(), d.message.id)))
        .collect()
}

/// Imports `p` into `queue_id`: everything new since the last run, in one
/// transaction. `progress` is told of every page appended.
pub(super) async fn import(
    ctx: &Ctx,
    source: &mut Source,
    p: &SourcePartition,
    queue_id: Uuid,
) -> anyhow::Result<PartitionReport> {
    let what = || format!("queue {} partition {}", p.queue, p.name);
    let mut tx = ctx
        .store
        .import_begin(queue_id, &p.name, p.created_at, p.id)
        .await
        .with_context(what)?;
    let done = tx.start().last;
    let snap = source.snapshot().await?;
    let source_messages = snap.count_after(p.id, None).await?;
    // a catch-up looks again a little before the last run's end: a message
    // committed late there sorts before it. Only the keys are read; the
    // messages this broker does not hold are fetched whole and appended.
    let (mut imported, mut late) = (0i64, 0i64);
    if let Some(end) = done {
        let keys = snap
            .keys_between(p.id, (end.0 - ctx.overlap, Uuid::nil()), end)
            .await?;
        let txns: Vec<String> = keys.iter().map(|k| k.1.clone()).collect();
        let unknown: HashSet<String> = tx
            .unknown(&txns)
            .await
            .with_context(what)?
            .into_iter()
            .collect();
        let ids: Vec<Uuid> = keys
            .iter()
            .filter(|k| unknown.contains(&k.1))
            .map(|k| k.0)
            .collect();
        if !ids.is_empty() {
            let found = snap.messages_by_id(p.id, &ids).await?;
            let converted = found
                .iter()
                .map(|m| import_message(ctx.cipher.as_ref(), &p.queue, &p.name, m))
                .collect::<anyhow::Result<Vec<_>>>()?;
            late = tx.append(&converted).await.with_context(what)?;
            imported += late;
        }
        ctx.progress.messages(keys.len() as u64);
    }
    let mut after = done;
    loop {
        let page = snap.messages_after(p.id, after, ctx.page).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.key());
        let converted = page
            .iter()
            .map(|m| import_message(ctx.cipher.as_ref(), &p.queue, &p.name, m))
            .collect::<anyhow::Result<Vec<_>>>()?;
        imported += tx.append(&converted).await.with_context(what)?;
        ctx.progress.messages(page.len() as u64);
        if (page.len() as i64) < ctx.page {
            break;
        }
    }
    let groups = groups(ctx, &snap, p).await?;
    for (c, pos, _) in &groups {
        tx.write_cursor(&CursorWrite {
            group: c.group.clone(),
            position: *pos,
            retry_count: c.batch_retry_count,
            total_consumed: c.total_consumed,
            batches_consumed: c.total_batches,
            last_consumed_at: c.last_consumed_at,
        })
        .await
        .with_context(what)?;
    }
    let dead = snap.dead_letters(p.id).await?;
    let kept = fold(&dead);
    for d in &kept {
        if !ctx.plan.group_ok(&d.group) {
            continue;
        }
        tx.write_dead_letter(&DeadLetterWrite {
            group: d.group.clone(),
            message: import_message(ctx.cipher.as_ref(), &p.queue, &p.name, &d.message)?,
            error: d.error.clone(),
            retry_count: d.retry_count,
            failed_at: d.failed_at,
        })
        .await
        .with_context(what)?;
    }
    let traces = snap.traces(p.id).await?;
    for t in &traces {
        tx.write_trace(t).await.with_context(what)?;
    }
    snap.close().await?;
    let partition_id = tx.partition_id();
    tx.commit().await.with_context(what)?;
    let here = ctx.store.import_counts(partition_id).await?;
    Ok(PartitionReport {
        name: p.name.clone(),
        source_messages,
        imported,
        late,
        target_messages: Some(here.messages),
        groups: groups
            .into_iter()
            .map(|(_, _, mut g)| {
                g.target_pending = here
                    .pending
                    .iter()
                    .find(|(name, _)| *name == g.group)
                    .map(|(_, n)| *n);
                g
            })
            .collect(),
        source_dead_letters: dead.len() as i64,
        dead_letters_folded: (dead.len() - kept.len()) as i64,
        target_dead_letters: Some(here.dead_letters),
        source_traces: traces.len() as i64,
        target_traces: Some(here.traces),
    })
}
