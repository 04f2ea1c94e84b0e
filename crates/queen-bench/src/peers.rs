//! The brokers a user would pick instead of Queen, driven by the same load
//! engine from the same process: RabbitMQ (AMQP 0-9-1) and NATS JetStream.
//!
//! Partitions map to the peers' own units of ordering: partition `q` of a
//! scenario is one durable quorum queue on RabbitMQ and one subject of a
//! file-storage stream (with its own durable pull consumer) on NATS. A Queen
//! partition is an ordered run that one consumer holds at a time; a queue
//! with its consumer, or a filtered consumer of one subject, is the closest
//! thing each peer has, and it keeps the same number of independent ordered
//! streams in every case. Consumer task `i` of `c` serves partitions
//! `i, i + c, i + 2c, …` (partition `i mod p` when there are more consumers
//! than partitions), the way `c` Queen consumers share `p` partitions.
//!
//! Every message body is `{"seq":N,"pad":"…"}` of exactly the scenario's
//! payload size, so consumers find the message number without any header.

use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use futures_util::{Stream, StreamExt as _};
use serde::Serialize;
use tokio::sync::mpsc;

use crate::api::AckOutcome;
use crate::load::{self, AbortOnDrop, ConsumeSpec, Target};
use crate::nats::{NatsConsumer, NatsProducer, NatsSession, NatsTarget};
use crate::procstat;
use crate::queen::{QueenConsumer, QueenProducer, QueenTarget};
use crate::rabbitmq::{RabbitConsumer, RabbitProducer, RabbitSession, RabbitTarget};

/// How long connecting to a peer may take before it counts as not reachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the peers listen.
#[derive(Debug, Clone, clap::Args, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerArgs {
    /// RabbitMQ, for the `rabbitmq` system.
    #[arg(long, default_value = "amqp://guest:guest@127.0.0.1:5672/%2f")]
    #[serde(skip)]
    pub rabbitmq_url: String,
    /// NATS with JetStream, for the `nats` system.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    RabbitMq,
    Nats,
}

impl Peer {
    /// Also the prefix of the peer's scenario ids (`rabbitmq/push/b100/n16/p16`).
    pub fn name(self) -> &'static str {
        match self {
            Self::RabbitMq => "rabbitmq",
            Self::Nats => "nats",
        }
    }

    /// The `comm` of the server process whose CPU is measured.
    pub fn process(self) -> &'static str {
        match self {
            Self::RabbitMq => "beam.smp",
            Self::Nats => "nats-server",
        }
    }

    /// The server process on this machine, if there is exactly one kind of it.
    pub fn pid(self) -> Option<u32> {
        procstat::pids_named(self.process()).into_iter().min()
    }
}

/// A connection to a peer for declaring and deleting what scenarios use.
pub enum Session {
    RabbitMq(RabbitSession),
    Nats(NatsSession),
}

/// What one scenario needs on a peer.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Prefix of every name the scenario creates (the run's queue name).
    pub base: String,
    pub partitions: u32,
    /// `None` is queue mode (one shared cursor); named groups each read everything.
    pub groups: Vec<Option<String>>,
    pub payload_bytes: usize,
    pub salt: u64,
}

impl Layout {
    pub fn fanout(&self) -> bool {
        self.groups.iter().any(Option::is_some)
    }
}

impl Session {
    /// Connects, or fails with a message saying where nothing answered.
    pub async fn open(peer: Peer, args: &PeerArgs) -> Result<Self> {
        let opened = match peer {
            Peer::RabbitMq => {
                tokio::time::timeout(CONNECT_TIMEOUT, RabbitSession::open(&args.rabbitmq_url))
                    .await
                    .map(|r| r.map(Self::RabbitMq))
            }
            Peer::Nats => tokio::time::timeout(CONNECT_TIMEOUT, NatsSession::open(&args.nats_url))
                .await
                .map(|r| r.map(Self::Nats)),
        };
        match opened {
            Ok(r) => r,
            Err(_) => bail!("no answer within {CONNECT_TIMEOUT:?}"),
        }
    }

