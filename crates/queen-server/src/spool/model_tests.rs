//! Model-based test of the spool: random sequences of appends, seals,
//! partial replays and reopenings (a broker restart) are checked against a
//! plain queue of the records accepted and not yet replayed. Whatever the
//! sequence, the spool must give back exactly those records, in order, once.

use std::collections::VecDeque;
use std::time::Duration;

use proptest::prelude::*;
use queen_proto::spool::Record;

use super::{segment, Spool};
use crate::config::SpoolConfig;

#[derive(Debug, Clone)]
enum Op {
    /// One push of this many records.
    Append(usize),
    Seal,
    /// Replay up to this many records of the front segment.
    Replay(usize),
    /// Drop the spool and open it again, as a restart after a crash does.
    Reopen,
    /// `Spool::close` it (the graceful stop), then open it again.
    CloseReopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..5).prop_map(Op::Append),
        1 => Just(Op::Seal),
        3 => (1usize..6).prop_map(Op::Replay),
        1 => Just(Op::Reopen),
        1 => Just(Op::CloseReopen),
    ]
}

fn record(n: u64) -> Record {
    Record {
        queue: format!("q{}", n % 3),
        partition: format!("p{}", n % 2),
        transaction_id: format!("t-{n}"),
        trace_id: None,
        message_id: None,
        payload: format!("{{\"n\":{n}}}"),
        producer_sub: n.is_multiple_of(4).then(|| "sub".to_owned()),
        spooled_at_ms: 1_700_000_000_000 + n as i64,
    }
}

/// Replays up to `max` records of the front segment the way the drainer
/// does, retiring it once it is read to the end; returns what was replayed.
fn replay_front(spool: &Spool, max: usize) -> Vec<Record> {
    let Some(front) = spool.front() else {
        return Vec::new();
    };
    let batch = segment::read_batch(spool.dir(), front.seq, front.pos, max).expect("read");
    assert!(batch.bad.is_none(), "{:?}", batch.bad);
    if batch.records.is_empty() {
        spool.retire(front.seq).expect("retire");
        return Vec::new();
    }
    let n = batch.records.len() as u64;
    spool.advance(front.seq, batch.end, &batch.records, n);
    batch.records.into_iter().map(|(_, r)| r).collect()
}

fn run(ops: &[Op], events_per_file: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = SpoolConfig {
        dir: dir.path().to_path_buf(),
        flush_interval: Duration::from_millis(10),
        max_batch: 100,
        events_per_file,
        max_bytes: 1 << 30,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut spool = Spool::open(&config).expect("open");
        let mut model: VecDeque<Record> = VecDeque::new();
        let mut next = 0u64;
        for op in ops {
            match op {
                Op::Append(n) => {
                    let batch: Vec<Record> = (0..*n as u64).map(|i| record(next + i)).collect();
                    next += *n as u64;
                    spool.append(&batch).await.expect("append");
                    model.extend(batch);
                }
                Op::Seal => {
                    spool.seal().await.expect("seal");
                }
                Op::Replay(k) => {
                    for r in replay_front(&spool, *k) {
                        assert_eq!(Some(r), model.pop_front(), "replayed out of order");
                    }
                }
                Op::Reopen => {
                    drop(spool);
                    spool = Spool::open(&config).expect("reopen");
                }
                Op::CloseReopen => {
                    spool.close().await.expect("close");
                    let refused = spool.append(&[record(u64::MAX)]).await;
                    assert!(
                        matches!(refused, Err(super::SpoolError::Closed)),
                        "an append after close: {refused:?}"
                    );
                    drop(spool);
                    spool = Spool::open(&config).expect("reopen");
                }
            }
            assert_eq!(spool.is_empty(), model.is_empty(), "after {op:?}");
        }
        // everything left comes back, in order, exactly once
        spool.seal().await.expect("seal");
        while spool.front().is_some() {
            for r in replay_front(&spool, 7) {
                assert_eq!(Some(r), model.pop_front(), "replayed out of order");
            }
        }
        assert!(model.is_empty(), "never replayed: {model:?}");
        assert!(spool.is_empty());
        assert_eq!(spool.stats().segments, 0);
    });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn the_spool_gives_back_what_it_accepted_in_order_once(
        ops in proptest::collection::vec(op(), 1..30),
        events_per_file in 1u64..8,
    ) {
        run(&ops, events_per_file);
    }
}
