//! Group commit for pushes: concurrent `append` calls share one transaction.
//!
//! Requests queue here while earlier flights are in the air; each flight takes
//! what waits (up to [`MAX_BATCH_ITEMS`] messages) and appends it with one
//! `queen.push_batch` call. There is no timer: a lone push goes out at once.
//! Keys repeated across merged requests keep their first occurrence
//! (`fold_repeats`), as inside one request. At most [`MAX_INFLIGHT`] flights
//! are in the air; the second leaves only once the waiting requests hold
//! [`MIN_SECOND_FLIGHT_ITEMS`] messages, so small pushes merge instead of
//! queueing on each other's partition locks. Each flight slot keeps its pool
//! connection between flights (when that leaves three quarters of the pool to
//! everything else), so only those connections grow flight-sized buffers.
//! `docs/benchmarks.md` ("Group commit") has the measurements behind the numbers.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use deadpool_postgres::Object;
use tokio::sync::{mpsc, oneshot};

use super::op::{with_op, Db, DbOp};
use super::push::{append_bounded, append_with, fold_repeats, NearBound};
use super::{AppendOutcome, AppendStatus, NewMessage, StoreError};

/// Most messages one shared transaction carries.
const MAX_BATCH_ITEMS: usize = 2_000;
/// Batches in flight at once; more requests wait and are merged.
const MAX_INFLIGHT: usize = 2;
/// Messages the waiting requests must hold for a flight to leave while
/// another one is in the air; fewer wait for it and merge with what comes.
const MIN_SECOND_FLIGHT_ITEMS: usize = 256;
/// Requests waiting for a flight before callers feel back-pressure.
const QUEUE_DEPTH: usize = 4_096;

type Reply = oneshot::Sender<Result<Vec<AppendOutcome>, StoreError>>;

struct Job {
    items: Vec<NewMessage>,
    /// Per item: held to its queue's `maxSize`; empty when none is.
    bounded: Vec<bool>,
    reply: Reply,
}

impl Job {
    fn bounded(&self, i: usize) -> bool {
        self.bounded.get(i).copied().unwrap_or(false)
    }
}

/// Handle to the batching task.
#[derive(Debug, Clone)]
pub(super) struct Batcher {
    tx: mpsc::Sender<Job>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("items", &self.items.len())
            .finish()
    }
}

impl Batcher {
    /// Spawns the batching task on the current runtime.
    pub(super) fn start(db: Db) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        tokio::spawn(run(rx, db));
        Self { tx }
    }

    /// Appends `items` as part of the next shared transaction; `bounded`
    /// as [`super::Store::append`] takes it.
    pub(super) async fn append(
        &self,
        items: Vec<NewMessage>,
        bounded: Vec<bool>,
    ) -> Result<Vec<AppendOutcome>, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job {
                items,
                bounded,
                reply,
            })
            .await
            .map_err(|_| StoreError::unavailable("push batcher stopped"))?;
        rx.await
            .map_err(|_| StoreError::unavailable("push batcher dropped the request"))?
    }
}
/// A flight slot, and the connection it keeps between flights if it pins one.
struct Slot {
    pin: bool,
    conn: Option<Object>,
    /// Shared by the slots: bounded queues whose pushes decide at once.
    near: Arc<NearBound>,
}

/// Requests waiting for a flight, and how many messages they hold.
#[derive(Default)]
struct Waiting {
    jobs: VecDeque<Job>,
    items: usize,
}

impl Waiting {
    fn push(&mut self, job: Job) {
        self.items += job.items.len();
        self.jobs.push_back(job);
    }

    /// Whether more requests are taken in: up to one flight's worth waits.
    fn has_room(&self) -> bool {
        self.items < MAX_BATCH_ITEMS
    }

    /// Whether they leave now, with `in_air` flights in the air. The first
    /// flight always leaves at once; a second one only with enough messages
    /// to be worth its own transaction.
    fn departs(&self, in_air: usize) -> bool {
        self.items > 0 && (in_air == 0 || self.items >= MIN_SECOND_FLIGHT_ITEMS)
    }

    /// The oldest requests, up to one flight (at least one request).
    fn take_flight(&mut self) -> Vec<Job> {
        let mut jobs = Vec::new();
        let mut total = 0;
        while let Some(job) = self.jobs.front() {
            if !jobs.is_empty() && total + job.items.len() > MAX_BATCH_ITEMS {
                break;
            }
            total += job.items.len();
            jobs.extend(self.jobs.pop_front());
        }
        self.items -= total;
        jobs
    }
}

