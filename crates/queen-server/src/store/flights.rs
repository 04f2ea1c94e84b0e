//! Group commit for consumers: concurrent pops and acks share one statement.
//!
//! The same shape as the push batcher (`batcher.rs`): requests queue here
//! while earlier flights are in the air, and each flight takes the waiting
//! requests that can share a statement (the same `Fly::Key`) and answers
//! all of them with one call of `Fly::fly`. There is no timer: a lone
//! request leaves at once. At most `Limits::inflight` flights are in the
//! air; a further one leaves while others fly only when it carries
//! `Limits::second` requests or a key no flight in the air has, so small
//! requests merge instead of queueing on each other. A flight whose call
//! fails (other than by the database being unavailable) is flown again one
//! request at a time, so one request's error does not fail the others.
//! `docs/benchmarks.md` ("Consume path, part 3") has the measurements.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;

use prometheus::{IntCounter, IntCounterVec, Opts};
use tokio::sync::{mpsc, oneshot};

use super::StoreError;

/// Requests waiting for a flight before callers feel back-pressure.
const QUEUE_DEPTH: usize = 4_096;

/// What one kind of flight does.
pub(super) trait Fly: Send + Sync + 'static {
    /// One request.
    type Req: Send + Sync + 'static;
    /// Its answer.
    type Resp: Send + 'static;
    /// Requests with equal keys may share a flight.
    type Key: PartialEq + Clone + Send + 'static;

    fn key(req: &Self::Req) -> &Self::Key;

    /// Answers every request of `reqs` (which share one key), in order.
    fn fly(
        &self,
        reqs: &[Self::Req],
    ) -> impl Future<Output = Result<Vec<Self::Resp>, StoreError>> + Send;
}

/// How requests are grouped into flights.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// Most requests in one flight.
    pub(super) members: usize,
    /// Flights in the air at once.
    pub(super) inflight: usize,
    /// Requests waiting for a further flight to leave while others fly
    /// (unless its key is not in the air).
    pub(super) second: usize,
}

/// Flights and the requests they carried, by kind (`op` = `pop` | `ack`).
#[derive(Clone)]
pub(super) struct FlightMetrics {
    flights: IntCounterVec,
    members: IntCounterVec,
}

impl FlightMetrics {
    pub(super) fn new() -> Self {
        let flights = IntCounterVec::new(
            Opts::new(
                "queen_consume_flights_total",
                "statements that answered grouped pops or acks (consumer group commit)",
            ),
            &["op"],
        )
        .expect("valid metric");
        let members = IntCounterVec::new(
            Opts::new(
                "queen_consume_flight_members_total",
                "pops or acks answered by the grouped statements",
            ),
            &["op"],
        )
        .expect("valid metric");
        Self { flights, members }
    }

    pub(super) fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.flights.clone()),
            Box::new(self.members.clone()),
        ]
    }
}

/// The two counters of one kind.
#[derive(Clone)]
struct Counters {
    flights: IntCounter,
    members: IntCounter,
}

type Reply<F> = oneshot::Sender<Result<<F as Fly>::Resp, StoreError>>;

struct Member<F: Fly> {
    req: F::Req,
    reply: Reply<F>,
}

/// Handle to one kind's flight task.
pub(super) struct Flights<F: Fly> {
    tx: mpsc::Sender<Member<F>>,
}

impl<F: Fly> std::fmt::Debug for Flights<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flights").finish_non_exhaustive()
    }
}

impl<F: Fly> Flights<F> {
    /// Spawns the flight task on the current runtime.
    pub(super) fn start(fly: F, limits: Limits, metrics: &FlightMetrics, op: &str) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let counters = Counters {
            flights: metrics.flights.with_label_values(&[op]),
            members: metrics.members.with_label_values(&[op]),
        };
        tokio::spawn(run(rx, Arc::new(fly), limits, counters));
        Self { tx }
    }

    /// Answers `req` as part of the next flight with its key.
    pub(super) async fn call(&self, req: F::Req) -> Result<F::Resp, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Member { req, reply })
            .await
            .map_err(|_| StoreError::unavailable("consume flights stopped"))?;
        rx.await
            .map_err(|_| StoreError::unavailable("consume flights dropped the request"))?
    }
}

