//! RabbitMQ as a [`Target`] (AMQP 0-9-1 through `lapin`), set up the way a
//! user who wants durability would: durable quorum queues, persistent
//! messages (`delivery_mode = 2`), publisher confirms awaited per batch,
//! manual acks with prefetch = batch, one acknowledgement (`multiple`) per
//! batch and subscription.
//!
//! Queue mode: partition `q` is queue `<base>-p<q>`, published to through the
//! default exchange. Consumer groups: a direct exchange `<base>-x` routes
//! routing key `p<q>` to queue `<base>-g<g>-p<q>` of every group `g`.

use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Acker, BasicProperties, Channel, Connection, ConnectionProperties};

use crate::api::AckOutcome;
use crate::load::{self, ConsumeSpec, Target};
use crate::peers::{self, Inbox, Layout};

/// AMQP `delivery_mode` of a persistent message.
const PERSISTENT: u8 = 2;

pub struct RabbitSession {
    url: String,
    /// Kept open: closing the connection would close the channel.
    _conn: Connection,
    channel: Channel,
}

pub struct RabbitTarget {
    url: String,
    layout: Arc<Layout>,
}

pub struct RabbitProducer {
    _conn: Connection,
    channel: Channel,
    layout: Arc<Layout>,
}

pub struct RabbitConsumer {
    _conn: Connection,
    batch: usize,
    wait: std::time::Duration,
    /// (subscription index, delivery), merged over this task's queues.
    inbox: Inbox<(usize, Delivery)>,
    /// Per subscription: the last delivery the last pop took from it.
    last: Vec<Option<Acker>>,
    /// How many messages the last pop returned.
    popped: u64,
}

async fn connect(url: &str) -> Result<Connection> {
    Connection::connect(url, ConnectionProperties::default())
        .await
        .with_context(|| format!("connecting to RabbitMQ at {}", redact(url)))
}

/// The URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://…{}", &url[..s], &url[at..]),
        _ => url.to_owned(),
    }
}

fn queue_name(layout: &Layout, group: Option<usize>, partition: u32) -> String {
    match group {
        Some(g) if layout.fanout() => format!("{}-g{g}-p{partition}", layout.base),
        _ => format!("{}-p{partition}", layout.base),
    }
}

fn exchange_name(layout: &Layout) -> String {
    format!("{}-x", layout.base)
}

impl RabbitSession {
    pub async fn open(url: &str) -> Result<Self> {
        let conn = connect(url).await?;
        let channel = conn.create_channel().await?;
        Ok(Self {
            url: url.to_owned(),
            _conn: conn,
            channel,
        })
    }

    fn queues(layout: &Layout) -> Vec<String> {
        let groups = if layout.fanout() {
            layout.groups.len()
        } else {
            1
        };
        (0..groups)
            .flat_map(|g| (0..layout.partitions).map(move |p| queue_name(layout, Some(g), p)))
            .collect()
    }

    pub async fn prepare(&self, layout: Layout) -> Result<RabbitTarget> {
        let mut args = FieldTable::default();
        args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("quorum".into()),
        );
        let durable = QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        };
        for q in Self::queues(&layout) {
            self.channel
                .queue_declare(q.as_str().into(), durable, args.clone())
                .await
                .with_context(|| format!("declaring quorum queue {q}"))?;
        }
        if layout.fanout() {
            let x = exchange_name(&layout);
            self.channel
                .exchange_declare(
                    x.as_str().into(),
                    lapin::ExchangeKind::Direct,
                    ExchangeDeclareOptions {
                        durable: true,
                        ..ExchangeDeclareOptions::default()
                    },
                    FieldTable::default(),
                )
                .await
                .with_context(|| format!("declaring exchange {x}"))?;
            for g in 0..layout.groups.len() {
                for p in 0..layout.partitions {
                    let q = queue_name(&layout, Some(g), p);
                    self.channel
                        .queue_bind(
                            q.as_str().into(),
                            x.as_str().into(),
                            format!("p{p}").as_str().into(),
                            QueueBindOptions::default(),
                            FieldTable::default(),
                        )
                        .await
                        .with_context(|| format!("binding {q} to {x}"))?;
                }
            }
        }
        Ok(RabbitTarget {
            url: self.url.clone(),
            layout: Arc::new(layout),
        })
    }

    pub async fn cleanup(&self, target: &RabbitTarget) -> Result<()> {
        for q in Self::queues(&target.layout) {
            self.channel
                .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
                .await
                .with_context(|| format!("deleting queue {q}"))?;
        }
        if target.layout.fanout() {
            let x = exchange_name(&target.layout);
            self.channel
                .exchange_delete(x.as_str().into(), ExchangeDeleteOptions::default())
                .await
                .with_context(|| format!("deleting exchange {x}"))?;
        }
        Ok(())
    }
}

