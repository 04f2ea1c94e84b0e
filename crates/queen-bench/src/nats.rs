//! NATS JetStream as a [`Target`] (through `async-nats`): one file-storage
//! stream per scenario, acknowledged publishes awaited per batch, durable
//! pull consumers fetching up to a batch at a time, an explicit ack per
//! message (work-queue streams accept no other ack policy).
//!
//! Partition `q` is subject `<base>.p<q>`. Queue mode: a work-queue stream
//! (a message goes once acked) and one durable consumer `p<q>` per subject.
//! Consumer groups: an interest stream (a message goes once every consumer
//! acked it) and a durable consumer `g<g>-p<q>` per group and subject.
//!
//! JetStream fsyncs its files on a timer (`sync_interval`, two minutes by
//! default), not per acknowledged publish: an acked message can be lost in a
//! power cut, unlike Queen's and RabbitMQ's.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};
use async_nats::jetstream::{self, consumer, stream};

use crate::api::AckOutcome;
use crate::load::{self, ConsumeSpec, Target};
use crate::peers::{self, Inbox, Layout};

pub struct NatsSession {
    url: String,
    js: jetstream::Context,
}

pub struct NatsTarget {
    url: String,
    layout: Arc<Layout>,
}

pub struct NatsProducer {
    js: jetstream::Context,
    layout: Arc<Layout>,
}

pub struct NatsConsumer {
    _client: async_nats::Client,
    batch: usize,
    wait: Duration,
    inbox: Inbox<jetstream::Message>,
    /// What the last pop returned: the next ack's messages.
    leased: Vec<jetstream::Message>,
}

async fn connect(url: &str) -> Result<async_nats::Client> {
    async_nats::connect(url)
        .await
        .with_context(|| format!("connecting to NATS at {url}"))
}

fn stream_name(layout: &Layout) -> String {
    layout.base.clone()
}

fn subject(layout: &Layout, partition: u64) -> String {
    format!("{}.p{partition}", layout.base)
}

fn consumer_name(layout: &Layout, group: usize, partition: u32) -> String {
    if layout.fanout() {
        format!("g{group}-p{partition}")
    } else {
        format!("p{partition}")
    }
}

impl NatsSession {
    pub async fn open(url: &str) -> Result<Self> {
        let client = connect(url).await?;
        // Fails early, and clearly, on a server without JetStream. (The raw
        // request: this client's account-info type does not parse 2.9's answer.)
        let info = client
            .request("$JS.API.INFO", bytes::Bytes::new())
            .await
            .context("NATS answered, but not to a JetStream request")?;
        let info: serde_json::Value =
            serde_json::from_slice(&info.payload).context("JetStream account info")?;
        if let Some(e) = info.get("error") {
            bail!("NATS answered, but JetStream is not available: {e}");
        }
        let js = jetstream::new(client);
        Ok(Self {
            url: url.to_owned(),
            js,
        })
    }

    pub async fn prepare(&self, layout: Layout) -> Result<NatsTarget> {
        let name = stream_name(&layout);
        let retention = if layout.fanout() {
            stream::RetentionPolicy::Interest
        } else {
            stream::RetentionPolicy::WorkQueue
        };
        let s = self
            .js
            .create_stream(stream::Config {
                name: name.clone(),
                subjects: vec![format!("{}.>", layout.base)],
                retention,
                storage: stream::StorageType::File,
                num_replicas: 1,
                ..stream::Config::default()
            })
            .await
            .with_context(|| format!("creating stream {name}"))?;
        let groups = if layout.fanout() {
            layout.groups.len()
        } else {
            1
        };
        for g in 0..groups {
            for p in 0..layout.partitions {
                let durable = consumer_name(&layout, g, p);
                s.create_consumer(consumer::pull::Config {
                    durable_name: Some(durable.clone()),
                    filter_subject: subject(&layout, u64::from(p)),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ..consumer::pull::Config::default()
                })
                .await
                .with_context(|| format!("creating consumer {durable} on {name}"))?;
            }
        }
        Ok(NatsTarget {
            url: self.url.clone(),
            layout: Arc::new(layout),
        })
    }

