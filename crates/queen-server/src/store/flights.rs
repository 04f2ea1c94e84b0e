//! Group commit for consumers: concurrent pops and acks share one statement.
//!
//! The same shape as the push batcher (`batcher.rs`): requests queue here
//! while earlier flights are in the air, and each flight takes the waiting
//! requests that can share a statement and answers all of them with one
//! call of `Fly::fly`. A request with a key (`Fly::key`) shares a flight
//! only with requests of the same key; one without (an ack) joins any
//! flight. A lone request leaves at once. At most `Limits::inflight`
//! flights are in the air; a further one leaves while others fly only when
//! it carries `Limits::second` requests or a key no flight in the air has,
//! so small requests merge instead of queueing on each other; after a flight
//! that flew longer than `linger::MAX_HOLD` (its time was its work) it leaves
//! with any request, to use the other cores. With none in the air, a flight
//! may wait for the clients the last one answered (`linger.rs`). A flight
//! whose call fails (other than by the database being unavailable) is flown
//! again one request at a time, so one request's error does not fail the
//! others. `docs/benchmarks.md` ("Consume path", parts 3 and 6) has the
//! measurements.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;

use prometheus::{IntCounterVec, Opts};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::linger::Linger;
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
    type Key: PartialEq + Clone + Send + Sync + 'static;

    /// `None`: the request may join a flight of any key.
    fn key(req: &Self::Req) -> Option<&Self::Key>;

    /// The label the metrics count `req` under.
    fn op(req: &Self::Req) -> &'static str;

    /// Answers every request of `reqs` (at most one key among them), in order.
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

/// Flights and the requests they carried, by kind (`op` = `pop` | `ack`): a
/// flight counts once under each kind it carried.
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
    pub(super) fn start(fly: F, limits: Limits, metrics: &FlightMetrics) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        tokio::spawn(run(rx, Arc::new(fly), limits, metrics.clone()));
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

/// A flight in the air.
struct InAir<K> {
    id: u64,
    key: Option<K>,
    left: Instant,
    /// Requests it carries.
    carried: usize,
}

/// The key a flight leaving now would carry: the oldest keyed request's;
/// `None` when only requests without a key wait.
fn flight_key<F: Fly>(waiting: &VecDeque<Member<F>>) -> Option<F::Key> {
    waiting.iter().find_map(|m| F::key(&m.req)).cloned()
}

/// Whether `req` may fly in a flight carrying `key`.
fn joins<F: Fly>(req: &F::Req, key: Option<&F::Key>) -> bool {
    F::key(req).is_none_or(|k| Some(k) == key)
}

/// The key of the next flight to leave, if one may: with nothing in the air
/// `flight_key`; else the oldest key no flight in the air carries; else
/// `flight_key` when `Limits::second` requests would go with it.
fn next_key<F: Fly>(
    waiting: &VecDeque<Member<F>>,
    in_air: &[InAir<F::Key>],
    second: usize,
) -> Option<Option<F::Key>> {
    if waiting.is_empty() {
        return None;
    }
    if in_air.is_empty() {
        return Some(flight_key::<F>(waiting));
    }
    if let Some(k) = waiting
        .iter()
        .filter_map(|m| F::key(&m.req))
        .find(|k| !in_air.iter().any(|a| a.key.as_ref() == Some(*k)))
    {
        return Some(Some(k.clone()));
    }
    let key = flight_key::<F>(waiting);
    let going = waiting
        .iter()
        .filter(|m| joins::<F>(&m.req, key.as_ref()))
        .count();
    (going >= second).then_some(key)
}

/// The waiting requests that may fly with `key`, oldest first, up to `most`;
/// the others keep their order.
fn take_flight<F: Fly>(
    waiting: &mut VecDeque<Member<F>>,
    key: Option<&F::Key>,
    most: usize,
) -> Vec<Member<F>> {
    let mut taken = Vec::new();
    let mut kept = VecDeque::with_capacity(waiting.len());
    for m in waiting.drain(..) {
        if taken.len() < most && joins::<F>(&m.req, key) {
            taken.push(m);
        } else {
            kept.push_back(m);
        }
    }
    *waiting = kept;
    taken
}

/// Counts one flight of `members` under each kind it carries.
fn count<F: Fly>(metrics: &FlightMetrics, members: &[Member<F>]) {
    let mut kinds: Vec<(&'static str, u64)> = Vec::new();
    for m in members {
        let op = F::op(&m.req);
        match kinds.iter_mut().find(|(k, _)| *k == op) {
            Some((_, n)) => *n += 1,
            None => kinds.push((op, 1)),
        }
    }
    for (op, n) in kinds {
        metrics.flights.with_label_values(&[op]).inc();
        metrics.members.with_label_values(&[op]).inc_by(n);
    }
}

async fn run<F: Fly>(
    mut rx: mpsc::Receiver<Member<F>>,
    fly: Arc<F>,
    limits: Limits,
    metrics: FlightMetrics,
) {
    let mut waiting: VecDeque<Member<F>> = VecDeque::new();
    let mut in_air: Vec<InAir<F::Key>> = Vec::new();
    let mut linger = Linger::default();
    let mut next_id = 0u64;
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<u64>();
    let mut open = true;
    loop {
        while open {
            match rx.try_recv() {
                Ok(m) => {
                    linger.arrived(Instant::now());
                    waiting.push_back(m);
                }
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => open = false,
            }
        }
        // with none in the air, the next flight may wait for the last one's clients
        let hold = (open && in_air.is_empty() && waiting.len() < limits.members)
            .then(|| linger.hold(Instant::now()))
            .flatten();
        // after a flight that was all work, a second one leaves with what waits
        let second = if linger.work_bound() {
            1
        } else {
            limits.second
        };
        if in_air.len() < limits.inflight && hold.is_none() {
            if let Some(key) = next_key::<F>(&waiting, &in_air, second) {
                let members = take_flight::<F>(&mut waiting, key.as_ref(), limits.members.max(1));
                let id = next_id;
                next_id += 1;
                in_air.push(InAir {
                    id,
                    key,
                    left: Instant::now(),
                    carried: members.len(),
                });
                count(&metrics, &members);
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
                Some(m) => {
                    linger.arrived(Instant::now());
                    waiting.push_back(m);
                }
                None => open = false,
            },
            Some(id) = done_rx.recv() => {
                if let Some(at) = in_air.iter().position(|f| f.id == id) {
                    let f = in_air.swap_remove(at);
                    let now = Instant::now();
                    linger.landed(now, f.carried, now.saturating_duration_since(f.left));
                }
            }
            () = tokio::time::sleep_until(hold.unwrap_or_else(Instant::now)), if hold.is_some() => {}
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
