use std::sync::Mutex;

use tokio::sync::Semaphore;

use super::*;

/// What the test flights did, and the gate each flight passes.
struct State {
    flown: Mutex<Vec<Vec<i64>>>,
    /// Flights that started, before their permit.
    started: std::sync::atomic::AtomicUsize,
    gate: Semaphore,
}

/// A flight that doubles numbers, remembers the flights it flew, fails any
/// flight holding a negative number and waits for a permit per flight.
struct Doubler(Arc<State>);

impl Fly for Doubler {
    type Req = (u8, i64);
    type Resp = i64;
    type Key = u8;

    /// Key 255: joins any flight.
    fn key(req: &(u8, i64)) -> Option<&u8> {
        (req.0 != 255).then_some(&req.0)
    }

    fn op(req: &(u8, i64)) -> &'static str {
        if req.0 == 255 {
            "any"
        } else {
            "keyed"
        }
    }

    async fn fly(&self, reqs: &[(u8, i64)]) -> Result<Vec<i64>, StoreError> {
        self.0
            .started
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.0.gate.acquire().await.expect("gate open").forget();
        self.0
            .flown
            .lock()
            .unwrap()
            .push(reqs.iter().map(|r| r.1).collect());
        if reqs.iter().any(|r| r.1 < 0) {
            return Err(StoreError::internal("negative"));
        }
        Ok(reqs.iter().map(|r| r.1 * 2).collect())
    }
}

fn start(limits: Limits) -> (Arc<Flights<Doubler>>, Arc<State>) {
    let state = Arc::new(State {
        flown: Mutex::default(),
        started: Default::default(),
        gate: Semaphore::new(0),
    });
    let flights = Flights::start(Doubler(state.clone()), limits, &FlightMetrics::new());
    (Arc::new(flights), state)
}

type Handle = tokio::task::JoinHandle<Result<i64, StoreError>>;

/// Calls `req` on a task of its own.
fn call(flights: &Arc<Flights<Doubler>>, req: (u8, i64)) -> Handle {
    let f = flights.clone();
    tokio::spawn(async move { f.call(req).await })
}

/// Lets the spawned requests reach the flight task and its flights start.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn requests_waiting_behind_a_flight_leave_together() {
    let limits = Limits {
        members: 64,
        inflight: 1,
        second: 8,
    };
    let (flights, fly) = start(limits);
    let first = call(&flights, (0, 1));
    settle().await;
    let rest: Vec<_> = (2..12).map(|n| call(&flights, (0, n))).collect();
    settle().await;
    fly.gate.add_permits(10);
    assert_eq!(first.await.unwrap().unwrap(), 2);
    for (n, r) in (2..12).zip(rest) {
        assert_eq!(r.await.unwrap().unwrap(), n * 2);
    }
    let flown = fly.flown.lock().unwrap().clone();
    assert_eq!(flown, vec![vec![1], (2..12).collect::<Vec<_>>()]);
}

#[tokio::test]
async fn a_failing_member_fails_alone() {
    let limits = Limits {
        members: 64,
        inflight: 1,
        second: 8,
    };
    let (flights, fly) = start(limits);
    let blocker = call(&flights, (0, 100));
    settle().await;
    let members: Vec<_> = [1, 2, -3, 4]
        .into_iter()
        .map(|n| call(&flights, (0, n)))
        .collect();
    settle().await;
    fly.gate.add_permits(10);
    assert_eq!(blocker.await.unwrap().unwrap(), 200);
    let results: Vec<_> = futures_join(members).await;
    assert_eq!(results[0].as_ref().unwrap(), &2);
    assert_eq!(results[1].as_ref().unwrap(), &4);
    assert!(results[2].is_err(), "{:?}", results[2]);
    assert_eq!(results[3].as_ref().unwrap(), &8);
    // the shared flight, then each member alone
    let flown = fly.flown.lock().unwrap().clone();
    assert_eq!(
        flown,
        vec![
            vec![100],
            vec![1, 2, -3, 4],
            vec![1],
            vec![2],
            vec![-3],
            vec![4]
        ]
    );
}