    /// Declares the queues (or stream and consumers) of `layout`.
    pub async fn prepare(&self, layout: Layout) -> Result<PeerTarget> {
        match self {
            Self::RabbitMq(s) => s.prepare(layout).await.map(PeerTarget::RabbitMq),
            Self::Nats(s) => s.prepare(layout).await.map(PeerTarget::Nats),
        }
    }

    /// Deletes what [`Session::prepare`] declared (best effort, warns).
    pub async fn cleanup(&self, target: &PeerTarget) {
        let r = match (self, target) {
            (Self::RabbitMq(s), PeerTarget::RabbitMq(t)) => s.cleanup(t).await,
            (Self::Nats(s), PeerTarget::Nats(t)) => s.cleanup(t).await,
            _ => Ok(()),
        };
        if let Err(e) = r {
            eprintln!("warning: cleaning up after the scenario: {e:#}");
        }
    }
}

pub enum PeerTarget {
    RabbitMq(RabbitTarget),
    Nats(NatsTarget),
}

/// Any system the suite drives, so the scenarios are written once.
pub enum AnyTarget<'a> {
    Queen(QueenTarget),
    Peer(&'a PeerTarget),
}

pub enum AnyProducer {
    Queen(QueenProducer),
    RabbitMq(RabbitProducer),
    Nats(NatsProducer),
}

pub enum AnyConsumer {
    Queen(QueenConsumer),
    RabbitMq(RabbitConsumer),
    Nats(NatsConsumer),
}

impl Target for AnyTarget<'_> {
    type Producer = AnyProducer;
    type Consumer = AnyConsumer;

    async fn producer(&self, index: u32) -> Result<AnyProducer> {
        Ok(match self {
            Self::Queen(t) => AnyProducer::Queen(t.producer(index).await?),
            Self::Peer(PeerTarget::RabbitMq(t)) => AnyProducer::RabbitMq(t.producer(index).await?),
            Self::Peer(PeerTarget::Nats(t)) => AnyProducer::Nats(t.producer(index).await?),
        })
    }

    async fn consumer(&self, spec: &ConsumeSpec, group: usize, index: u32) -> Result<AnyConsumer> {
        Ok(match self {
            Self::Queen(t) => AnyConsumer::Queen(t.consumer(spec, group, index).await?),
            Self::Peer(PeerTarget::RabbitMq(t)) => {
                AnyConsumer::RabbitMq(t.consumer(spec, group, index).await?)
            }
            Self::Peer(PeerTarget::Nats(t)) => {
                AnyConsumer::Nats(t.consumer(spec, group, index).await?)
            }
        })
    }
}

impl load::Producer for AnyProducer {
    async fn push(&mut self, partition: u64, first: u64, last: u64) -> Result<u64> {
        match self {
            Self::Queen(p) => p.push(partition, first, last).await,
            Self::RabbitMq(p) => p.push(partition, first, last).await,
            Self::Nats(p) => p.push(partition, first, last).await,
        }
    }
}

impl load::Consumer for AnyConsumer {
    async fn pop(&mut self) -> Result<Vec<Option<u64>>> {
        match self {
            Self::Queen(c) => c.pop().await,
            Self::RabbitMq(c) => c.pop().await,
            Self::Nats(c) => c.pop().await,
        }
    }

    async fn ack(&mut self) -> Result<Option<AckOutcome>> {
        match self {
            Self::Queen(c) => c.ack().await,
            Self::RabbitMq(c) => c.ack().await,
            Self::Nats(c) => c.ack().await,
        }
    }
}

/// The partitions consumer `index` of `consumers` serves (see the module doc).
pub fn assigned_partitions(index: u32, consumers: u32, partitions: u32) -> Vec<u32> {
    let (consumers, partitions) = (consumers.max(1), partitions.max(1));
    if consumers >= partitions {
        vec![index % partitions]
    } else {
        (index..partitions).step_by(consumers as usize).collect()
    }
}

const SEQ_PREFIX: &str = "{\"seq\":";

