//! Reads that move nothing (issue 21): records by offset, partition
//! discovery, queue depth, and the retry of a dead letter.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Broker, BrokerError};
use crate::store::{
    ChangedAfter, ChangedPage, FetchEntry, FetchedEntry, PartitionDepth, RetryOutcome, SafeTime,
};

/// Records one entry may return.
pub const FETCH_MAX_RECORDS: i32 = 10_000;
/// Payload bytes one fetch call may return, whatever its entries ask.
pub const FETCH_CALL_MAX_BYTES: i64 = 64 * 1024 * 1024;

impl Broker {
    /// Reads records by offset; payloads decrypted.
    pub async fn fetch(
        &self,
        entries: &[FetchEntry],
        call_max_bytes: i64,
    ) -> Result<Vec<FetchedEntry>, BrokerError> {
        let mut out = self
            .store
            .fetch(
                entries,
                call_max_bytes.min(FETCH_CALL_MAX_BYTES),
                FETCH_MAX_RECORDS,
            )
            .await?;
        let mut records = 0u64;
        for (e, asked) in out.iter_mut().zip(entries) {
            records += e.records.len() as u64;
            for r in &mut e.records {
                r.payload = self.deliverable(
                    &asked.queue,
                    &asked.partition,
                    &r.transaction_id,
                    std::mem::take(&mut r.payload),
                )?;
            }
        }
        self.reads_metrics.fetch_calls.inc();
        self.reads_metrics.fetch_records.inc_by(records);
        Ok(out)
    }

    /// The safe time of a discovery call; taken before its pages are read,
    /// so every write they do not count is stamped at or after it.
    pub async fn discovery_safe_time(&self) -> Result<SafeTime, BrokerError> {
        Ok(self.store.safe_time().await?)
    }

    /// One discovery page; `partitions: None` for an unknown queue.
    pub async fn changed_partitions(
        &self,
        queue: &str,
        since: Option<DateTime<Utc>>,
        after: Option<&ChangedAfter>,
        limit: i64,
    ) -> Result<ChangedPage, BrokerError> {
        let page = self
            .store
            .changed_partitions(queue, since, after, limit)
            .await?;
        self.reads_metrics.changed_pages.inc();
        Ok(page)
    }

    /// Backlog per partition; `None` for an unknown queue.
    pub async fn queue_depth(
        &self,
        queue: &str,
        group: Option<&str>,
    ) -> Result<Option<Vec<PartitionDepth>>, BrokerError> {
        let depth = self.store.queue_depth(queue, group).await?;
        self.reads_metrics.depth_reads.inc();
        Ok(depth)
    }

    /// Moves a dead letter back to the tail of its partition; parked pops of
    /// the queue wake.
    pub async fn retry_dead_letter(
        &self,
        partition_id: Uuid,
        transaction_id: &str,
    ) -> Result<RetryOutcome, BrokerError> {
        if self.flags.push_maintenance() {
            return Err(BrokerError::Maintenance(
                "Push maintenance mode is on: dead letters cannot be retried now".into(),
            ));
        }
        let outcome = self
            .store
            .retry_dead_letter(partition_id, transaction_id)
            .await?;
        let result = match &outcome {
            RetryOutcome::Gone => "gone",
            RetryOutcome::Moved(l) => {
                self.announce_messages(&l.queue, &l.partition);
                "moved"
            }
            RetryOutcome::Duplicate(_) => "duplicate",
        };
        self.reads_metrics
            .dlq_retries
            .with_label_values(&[result])
            .inc();
        Ok(outcome)
    }
}