async fn run(mut rx: mpsc::Receiver<Job>, db: Db) {
    let pinned = (db.pool().status().max_size / 4).min(MAX_INFLIGHT);
    let near = Arc::new(NearBound::default());
    // a stack: the pinned slots on top, so a lone flight keeps its connection
    let mut free: Vec<Slot> = (0..MAX_INFLIGHT)
        .rev()
        .map(|i| Slot {
            pin: i < pinned,
            conn: None,
            near: Arc::clone(&near),
        })
        .collect();
    let (done_tx, mut done_rx) = mpsc::channel::<Slot>(MAX_INFLIGHT);
    let mut waiting = Waiting::default();
    let mut open = true;
    loop {
        // take in whatever queued up meanwhile
        while open && waiting.has_room() {
            match rx.try_recv() {
                Ok(job) => waiting.push(job),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => open = false,
            }
        }
        if !free.is_empty() && waiting.departs(MAX_INFLIGHT - free.len()) {
            let mut slot = free.pop().expect("a free slot");
            let jobs = waiting.take_flight();
            let (db, done_tx) = (db.clone(), done_tx.clone());
            tokio::spawn(async move {
                flight(jobs, &db, &mut slot).await;
                if !slot.pin {
                    slot.conn = None;
                }
                let _ = done_tx.send(slot).await;
            });
            continue;
        }
        if !open && waiting.jobs.is_empty() {
            return;
        }
        tokio::select! {
            job = rx.recv(), if open && waiting.has_room() => match job {
                Some(job) => waiting.push(job),
                None => open = false,
            },
            Some(slot) = done_rx.recv() => free.push(slot),
        }
    }
}

/// Payload bytes of one call past which its connection is closed after it.
/// A connection keeps the buffers that carried its largest statement (for a
/// 12 MiB push, tens of MiB) as long as it lives; the next push opens another
/// one (docs/benchmarks.md, "Memory after big requests"). A new connection
/// is a new backend that compiles and plans `queen.push_batch` again, so the
/// bar is above a whole flight of 4 KiB messages (2 000 of them, 7.8 MiB):
/// at 1 MiB, flights of 4 KiB pushes closed their connection every time
/// (docs/benchmarks.md, "Consume path, part 6").
const BIG_CALL_BYTES: usize = 8 << 20;

/// One `queen.push_batch` call on the slot's connection (`bounded` empty:
/// no item is held to a `maxSize`).
async fn one_call(
    db: &Db,
    slot: &mut Slot,
    items: &[NewMessage],
    bounded: &[bool],
) -> Result<Vec<AppendOutcome>, StoreError> {
    let near = Arc::clone(&slot.near);
    let result = with_op!(*db, DbOp::Push, slot = &mut slot.conn, |client| {
        if bounded.is_empty() {
            append_with(&*client, items, false).await
        } else {
            append_bounded(&*client, items, false, bounded, Some(&near)).await
        }
    });
    if items.iter().map(|m| m.payload.len()).sum::<usize>() > BIG_CALL_BYTES {
        Db::discard(&mut slot.conn);
    }
    result
}

/// Appends the merged jobs and answers each with its own outcomes.
async fn flight(jobs: Vec<Job>, db: &Db, slot: &mut Slot) {
    if jobs.len() == 1 {
        let job = jobs.into_iter().next().expect("one job");
        let result = one_call(db, slot, &job.items, &job.bounded).await;
        let _ = job.reply.send(result);
        return;
    }
    // merge, folding keys repeated across requests onto their first occurrence
    let all: Vec<(&NewMessage, bool)> = jobs
        .iter()
        .flat_map(|j| j.items.iter().enumerate().map(|(i, m)| (m, j.bounded(i))))
        .collect();
    let folded = fold_repeats(
        all.iter()
            .map(|(m, _)| (m.queue_id, m.partition.as_str(), m.transaction_id.as_str())),
    );
    let merged: Vec<NewMessage> = folded.unique.iter().map(|&i| all[i].0.clone()).collect();
    let bounded: Vec<bool> = if all.iter().any(|&(_, b)| b) {
        folded.unique.iter().map(|&i| all[i].1).collect()
    } else {
        Vec::new()
    };
    match one_call(db, slot, &merged, &bounded).await {
        Ok(outcomes) => {
            let by_index: HashMap<usize, &AppendOutcome> =
                outcomes.iter().map(|o| (o.index, o)).collect();
            let mut slots = folded.slots.iter();
            for job in jobs {
                let result = slots
                    .by_ref()
                    .take(job.items.len())
                    .enumerate()
                    .map(|(i, &(at, repeat))| {
                        let o = by_index
                            .get(&at)
                            .ok_or_else(|| StoreError::internal("push outcome missing"))?;
                        Ok(AppendOutcome {
                            index: i,
                            // a repeat of a refused item is refused too
                            status: match (repeat, o.status) {
                                (true, AppendStatus::Full(n)) => AppendStatus::Full(n),
                                (true, _) => AppendStatus::Duplicate,
                                (false, s) => s,
                            },
                            message_id: o.message_id,
                            partition_id: o.partition_id,
                        })
                    })
                    .collect();
                let _ = job.reply.send(result);
            }
        }
        Err(e) if e.is_unavailable() => {
            for job in jobs {
                let _ = job.reply.send(Err(e.clone()));
            }
        }
        Err(_) => {
            // one request may have poisoned the shared transaction: retry alone
            for job in jobs {
                let result = one_call(db, slot, &job.items, &job.bounded).await;
                let _ = job.reply.send(result);
            }
        }
    }
}
