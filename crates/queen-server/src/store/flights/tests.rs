use std::sync::Mutex;

use tokio::sync::Semaphore;

use super::*;

/// What the test flights did, and the gate each flight passes.
struct State {
    flown: Mutex<Vec<Vec<i64>>>,
    gate: Semaphore,
}

/// A flight that doubles numbers, remembers the flights it flew, fails any
/// flight holding a negative number and waits for a permit per flight.
struct Doubler(Arc<State>);

impl Fly for Doubler {
    type Req = (u8, i64);
    type Resp = i64;
    type Key = u8;

    fn key(req: &(u8, i64)) -> &u8 {
        &req.0
    }

    async fn fly(&self, reqs: &[(u8, i64)]) -> Result<Vec<i64>, StoreError> {
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
        gate: Semaphore::new(0),
    });
    let flights = Flights::start(
        Doubler(state.clone()),
        limits,
        &FlightMetrics::new(),
        "test",
    );
    (Arc::new(flights), state)
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
    let first = tokio::spawn({
        let f = flights.clone();
        async move { f.call((0, 1)).await }
    });
    settle().await;
    let rest: Vec<_> = (2..12)
        .map(|n| {
            let f = flights.clone();
            tokio::spawn(async move { f.call((0, n)).await })
        })
        .collect();
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
    let blocker = tokio::spawn({
        let f = flights.clone();
        async move { f.call((0, 100)).await }
    });
    settle().await;
    let members: Vec<_> = [1, 2, -3, 4]
        .into_iter()
        .map(|n| {
            let f = flights.clone();
            tokio::spawn(async move { f.call((0, n)).await })
        })
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
    let a = tokio::spawn({
        let f = flights.clone();
        async move { f.call((0, 1)).await }
    });
    settle().await;
    // same key: waits (fewer than `second` waiting); other key: leaves
    let same = tokio::spawn({
        let f = flights.clone();
        async move { f.call((0, 2)).await }
    });
    let other = tokio::spawn({
        let f = flights.clone();
        async move { f.call((1, 3)).await }
    });
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
async fn a_flight_carries_at_most_its_members() {
    let limits = Limits {
        members: 3,
        inflight: 1,
        second: 8,
    };
    let (flights, fly) = start(limits);
    fly.gate.add_permits(100);
    let all: Vec<_> = (0..7)
        .map(|n| {
            let f = flights.clone();
            tokio::spawn(async move { f.call((0, n)).await })
        })
        .collect();
    for (n, r) in (0..7).zip(futures_join(all).await) {
        assert_eq!(r.unwrap(), n * 2);
    }
    let flown = fly.flown.lock().unwrap().clone();
    assert!(flown.iter().all(|f| f.len() <= 3), "{flown:?}");
    assert_eq!(flown.iter().map(Vec::len).sum::<usize>(), 7);
}

async fn futures_join(
    handles: Vec<tokio::task::JoinHandle<Result<i64, StoreError>>>,
) -> Vec<Result<i64, StoreError>> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}
