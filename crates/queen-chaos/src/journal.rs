//! What the workload saw: every push attempt with what the broker told the
//! producer, every pop with the messages it delivered, every ack with its
//! per-item result. Times are microseconds since the run started.

use serde_json::Value;

/// How an item came to be in a push request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    /// A new transactionId.
    Fresh,
    /// The transactionId (and payload) of an earlier push to the same partition.
    Repeat,
    /// The same item twice in one request; this is the second copy.
    InRequestRepeat,
}

/// What one push attempt told the producer about one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Told {
    Queued {
        message_id: String,
    },
    Duplicate {
        message_id: String,
    },
    Buffered,
    /// The item came back `failed` (with the error text).
    Failed(String),
    /// No per-item answer: connection error, timeout or a non-201 status.
    NoAnswer(String),
}

impl Told {
    /// The broker vouched that the message exists (or will, for `buffered`).
    pub fn vouches(&self) -> bool {
        matches!(
            self,
            Told::Queued { .. } | Told::Duplicate { .. } | Told::Buffered
        )
    }
}

#[derive(Debug, Clone)]
pub struct PushEvent {
    pub producer: usize,
    pub partition: String,
    pub txid: String,
    pub payload: Value,
    pub kind: ItemKind,
    pub broker: usize,
    /// Attempt number of this request (0 = first try).
    pub attempt: u32,
    /// Position of the item in its request.
    pub pos: usize,
    pub t_sent: u64,
    pub t_done: u64,
    pub told: Told,
}

/// One message as a pop delivered it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub partition_id: String,
    pub partition: String,
    pub txid: String,
    pub message_id: String,
    pub lease_id: String,
    pub data: Value,
}

/// What the consumer did with a popped batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    Acked,
    /// Dropped without an ack: the lease is left to expire.
    Abandoned,
    /// Held past the lease, then acked.
    Paused,
    /// The lease was extended on some broker, the batch held past the
    /// original lease, then acked.
    Extended,
    /// Held for about the lease (a little less or more), then acked: the ack
    /// races the expiry.
    Slow,
}

#[derive(Debug, Clone)]
pub struct PopEvent {
    pub group: usize,
    pub consumer: usize,
    pub broker: usize,
    pub t_start: u64,
    pub t_end: u64,
    pub messages: Vec<Delivery>,
    pub handling: Handling,
}

/// The result of one acknowledgement item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckOutcome {
    Ok {
        dlq: bool,
    },
    Refused(String),
    /// The request got no per-item answer; it may or may not have applied.
    NoAnswer(String),
}

#[derive(Debug, Clone)]
pub struct AckItem {
    pub partition_id: String,
    pub txid: String,
    /// `completed` or `failed`.
    pub status: &'static str,
    pub outcome: AckOutcome,
}

#[derive(Debug, Clone)]
pub struct AckEvent {
    pub group: usize,
    /// 0 for the first try of a batch's ack, 1 for its retry.
    pub attempt: u32,
    pub consumer: usize,
    pub broker: usize,
    pub t_start: u64,
    pub t_end: u64,
    /// The ack belongs to a batch held past its lease.
    pub late: bool,
    /// The lease was extended; it cannot expire before this time.
    pub extended_until: Option<u64>,
    pub items: Vec<AckItem>,
}

/// Everything the workload recorded.
#[derive(Debug, Default)]
pub struct Journal {
    /// Per producer, in the order the producer saw the answers.
    pub pushes: Vec<Vec<PushEvent>>,
    pub pops: Vec<PopEvent>,
    pub acks: Vec<AckEvent>,
    /// Lease extensions sent, and how many were answered `success`.
    pub extends: (u64, u64),
}

impl Journal {
    /// Writes every event as one line, in time order per kind, for diagnosis.
    pub fn dump(&self, groups: &[String]) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let t = |us: u64| format!("{:.6}", us as f64 / 1e6);
        for e in self.pushes.iter().flatten() {
            let _ = writeln!(
                s,
                "push\tproducer={}\tbroker={}\tsent={}\tdone={}\tattempt={}\tpos={}\t{}/{}\t{:?}\t{:?}",
                e.producer,
                e.broker,
                t(e.t_sent),
                t(e.t_done),
                e.attempt,
                e.pos,
                e.partition,
                e.txid,
                e.kind,
                e.told
            );
        }
        for p in &self.pops {
            let g = groups.get(p.group).map_or("?", String::as_str);
            let msgs: Vec<String> = p
                .messages
                .iter()
                .map(|m| format!("{}/{}", m.partition, m.txid))
                .collect();
            let lease = p.messages.first().map_or("", |m| m.lease_id.as_str());
            let _ = writeln!(
                s,
                "pop\t{g}#{}\tbroker={}\tstart={}\tend={}\t{:?}\tlease={lease}\t{}",
                p.consumer,
                p.broker,
                t(p.t_start),
                t(p.t_end),
                p.handling,
                msgs.join(",")
            );
        }
        for a in &self.acks {
            let g = groups.get(a.group).map_or("?", String::as_str);
            let items: Vec<String> = a
                .items
                .iter()
                .map(|i| format!("{}:{}:{}={:?}", i.partition_id, i.txid, i.status, i.outcome))
                .collect();
            let _ = writeln!(
                s,
                "ack\t{g}#{}\tbroker={}\tstart={}\tend={}\tlate={}\t{}",
                a.consumer,
                a.broker,
                t(a.t_start),
                t(a.t_end),
                a.late,
                items.join(",")
            );
        }
        s
    }
}