impl Target for RabbitTarget {
    type Producer = RabbitProducer;
    type Consumer = RabbitConsumer;

    async fn producer(&self, _index: u32) -> Result<RabbitProducer> {
        let conn = connect(&self.url).await?;
        let channel = conn.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .context("enabling publisher confirms")?;
        Ok(RabbitProducer {
            _conn: conn,
            channel,
            layout: Arc::clone(&self.layout),
        })
    }

    async fn consumer(
        &self,
        spec: &ConsumeSpec,
        group: usize,
        index: u32,
    ) -> Result<RabbitConsumer> {
        let conn = connect(&self.url).await?;
        let partitions =
            peers::assigned_partitions(index, spec.consumers_per_group, self.layout.partitions);
        let batch = spec.batch.max(1) as usize;
        let (mut inbox, tx) = Inbox::new(batch * partitions.len() + 16);
        for (sub, p) in partitions.iter().enumerate() {
            // One channel per subscription: prefetch applies per consumer, and
            // an ack with `multiple` covers exactly this subscription's deliveries.
            let channel = conn.create_channel().await?;
            channel
                .basic_qos(
                    spec.batch.min(u32::from(u16::MAX)) as u16,
                    BasicQosOptions::default(),
                )
                .await
                .context("setting prefetch")?;
            let q = queue_name(&self.layout, Some(group), *p);
            let consumer = channel
                .basic_consume(
                    q.as_str().into(),
                    format!("bench-{group}-{index}-{p}").as_str().into(),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await
                .with_context(|| format!("consuming from {q}"))?;
            inbox.forward(tx.clone(), consumer, move |d| (sub, d));
        }
        Ok(RabbitConsumer {
            _conn: conn,
            batch,
            wait: std::time::Duration::from_millis(spec.wait_ms),
            inbox,
            last: vec![None; partitions.len()],
            popped: 0,
        })
    }
}

impl load::Producer for RabbitProducer {
    async fn push(&mut self, partition: u64, first: u64, last: u64) -> Result<u64> {
        // a run of fresh partitions (Queen's `pnew`) spreads over the fixed queues here
        let partition = partition % u64::from(self.layout.partitions.max(1));
        let (exchange, key) = if self.layout.fanout() {
            (exchange_name(&self.layout), format!("p{partition}"))
        } else {
            let q = u32::try_from(partition)?;
            (String::new(), queue_name(&self.layout, None, q))
        };
        let props = BasicProperties::default().with_delivery_mode(PERSISTENT);
        let mut confirms = Vec::with_capacity((last - first) as usize);
        for seq in first..last {
            let body = peers::body(self.layout.payload_bytes, seq, self.layout.salt);
            let confirm = self
                .channel
                .basic_publish(
                    exchange.as_str().into(),
                    key.as_str().into(),
                    BasicPublishOptions::default(),
                    &body,
                    props.clone(),
                )
                .await
                .context("basic.publish")?;
            confirms.push(confirm);
        }
        // The batch is answered when the broker has confirmed all of it.
        let mut queued = 0;
        for c in confirms {
            if !c.await.context("publisher confirm")?.is_ack() {
                bail!("RabbitMQ refused a message (basic.nack)");
            }
            queued += 1;
        }
        Ok(queued)
    }
}

impl load::Consumer for RabbitConsumer {
    async fn pop(&mut self) -> Result<Vec<Option<u64>>> {
        let got = self.inbox.next_batch(self.batch, self.wait).await?;
        self.popped = got.len() as u64;
        Ok(got
            .into_iter()
            .map(|(sub, d)| {
                let seq = peers::seq_of(&d.data);
                // Deliveries of one subscription arrive in tag order, so the
                // last one seen acknowledges all before it.
                self.last[sub] = Some(d.acker);
                seq
            })
            .collect())
    }

    async fn ack(&mut self) -> Result<Option<AckOutcome>> {
        let mut acked = false;
        for acker in self.last.iter_mut().filter_map(Option::take) {
            acker
                .ack(BasicAckOptions { multiple: true })
                .await
                .context("basic.ack")?;
            acked = true;
        }
        // basic.ack has no answer: a sent ack counts for the whole batch.
        Ok(acked.then(|| AckOutcome {
            succeeded: std::mem::take(&mut self.popped),
            ..AckOutcome::default()
        }))
    }
}
