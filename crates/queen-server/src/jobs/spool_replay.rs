//! Spool replay: replays sealed segments of the disk spool into PostgreSQL,
//! oldest first and in file order, whenever the database is reachable and
//! push maintenance is off. It also probes the database while it is
//! considered down and marks it up again.
//!
//! Replay goes through [`Broker::replay_spooled`], the same path as a direct push,
//! with each record's stored transactionId. A batch PostgreSQL committed but
//! whose progress was not recorded (a crash in between) is replayed again and
//! answered `duplicate`: nothing is created twice. Records PostgreSQL refuses
//! for good go to `failed/` with the reason; transient failures are retried
//! with exponential backoff.

use std::sync::Arc;
use std::time::Duration;

use queen_proto::spool::Record;
use queen_proto::{PartitionName, QueueName};
use tokio_util::sync::CancellationToken;

use queen_proto::mesh::MaintenanceKind;

use crate::backoff::Backoff;
use crate::broker::{Broker, BrokerError, PushItem};
use crate::spool::segment::{self, Batch};
use crate::spool::{Sealed, Spool};
use crate::store::{Store, StoreError};

/// How often the database is probed while it is considered down.
const PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// Ceiling of the retry backoff after a failed replay.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Attempts before an unclassified database error on one record counts as permanent.
const UNCLASSIFIED_ATTEMPTS: u32 = 5;

/// How a replay attempt failed.
enum Failure {
    /// Try the same records again later (database away, conflict, timeout).
    Transient(String),
    /// The database is unreachable: switch pushes to the spool.
    Unreachable(StoreError),
}

/// The record that keeps failing with an unclassified error, and how often it did.
#[derive(Default)]
struct Stuck {
    at: Option<(u64, u64)>,
    attempts: u32,
}

/// What the replay works with.
struct Replay<'a> {
    broker: &'a Broker,
    spool: &'a Spool,
}

impl Replay<'_> {
    fn push_maintenance(&self) -> bool {
        self.broker.maintenance(MaintenanceKind::Push)
    }
}

/// Runs until `shutdown` is cancelled.
pub(super) async fn run(
    broker: Arc<Broker>,
    store: Arc<Store>,
    spool: Arc<Spool>,
    shutdown: CancellationToken,
) {
    let r = Replay {
        broker: &broker,
        spool: &spool,
    };
    let flush = spool.config().flush_interval;
    let mut retry = Backoff::doubling(flush, MAX_BACKOFF);
    let mut wait_after_failure: Option<std::time::Duration> = None;
    let mut stuck = Stuck::default();
    loop {
        let wait = if spool.outage.is_down() {
            PROBE_INTERVAL
        } else {
            wait_after_failure.unwrap_or(flush)
        };
        tokio::select! {
            _ = spool.kick.notified() => {}
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.cancelled() => return,
        }
        if spool.outage.is_down() {
            if !(store.is_ready() && store.ping().await.is_ok()) {
                continue;
            }
            spool.outage.mark_up(spool.stats().records);
        }
        if r.push_maintenance() || spool.is_empty() || !store.is_ready() {
            continue;
        }
        match drain(&r, &shutdown, &mut stuck).await {
            Ok(()) => {
                retry.reset();
                wait_after_failure = None;
            }
            Err(Failure::Unreachable(e)) => {
                spool.outage.mark_down(&e);
                retry.reset();
                wait_after_failure = None;
            }
            Err(Failure::Transient(e)) => {
                let next = retry.next_delay();
                tracing::debug!(error = %e, retry_in_ms = next.as_millis() as u64, "spool: replay deferred");
                wait_after_failure = Some(next);
            }
        }
    }
}

/// Replays until the spool is empty, maintenance turns on, or a failure.
async fn drain(
    r: &Replay<'_>,
    shutdown: &CancellationToken,
    stuck: &mut Stuck,
) -> Result<(), Failure> {
    let spool = r.spool;
    let max = spool.config().max_batch;
    loop {
        if shutdown.is_cancelled() || r.push_maintenance() {
            return Ok(());
        }
        let Some(seg) = spool.front() else {
            if spool.active_records() == 0 {
                return Ok(());
            }
            // records wait in the open segment: seal it so it can be read
            spool
                .seal()
                .await
                .map_err(|e| Failure::Transient(e.to_string()))?;
            continue;
        };
        let dir = spool.dir().to_owned();
        let read =
            tokio::task::spawn_blocking(move || segment::read_batch(&dir, seg.seq, seg.pos, max))
                .await
                .map_err(|e| Failure::Transient(e.to_string()))?;
        let batch = match read {
            Ok(b) => b,
            Err(e) => {
                spool.quarantine(seg.seq, seg.pos, &format!("cannot read segment: {e}"));
                continue;
            }
        };
        if batch.records.is_empty() {
            match batch.bad {
                Some(reason) => spool.quarantine(seg.seq, seg.pos, &reason),
                None => spool
                    .retire(seg.seq)
                    .map_err(|e| Failure::Transient(format!("cannot remove a segment: {e}")))?,
            }
            continue;
        }
        replay(r, seg, &batch, stuck).await?;
    }
}

fn to_item(r: &Record) -> Result<PushItem, String> {
    Ok(PushItem {
        queue: QueueName::new(r.queue.clone()).map_err(|e| e.to_string())?,
        partition: PartitionName::new(r.partition.clone()).map_err(|e| e.to_string())?,
        payload: r.payload.clone(),
        transaction_id: Some(r.transaction_id.clone()),
        trace_id: r.trace_id,
        message_id: r.message_id,
        producer_sub: r.producer_sub.clone(),
    })
}

