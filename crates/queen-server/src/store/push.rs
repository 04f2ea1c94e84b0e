//! Push: appending messages with `queen.push_batch`, and the fold of repeated
//! keys that every caller applies first. Concurrent appends share one
//! transaction through the batcher (`batcher.rs`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::{col, rows_into, Store, StoreError};

/// One message to append, already validated.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub queue_id: Uuid,
    pub partition: String,
    pub message_id: Uuid,
    pub transaction_id: String,
    pub trace_id: Option<Uuid>,
    /// The payload as JSON text, exactly as it will be delivered.
    pub payload: String,
    pub producer_sub: Option<String>,
}

/// What happened to one appended message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendStatus {
    Queued,
    /// The transactionId is taken; the message id is the original's.
    Duplicate,
    /// Refused: the queue holds its `maxSize` (the value) of messages not
    /// yet consumed. Nothing was stored; the partition id is nil.
    Full(i32),
}

/// The error text of an item refused by its queue's bound.
pub fn full_queue_error(queue: &str, max_size: i32) -> String {
    format!("queue {queue} is full (maxSize {max_size}): not stored")
}

/// The outcome of one [`NewMessage`], by its position in the input.
#[derive(Debug, Clone)]
pub struct AppendOutcome {
    pub index: usize,
    pub status: AppendStatus,
    pub message_id: Uuid,
    pub partition_id: Uuid,
}

/// Where the items of a push went once repeated keys were folded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Folded {
    /// Input position of each first occurrence, in input order.
    pub unique: Vec<usize>,
    /// Per input item: its index into `unique`, and whether it repeats an
    /// earlier key (and is answered `duplicate` of that one).
    pub slots: Vec<(usize, bool)>,
}

/// Folds (queue, partition, transactionId) keys that repeat within `keys`
/// onto their first occurrence: the first wins, later ones point at it. Used
/// inside one request and across the requests of a merged push flight.
pub fn fold_repeats<'a>(keys: impl IntoIterator<Item = (Uuid, &'a str, &'a str)>) -> Folded {
    let mut first_of: HashMap<(Uuid, &str, &str), usize> = HashMap::new();
    let mut folded = Folded::default();
    for (i, key) in keys.into_iter().enumerate() {
        match first_of.get(&key) {
            Some(&at) => folded.slots.push((at, true)),
            None => {
                let at = folded.unique.len();
                first_of.insert(key, at);
                folded.unique.push(i);
                folded.slots.push((at, false));
            }
        }
    }
    folded
}

impl Store {
    /// Appends messages; see `queen.push_batch`. Items must be free of repeated
    /// (queue, partition, transactionId) keys ([`fold_repeats`]). Concurrent
    /// calls share a transaction (group commit, see `store/batcher.rs`).
    /// `bounded[i]`: item `i` is held to its queue's `maxSize` (see
    /// `append_bounded`); empty when none is.
    pub async fn append(
        &self,
        items: &[NewMessage],
        bounded: Vec<bool>,
    ) -> Result<Vec<AppendOutcome>, StoreError> {
        if !self.is_ready() {
            return Err(StoreError::NotReady);
        }
        if items.is_empty() {
            return Ok(Vec::new());
        }
        self.batcher.append(items.to_vec(), bounded).await
    }
}

/// One `queen.push_batch` call on `client`. `strict` (inside `/transaction`)
/// refuses a known transactionId instead of answering it `duplicate`.
pub(super) async fn append_with(
    client: &impl GenericClient,
    items: &[NewMessage],
    strict: bool,
) -> Result<Vec<AppendOutcome>, StoreError> {
    push_batch(client, items, strict, None, None).await
}

/// [`append_with`] where `bounded[i]` says whether item `i` is held to its
/// queue's `maxSize` (set from the queue's options when they have one); a
/// call with a bounded item is `queen.push_bounded`'s, one without runs no
/// step of the bound. A refused item comes back [`AppendStatus::Full`].
/// `alone`: the call is its own transaction (a flight), so it may go the
/// optimistic way first and, when that gives up (SQLSTATE `QB001`, nothing
/// written), be made again deciding; with `None` (calls inside a longer
/// transaction) it decides at once. A call with a queue in [`NearBound`]
/// decides at once too.
pub(super) async fn append_bounded(
    client: &impl GenericClient,
    items: &[NewMessage],
    strict: bool,
    bounded: &[bool],
    alone: Option<&NearBound>,
) -> Result<Vec<AppendOutcome>, StoreError> {
    debug_assert_eq!(items.len(), bounded.len());
    let queues = || {
        items
            .iter()
            .zip(bounded)
            .filter(|(_, &b)| b)
            .map(|(m, _)| m.queue_id)
    };
    if let Some(near) = alone.filter(|near| !near.any(queues())) {
        match push_batch(client, items, strict, None, Some((bounded, false))).await {
            Err(StoreError::Other(e)) if e.code().is_some_and(|c| c.code() == GAVE_UP) => {
                near.mark(queues());
            }
            other => return other,
        }
    }
    push_batch(client, items, strict, None, Some((bounded, true))).await
}

/// SQLSTATE of `queen.push_bounded` giving the optimistic way up.
const GAVE_UP: &str = "QB001";

/// How long a queue whose optimistic push gave up has its pushes decide at
/// once.
const NEAR_BOUND_FOR: Duration = Duration::from_secs(1);

