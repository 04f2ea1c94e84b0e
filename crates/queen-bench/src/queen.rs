//! Queen as a [`Target`] of the load engine: pushes over `POST /api/v1/push`
//! (JSON, or the binary body when the case says `bin`/`binz`),
//! wildcard long-poll pops and `ack/batch`, all over HTTP v1.

use std::sync::Arc;

use anyhow::Result;

use crate::api::{AckItem, AckOutcome, Api, PopParams, PoppedMessage};
use crate::load::{self, ConsumeSpec, RunState, Target};

/// One broker and the run whose messages it carries.
pub struct QueenTarget {
    pub api: Api,
    pub run: Arc<RunState>,
    pub payload_bytes: usize,
}

pub struct QueenProducer {
    api: Api,
    run: Arc<RunState>,
    payload_bytes: usize,
}

pub struct QueenConsumer {
    api: Api,
    run: Arc<RunState>,
    params: PopParams,
    /// What the last pop returned: the next ack's items.
    leased: Vec<PoppedMessage>,
}

impl Target for QueenTarget {
    type Producer = QueenProducer;
    type Consumer = QueenConsumer;

    async fn producer(&self, _index: u32) -> Result<QueenProducer> {
        Ok(QueenProducer {
            api: self.api.clone(),
            run: Arc::clone(&self.run),
            payload_bytes: self.payload_bytes,
        })
    }

    async fn consumer(
        &self,
        spec: &ConsumeSpec,
        group: usize,
        _index: u32,
    ) -> Result<QueenConsumer> {
        Ok(QueenConsumer {
            api: self.api.clone(),
            run: Arc::clone(&self.run),
            params: PopParams {
                batch: spec.batch,
                partitions: spec.pop_partitions,
                wait_ms: Some(spec.wait_ms),
                consumer_group: spec.groups.get(group).cloned().flatten(),
            },
            leased: Vec::new(),
        })
    }
}

impl load::Producer for QueenProducer {
    async fn push(&mut self, partition: u64, first: u64, last: u64) -> Result<u64> {
        let name = load::partition_name(partition);
        let n = (last - first) as usize;
        let (run, bytes) = (&self.run, self.payload_bytes);
        match run.body {
            load::PushBody::Json => {
                let body = load::push_body(run, &name, first, last, bytes);
                self.api.push_raw(body, n).await
            }
            zstd @ (load::PushBody::Binary | load::PushBody::BinaryZstd) => {
                let zstd = zstd == load::PushBody::BinaryZstd;
                let body = load::push_body_binary(run, &name, first, last, bytes, zstd)?;
                self.api.push_binary(body, n).await
            }
        }
    }
}

impl load::Consumer for QueenConsumer {
    async fn pop(&mut self) -> Result<Vec<Option<u64>>> {
        self.leased = self.api.pop(&self.run.queue, &self.params).await?;
        Ok(self
            .leased
            .iter()
            .map(|m| {
                if self.run.anon {
                    m.data
                        .as_ref()
                        .and_then(|d| crate::peers::seq_of(d.get().as_bytes()))
                } else {
                    load::parse_seq(&self.run.prefix, &m.transaction_id)
                }
            })
            .collect())
    }

    /// Acks everything that was leased, redeliveries and strangers included,
    /// so nothing stays in flight after the run.
    async fn ack(&mut self) -> Result<Option<AckOutcome>> {
        let acks = AckItem::completed_for(&self.leased);
        if acks.is_empty() {
            return Ok(None);
        }
        let outcome = self
            .api
            .ack_batch_group(self.params.consumer_group.as_deref(), &acks)
            .await?;
        Ok(Some(outcome))
    }
}