/// What to do with an error from replaying records.
enum Verdict {
    Retry(Failure),
    /// Retry a few times, then give up on the record.
    RetryCounted(String),
    Refuse(String),
}

fn judge(e: BrokerError) -> Verdict {
    match e {
        BrokerError::Store(e) if e.is_unavailable() || e.is_timeout() => {
            Verdict::Retry(Failure::Unreachable(e))
        }
        BrokerError::Store(e) if e.is_retryable() => {
            Verdict::Retry(Failure::Transient(e.to_string()))
        }
        BrokerError::Store(e) if e.is_refusal() => Verdict::Refuse(e.to_string()),
        BrokerError::Invalid(m) => Verdict::Refuse(m),
        other => Verdict::RetryCounted(other.to_string()),
    }
}

/// Replays one batch: all at once, or record by record when something in it is
/// refused, so one bad record cannot hold back the rest.
async fn replay(
    r: &Replay<'_>,
    seg: Sealed,
    batch: &Batch,
    stuck: &mut Stuck,
) -> Result<(), Failure> {
    let (broker, spool) = (r.broker, r.spool);
    let items: Result<Vec<PushItem>, String> =
        batch.records.iter().map(|(_, r)| to_item(r)).collect();
    if let Ok(items) = items {
        match broker.replay_spooled(&items).await {
            Ok(n) => {
                spool.advance(seg.seq, batch.end, &batch.records, n);
                return Ok(());
            }
            Err(e) => match judge(e) {
                Verdict::Retry(f) => return Err(f),
                Verdict::RetryCounted(_) | Verdict::Refuse(_) if batch.records.len() > 1 => {}
                Verdict::RetryCounted(m) | Verdict::Refuse(m) => {
                    // a batch of one: handled below with the per-record rules
                    tracing::debug!(error = %m, "spool: single-record batch failed");
                }
            },
        }
    }
    for (i, (offset, record)) in batch.records.iter().enumerate() {
        let next = batch.records.get(i + 1).map_or(batch.end, |(o, _)| *o);
        let one = std::slice::from_ref(&batch.records[i]);
        let item = match to_item(record) {
            Ok(item) => item,
            Err(reason) => {
                spool.fail_record(
                    seg.seq,
                    *offset,
                    record,
                    &format!("invalid record: {reason}"),
                );
                spool.advance(seg.seq, next, one, 0);
                continue;
            }
        };
        let reason = match broker.replay_spooled(std::slice::from_ref(&item)).await {
            Ok(n) => {
                spool.advance(seg.seq, next, one, n);
                continue;
            }
            Err(e) => match judge(e) {
                Verdict::Retry(f) => return Err(f),
                Verdict::Refuse(m) => m,
                Verdict::RetryCounted(m) => {
                    let at = (seg.seq, *offset);
                    if stuck.at != Some(at) {
                        *stuck = Stuck {
                            at: Some(at),
                            attempts: 0,
                        };
                    }
                    stuck.attempts += 1;
                    if stuck.attempts < UNCLASSIFIED_ATTEMPTS {
                        return Err(Failure::Transient(m));
                    }
                    format!("{m} (after {UNCLASSIFIED_ATTEMPTS} attempts)")
                }
            },
        };
        spool.fail_record(
            seg.seq,
            *offset,
            record,
            &format!("refused by PostgreSQL: {reason}"),
        );
        spool.advance(seg.seq, next, one, 0);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::DbError;

    fn verdict(e: BrokerError) -> &'static str {
        match judge(e) {
            Verdict::Retry(Failure::Unreachable(_)) => "unreachable",
            Verdict::Retry(Failure::Transient(_)) => "transient",
            Verdict::RetryCounted(_) => "counted",
            Verdict::Refuse(_) => "refuse",
        }
    }

    #[test]
    fn errors_are_sorted_into_retry_and_refuse() {
        let store = |e: StoreError| verdict(BrokerError::Store(e));
        let db = DbError::message;
        assert_eq!(store(StoreError::Unavailable(db("gone"))), "unreachable");
        assert_eq!(store(StoreError::NotReady), "unreachable");
        assert_eq!(
            store(StoreError::Timeout(db("canceling statement"))),
            "unreachable"
        );
        assert_eq!(store(StoreError::Conflict(db("deadlock"))), "transient");
        assert_eq!(store(StoreError::Rejected(db("bad"))), "refuse");
        assert_eq!(store(StoreError::UniqueViolation(db("dup"))), "refuse");
        assert_eq!(store(StoreError::Other(db("bad byte"))), "counted");
        assert_eq!(verdict(BrokerError::Invalid("name".into())), "refuse");
    }

    #[test]
    fn records_become_push_items_with_their_transaction_id() {
        let r = Record {
            queue: "q".into(),
            partition: "p".into(),
            transaction_id: "t-1".into(),
            trace_id: None,
            message_id: Some(uuid::Uuid::from_u128(9)),
            payload: "{}".into(),
            producer_sub: Some("svc".into()),
            spooled_at_ms: 0,
        };
        let item = to_item(&r).unwrap();
        assert_eq!(item.transaction_id.as_deref(), Some("t-1"));
        assert_eq!(item.message_id, Some(uuid::Uuid::from_u128(9)));
        assert_eq!(item.producer_sub.as_deref(), Some("svc"));
        let bad = Record {
            queue: String::new(),
            ..r
        };
        assert!(to_item(&bad).is_err());
    }
}