#[tokio::test]
async fn other_keys_do_not_wait_for_a_flight_of_another_key() {
    let limits = Limits {
        members: 64,
        inflight: 2,
        second: 8,
    };
    let (flights, fly) = start(limits);
    let a = call(&flights, (0, 1));
    settle().await;
    // same key: waits (fewer than `second` waiting); other key: leaves
    let same = call(&flights, (0, 2));
    let other = call(&flights, (1, 3));
    settle().await;
    fly.gate.add_permits(1);
    settle().await;
    fly.gate.add_permits(1);
    assert_eq!(other.await.unwrap().unwrap(), 6);
    assert_eq!(a.await.unwrap().unwrap(), 2);
    fly.gate.add_permits(1);
    assert_eq!(same.await.unwrap().unwrap(), 4);
    let flown = fly.flown.lock().unwrap().clone();
    assert_eq!(flown.len(), 3, "{flown:?}");
    assert_eq!(flown[2], vec![2], "{flown:?}");
}

#[tokio::test]
async fn requests_without_a_key_join_a_flight_of_any_key() {
    let limits = Limits {
        members: 64,
        inflight: 1,
        second: 8,
    };
    let (flights, fly) = start(limits);
    let blocker = call(&flights, (0, 1));
    settle().await;
    // behind it: a keyless request, key 1, key 0, another keyless one
    let waiting: Vec<_> = [(255, 10), (1, 2), (0, 3), (255, 11)]
        .into_iter()
        .map(|r| {
            let h = call(&flights, r);
            (r.1, h)
        })
        .collect();
    settle().await;
    fly.gate.add_permits(10);
    assert_eq!(blocker.await.unwrap().unwrap(), 2);
    for (n, h) in waiting {
        assert_eq!(h.await.unwrap().unwrap(), n * 2);
    }
    // the oldest keyed request names the flight; the keyless ones go with
    // it, the other key flies alone after
    let flown = fly.flown.lock().unwrap().clone();
    assert_eq!(flown, vec![vec![1], vec![10, 2, 11], vec![3]]);
}

#[tokio::test]
async fn keyless_requests_wait_for_the_flight_in_the_air_until_enough_wait() {
    let limits = Limits {
        members: 64,
        inflight: 2,
        second: 3,
    };
    let (flights, fly) = start(limits);
    let keyed = call(&flights, (0, 1));
    settle().await;
    let spawn = |n: i64| call(&flights, (255, n));
    let started = || fly.started.load(std::sync::atomic::Ordering::SeqCst);
    let two: Vec<_> = [2, 3].into_iter().map(spawn).collect();
    settle().await;
    // two wait behind the flight in the air: fewer than `second`
    assert_eq!(started(), 1);
    let third = spawn(4);
    settle().await;
    // three: a second flight leaves while the first still flies
    assert_eq!(started(), 2);
    fly.gate.add_permits(10);
    assert_eq!(keyed.await.unwrap().unwrap(), 2);
    for (n, h) in [2, 3].into_iter().zip(two) {
        assert_eq!(h.await.unwrap().unwrap(), n * 2);
    }
    assert_eq!(third.await.unwrap().unwrap(), 8);
    let flown = fly.flown.lock().unwrap().clone();
    assert_eq!(flown, vec![vec![1], vec![2, 3, 4]]);
}

#[tokio::test]
async fn a_flight_carries_at_most_its_members() {
    let limits = Limits {
        members: 3,
        inflight: 1,
        second: 8,
    };
    let (flights, fly) = start(limits);
    fly.gate.add_permits(100);
    let all: Vec<_> = (0..7).map(|n| call(&flights, (0, n))).collect();
    for (n, r) in (0..7).zip(futures_join(all).await) {
        assert_eq!(r.unwrap(), n * 2);
    }
    let flown = fly.flown.lock().unwrap().clone();
    assert!(flown.iter().all(|f| f.len() <= 3), "{flown:?}");
    assert_eq!(flown.iter().map(Vec::len).sum::<usize>(), 7);
}

async fn futures_join(handles: Vec<Handle>) -> Vec<Result<i64, StoreError>> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}