    pub async fn cleanup(&self, target: &NatsTarget) -> Result<()> {
        let name = stream_name(&target.layout);
        self.js
            .delete_stream(&name)
            .await
            .with_context(|| format!("deleting stream {name}"))?;
        Ok(())
    }
}

impl Target for NatsTarget {
    type Producer = NatsProducer;
    type Consumer = NatsConsumer;

    async fn producer(&self, _index: u32) -> Result<NatsProducer> {
        Ok(NatsProducer {
            js: jetstream::new(connect(&self.url).await?),
            layout: Arc::clone(&self.layout),
        })
    }

    async fn consumer(&self, spec: &ConsumeSpec, group: usize, index: u32) -> Result<NatsConsumer> {
        let client = connect(&self.url).await?;
        let js = jetstream::new(client.clone());
        let name = stream_name(&self.layout);
        let s = js
            .get_stream(&name)
            .await
            .with_context(|| format!("opening stream {name}"))?;
        let partitions =
            peers::assigned_partitions(index, spec.consumers_per_group, self.layout.partitions);
        let batch = spec.batch.max(1) as usize;
        let (mut inbox, tx) = Inbox::new(batch * partitions.len() + 16);
        for p in partitions {
            let durable = consumer_name(&self.layout, group, p);
            let c: consumer::PullConsumer = s
                .get_consumer(&durable)
                .await
                .map_err(|e| anyhow!("opening consumer {durable}: {e}"))?;
            let messages = c
                .stream()
                .max_messages_per_batch(batch)
                .messages()
                .await
                .with_context(|| format!("pulling from {durable}"))?;
            inbox.forward(tx.clone(), messages, |m| m);
        }
        Ok(NatsConsumer {
            _client: client,
            batch,
            wait: Duration::from_millis(spec.wait_ms),
            inbox,
            leased: Vec::new(),
        })
    }
}

impl load::Producer for NatsProducer {
    async fn push(&mut self, partition: u64, first: u64, last: u64) -> Result<u64> {
        // a run of fresh partitions (Queen's `pnew`) spreads over the fixed subjects here
        let partition = partition % u64::from(self.layout.partitions.max(1));
        let subject = subject(&self.layout, partition);
        let mut acks = Vec::with_capacity((last - first) as usize);
        for seq in first..last {
            let body = peers::body(self.layout.payload_bytes, seq, self.layout.salt);
            let ack = self
                .js
                .publish(subject.clone(), body.into())
                .await
                .context("JetStream publish")?;
            acks.push(ack);
        }
        // The batch is answered when the stream has acknowledged all of it.
        let mut queued = 0;
        for a in acks {
            let ack = a.await.context("JetStream publish ack")?;
            if ack.duplicate {
                bail!("JetStream took a message for a duplicate");
            }
            queued += 1;
        }
        Ok(queued)
    }
}

impl load::Consumer for NatsConsumer {
    async fn pop(&mut self) -> Result<Vec<Option<u64>>> {
        self.leased = self.inbox.next_batch(self.batch, self.wait).await?;
        Ok(self
            .leased
            .iter()
            .map(|m| peers::seq_of(&m.payload))
            .collect())
    }

    async fn ack(&mut self) -> Result<Option<AckOutcome>> {
        if self.leased.is_empty() {
            return Ok(None);
        }
        let mut outcome = AckOutcome::default();
        for m in self.leased.drain(..) {
            match m.ack().await {
                Ok(()) => outcome.succeeded += 1,
                Err(e) => {
                    outcome.failed += 1;
                    outcome.first_error.get_or_insert_with(|| e.to_string());
                }
            }
        }
        Ok(Some(outcome))
    }
}