/// Bounded queues whose optimistic push gave up lately (near their bound,
/// or no slot free): for [`NEAR_BOUND_FOR`] their pushes decide at once, so
/// a queue at its bound does not have each push appended twice (and each
/// give-up logged as an error by PostgreSQL).
#[derive(Debug, Default)]
pub(super) struct NearBound(Mutex<HashMap<Uuid, Instant>>);

impl NearBound {
    fn any(&self, mut queues: impl Iterator<Item = Uuid>) -> bool {
        let mut near = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        near.retain(|_, at| at.elapsed() < NEAR_BOUND_FOR);
        queues.any(|q| near.contains_key(&q))
    }

    fn mark(&self, queues: impl Iterator<Item = Uuid>) {
        let mut near = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        near.extend(queues.map(|q| (q, now)));
    }
}

/// [`append_with`] with the createdAt of each item (the importer's messages
/// keep the source's times); `queen.push_batch` raises a time that would
/// move its partition backwards to the partition's newest.
pub(super) async fn append_dated(
    client: &impl GenericClient,
    items: &[NewMessage],
    created_ats: &[DateTime<Utc>],
) -> Result<Vec<AppendOutcome>, StoreError> {
    debug_assert_eq!(items.len(), created_ats.len());
    push_batch(client, items, false, Some(created_ats), None).await
}

async fn push_batch(
    client: &impl GenericClient,
    items: &[NewMessage],
    strict: bool,
    created_ats: Option<&[DateTime<Utc>]>,
    bounded: Option<(&[bool], bool)>,
) -> Result<Vec<AppendOutcome>, StoreError> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let queue_ids: Vec<Uuid> = items.iter().map(|m| m.queue_id).collect();
    let partitions: Vec<&str> = items.iter().map(|m| m.partition.as_str()).collect();
    let message_ids: Vec<Uuid> = items.iter().map(|m| m.message_id).collect();
    let txn_ids: Vec<&str> = items.iter().map(|m| m.transaction_id.as_str()).collect();
    let trace_ids: Vec<Option<Uuid>> = items.iter().map(|m| m.trace_id).collect();
    let payloads: Vec<&str> = items.iter().map(|m| m.payload.as_str()).collect();
    let subs: Vec<Option<&str>> = items.iter().map(|m| m.producer_sub.as_deref()).collect();
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &queue_ids,
        &partitions,
        &message_ids,
        &txn_ids,
        &trace_ids,
        &payloads,
        &subs,
        &strict,
    ];
    // a call with a bounded item goes to queen.push_bounded; every other
    // call takes no step of the bound
    let bounded = bounded.filter(|(b, _)| b.contains(&true));
    let sql = match &bounded {
        Some((bounded, decide)) => {
            params.extend([bounded as &(dyn ToSql + Sync), decide]);
            "SELECT idx, status, message_id, partition_id, bound
             FROM queen.push_bounded($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        }
        None => {
            params.push(&created_ats);
            "SELECT idx, status, message_id, partition_id, NULL::integer AS bound
             FROM queen.push_batch($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        }
    };
    let stmt = client.prepare_cached(sql).await?;
    let rows = client.query(&stmt, &params).await?;
    let mut out = rows_into(&rows, |r| {
        let idx: i32 = col(r, "idx")?;
        let status: &str = col(r, "status")?;
        let partition_id: Option<Uuid> = col(r, "partition_id")?;
        Ok(AppendOutcome {
            index: usize::try_from(idx - 1).unwrap_or_default(),
            status: match status {
                "queued" => AppendStatus::Queued,
                "full" => AppendStatus::Full(col::<Option<i32>>(r, "bound")?.unwrap_or_default()),
                _ => AppendStatus::Duplicate,
            },
            message_id: col(r, "message_id")?,
            partition_id: partition_id.unwrap_or_default(),
        })
    })?;
    out.sort_by_key(|o| o.index);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_that_gave_up_decides_at_once_for_a_while() {
        let near = NearBound::default();
        let (q1, q2) = (Uuid::from_u128(1), Uuid::from_u128(2));
        assert!(!near.any([q1, q2].into_iter()));
        near.mark([q1].into_iter());
        assert!(near.any([q2, q1].into_iter()));
        assert!(!near.any([q2].into_iter()));
        // an old mark is forgotten
        near.0
            .lock()
            .unwrap()
            .insert(q2, Instant::now() - NEAR_BOUND_FOR);
        assert!(!near.any([q2].into_iter()));
        assert!(!near.0.lock().unwrap().contains_key(&q2));
    }

    #[test]
    fn repeats_point_at_their_first_occurrence() {
        let q1 = Uuid::from_u128(1);
        let q2 = Uuid::from_u128(2);
        let folded = fold_repeats([
            (q1, "p", "a"),
            (q1, "p", "b"),
            (q1, "p", "a"),
            // the same transactionId in another partition or queue is another key
            (q1, "other", "a"),
            (q2, "p", "a"),
            (q1, "p", "b"),
        ]);
        assert_eq!(folded.unique, vec![0, 1, 3, 4]);
        assert_eq!(
            folded.slots,
            vec![
                (0, false),
                (1, false),
                (0, true),
                (2, false),
                (3, false),
                (1, true)
            ]
        );
        assert_eq!(fold_repeats([]), Folded::default());
    }
}