/// A message body of exactly `bytes` bytes (at least the `seq` field and an
/// empty pad): `{"seq":N,"pad":"…"}`, the pad as random as Queen's payloads.
pub fn body(bytes: usize, seq: u64, salt: u64) -> Vec<u8> {
    let head = format!("{SEQ_PREFIX}{seq},");
    // `payload_for(n)` is `{"pad":"…"}` of n bytes; its `{` is replaced by `head`.
    let rest = load::payload_for((bytes + 1).saturating_sub(head.len()).max(10), seq, salt);
    let mut out = Vec::with_capacity(head.len() + rest.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(&rest.as_bytes()[1..]);
    out
}

/// The message number of a [`body`]; `None` for anything else.
pub fn seq_of(body: &[u8]) -> Option<u64> {
    let rest = body.strip_prefix(SEQ_PREFIX.as_bytes())?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || rest.get(digits) != Some(&b',') {
        return None;
    }
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// The deliveries of one consumer task's subscriptions, merged into one
/// queue by a forwarding task per subscription.
pub struct Inbox<M> {
    rx: mpsc::Receiver<Result<M>>,
    _forwarders: Vec<AbortOnDrop>,
}

impl<M: Send + 'static> Inbox<M> {
    /// `capacity` bounds what waits here; the peers' own prefetch limits
    /// bound what is in flight.
    pub fn new(capacity: usize) -> (Self, mpsc::Sender<Result<M>>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (
            Self {
                rx,
                _forwarders: Vec::new(),
            },
            tx,
        )
    }

    /// Forwards every item of `stream` (mapped by `f`) until it ends.
    pub fn forward<S, T, E, F>(&mut self, tx: mpsc::Sender<Result<M>>, mut stream: S, f: F)
    where
        S: Stream<Item = std::result::Result<T, E>> + Send + Unpin + 'static,
        T: Send,
        E: std::error::Error + Send + Sync + 'static,
        F: Fn(T) -> M + Send + Sync + 'static,
    {
        self._forwarders.push(AbortOnDrop(tokio::spawn(async move {
            while let Some(item) = stream.next().await {
                let item = item.map(&f).context("receiving a message");
                let failed = item.is_err();
                if tx.send(item).await.is_err() || failed {
                    break;
                }
            }
        })));
    }

    /// Waits up to `wait` for a first message, then takes what else is
    /// already here, up to `max` in all (a pop that returns what there is).
    pub async fn next_batch(&mut self, max: usize, wait: Duration) -> Result<Vec<M>> {
        let first = match tokio::time::timeout(wait, self.rx.recv()).await {
            Err(_) => return Ok(Vec::new()),
            Ok(None) => bail!("every subscription of this consumer ended"),
            Ok(Some(m)) => m?,
        };
        let mut out = vec![first];
        while out.len() < max {
            match self.rx.try_recv() {
                Ok(m) => out.push(m?),
                Err(_) => break,
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_have_the_size_and_carry_the_seq() {
        for (bytes, seq) in [(100, 0), (100, 123_456_789), (256, 7), (4096, 1)] {
            let b = body(bytes, seq, 42);
            assert_eq!(b.len(), bytes, "{}", String::from_utf8_lossy(&b));
            assert_eq!(seq_of(&b), Some(seq));
            let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
            assert_eq!(v["seq"], seq);
        }
        // Too small for the seq and a pad: as small as it gets, still valid.
        let b = body(1, 5, 1);
        assert_eq!(seq_of(&b), Some(5));
        assert_ne!(body(100, 1, 1), body(100, 2, 1));
        assert_eq!(seq_of(b"{\"seq\":12}"), None);
        assert_eq!(seq_of(b"{\"pad\":\"x\"}"), None);
        assert_eq!(seq_of(b"{\"seq\":,"), None);
    }

    #[test]
    fn partitions_are_shared_out_like_queen_consumers() {
        assert_eq!(assigned_partitions(0, 16, 16), vec![0]);
        assert_eq!(assigned_partitions(15, 16, 16), vec![15]);
        assert_eq!(assigned_partitions(1, 4, 8), vec![1, 5]);
        assert_eq!(assigned_partitions(5, 8, 4), vec![1]);
        assert_eq!(assigned_partitions(0, 1, 3), vec![0, 1, 2]);
        // Every partition is served by someone.
        let mut all: Vec<u32> = (0..3).flat_map(|i| assigned_partitions(i, 3, 10)).collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
    }
}