/// The key of the next flight to leave, if one may: with nothing in the air
/// the oldest request's; else the oldest request's whose key is not in the
/// air; else the oldest request's when `Limits::second` requests wait for it.
fn next_key<F: Fly>(
    waiting: &VecDeque<Member<F>>,
    in_air: &[(u64, F::Key)],
    second: usize,
) -> Option<F::Key> {
    let front = F::key(&waiting.front()?.req);
    if in_air.is_empty() {
        return Some(front.clone());
    }
    if let Some(m) = waiting
        .iter()
        .find(|m| !in_air.iter().any(|(_, k)| k == F::key(&m.req)))
    {
        return Some(F::key(&m.req).clone());
    }
    let same = waiting.iter().filter(|m| F::key(&m.req) == front).count();
    (same >= second).then(|| front.clone())
}

/// The waiting requests with `key`, oldest first, up to `most`; the others
/// keep their order.
fn take_flight<F: Fly>(
    waiting: &mut VecDeque<Member<F>>,
    key: &F::Key,
    most: usize,
) -> Vec<Member<F>> {
    let mut taken = Vec::new();
    let mut kept = VecDeque::with_capacity(waiting.len());
    for m in waiting.drain(..) {
        if taken.len() < most && F::key(&m.req) == key {
            taken.push(m);
        } else {
            kept.push_back(m);
        }
    }
    *waiting = kept;
    taken
}

async fn run<F: Fly>(
    mut rx: mpsc::Receiver<Member<F>>,
    fly: Arc<F>,
    limits: Limits,
    counters: Counters,
) {
    let mut waiting: VecDeque<Member<F>> = VecDeque::new();
    // the flights in the air: an id and the key each carries
    let mut in_air: Vec<(u64, F::Key)> = Vec::new();
    let mut next_id = 0u64;
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<u64>();
    let mut open = true;
    loop {
        while open {
            match rx.try_recv() {
                Ok(m) => waiting.push_back(m),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => open = false,
            }
        }
        if in_air.len() < limits.inflight {
            if let Some(key) = next_key::<F>(&waiting, &in_air, limits.second) {
                let members = take_flight::<F>(&mut waiting, &key, limits.members.max(1));
                let id = next_id;
                next_id += 1;
                in_air.push((id, key));
                counters.flights.inc();
                counters.members.inc_by(members.len() as u64);
                let (fly, done_tx) = (fly.clone(), done_tx.clone());
                tokio::spawn(async move {
                    flight(&*fly, members).await;
                    let _ = done_tx.send(id);
                });
                continue;
            }
        }
        if !open && waiting.is_empty() && in_air.is_empty() {
            return;
        }
        tokio::select! {
            m = rx.recv(), if open => match m {
                Some(m) => waiting.push_back(m),
                None => open = false,
            },
            Some(id) = done_rx.recv() => in_air.retain(|(i, _)| *i != id),
        }
    }
}

/// Flies `members` together and answers each; on an error that is not the
/// database's absence, flies them again one by one.
async fn flight<F: Fly>(fly: &F, members: Vec<Member<F>>) {
    let (reqs, replies): (Vec<F::Req>, Vec<Reply<F>>) =
        members.into_iter().map(|m| (m.req, m.reply)).unzip();
    match fly.fly(&reqs).await {
        Ok(resps) if resps.len() == reqs.len() => {
            for (reply, resp) in replies.into_iter().zip(resps) {
                let _ = reply.send(Ok(resp));
            }
        }
        Ok(_) => {
            for reply in replies {
                let _ = reply.send(Err(StoreError::internal("flight answer missing")));
            }
        }
        Err(e) if reqs.len() == 1 || e.is_unavailable() => {
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
        Err(_) => {
            // one request may have failed the shared statement: fly alone
            for (req, reply) in reqs.iter().zip(replies) {
                let result = fly.fly(std::slice::from_ref(req)).await.and_then(|r| {
                    r.into_iter()
                        .next()
                        .ok_or_else(|| StoreError::internal("flight answer missing"))
                });
                let _ = reply.send(result);
            }
        }
    }
}

#[cfg(test)]
mod tests;
