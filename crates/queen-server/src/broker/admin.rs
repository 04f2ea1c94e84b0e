//! The admin reads and writes behind the dashboard routes: dead letters,
//! traces, consumer groups, statistics, single messages. Mostly the store's
//! answers as they are, with payloads decrypted and, where cursors move, the
//! hint lists and parked pops brought up to date.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::crypto::open_or_stored;
use super::{Broker, BrokerError};
use crate::store::{
    Cursor, DeadLetter, DeadLetterFilter, MessageDetail, MessageFilter, MessageSummary, NewTrace,
    PartitionStats, QueueRow, QueueScope, StoreError, Subscription, Trace, TraceName,
};

/// A message with its payload decrypted.
#[derive(Debug, Clone)]
pub struct MessageView {
    pub detail: MessageDetail,
    /// The payload is stored encrypted (whether or not this broker's key opened it).
    pub stored_encrypted: bool,
}

impl Broker {
    /// Opens a payload for an admin view: an envelope no key here opens is
    /// shown as stored (the view marks it stored encrypted), never delivered.
    fn open(&self, stored: String) -> String {
        open_or_stored(self.cipher.as_ref(), stored)
    }

    /// Dead letters matching `filter`, newest first, with the total; payloads decrypted.
    pub async fn dead_letters(
        &self,
        filter: &DeadLetterFilter,
    ) -> Result<(Vec<DeadLetter>, i64), StoreError> {
        let (mut entries, total) = self.store.list_dead_letters(filter).await?;
        for d in &mut entries {
            d.payload = self.open(std::mem::take(&mut d.payload));
        }
        Ok((entries, total))
    }

    /// Records a trace event on a message; false if the message is unknown.
    pub async fn record_trace(&self, trace: &NewTrace<'_>) -> Result<bool, StoreError> {
        self.store.insert_trace(trace).await
    }

    /// Trace events of one message, oldest first.
    pub async fn traces_of_message(
        &self,
        partition_id: Uuid,
        transaction_id: &str,
    ) -> Result<Vec<Trace>, StoreError> {
        self.store
            .traces_of_message(partition_id, transaction_id)
            .await
    }

    /// Trace events carrying `name`, newest first, with their total; message
    /// payloads decrypted.
    pub async fn traces_by_name(
        &self,
        name: &str,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<Trace>, i64), StoreError> {
        let (mut traces, total) = self.store.traces_by_name(name, limit, offset).await?;
        for t in &mut traces {
            t.message_payload = t.message_payload.take().map(|p| self.open(p));
        }
        Ok((traces, total))
    }

    /// Trace names with counts, most recently seen first, with their total.
    pub async fn trace_names(
        &self,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<TraceName>, i64), StoreError> {
        self.store.trace_names(limit, offset).await
    }

    /// Every consumer cursor (of one group, or of all), with its lag.
    pub async fn cursors(&self, group: Option<&str>) -> Result<Vec<Cursor>, StoreError> {
        self.store.cursors(group).await
    }

    /// Stored subscriptions of every group.
    pub async fn subscriptions(&self) -> Result<Vec<Subscription>, StoreError> {
        self.store.subscriptions().await
    }

    /// The (group, queue) pairs that conflate (last-value delivery), of
    /// `group` and `queue` when given.
    pub async fn conflating_groups(
        &self,
        group: Option<&str>,
        queue: Option<&str>,
    ) -> Result<Vec<(String, String)>, StoreError> {
        self.store.conflating_groups(group, queue).await
    }

    /// Deletes a group's cursors (on one queue, or on all) and, with
    /// `delete_metadata`, its stored subscriptions; returns the cursors deleted.
    pub async fn delete_consumer_group(
        &self,
        group: &str,
        queue: Option<&str>,
        delete_metadata: bool,
    ) -> Result<u64, StoreError> {
        let deleted = self
            .store
            .delete_consumer_group(group, queue, delete_metadata)
            .await?;
        // the group starts over: what this broker knew of its drained partitions is void
        self.recent.forget_group(queue, group);
        self.policies.forget_group(queue, group);
        Ok(deleted)
    }

    /// Rewrites a group's stored subscription time on every queue; returns the rows changed.
    pub async fn update_subscription_timestamp(
        &self,
        group: &str,
        at: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        self.store.update_subscription_timestamp(group, at).await
    }

    /// Moves a group's cursors on `queue` to its end or to a time; `None` when
    /// the queue does not exist. Returns (partition, committed offset) per cursor.
    pub async fn seek_queue(
        &self,
        group: &str,
        queue: &str,
        to_end: bool,
        at: Option<DateTime<Utc>>,
    ) -> Result<Option<Vec<(String, i64)>>, BrokerError> {
        let Some(row) = self.queue(queue).await? else {
            return Ok(None);
        };
        let moved = self.store.seek(group, row.id, None, to_end, at).await?;
        // a cursor moved back makes drained partitions pending again
        self.recent.forget_group(Some(queue), group);
        self.waker.notify(queue);
        Ok(Some(moved))
    }

    /// Moves a group's cursor on one partition to its end; `None` when the
    /// queue does not exist.
    pub async fn seek_partition_to_end(
        &self,
        group: &str,
        queue: &str,
        partition: &str,
    ) -> Result<Option<Vec<(String, i64)>>, BrokerError> {
        let Some(row) = self.queue(queue).await? else {
            return Ok(None);
        };
        Ok(Some(
            self.store
                .seek(group, row.id, Some(partition), true, None)
                .await?,
        ))
    }

    /// Per-partition counts of every queue (or one).
    pub async fn queue_stats(
        &self,
        queue: Option<&str>,
    ) -> Result<Vec<PartitionStats>, StoreError> {
        self.store.partition_stats(queue).await
    }

    /// Messages written per minute in a window (optionally of one queue,
    /// a namespace, a task).
    pub async fn ingested_per_minute(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        scope: QueueScope<'_>,
    ) -> Result<Vec<(DateTime<Utc>, i64)>, StoreError> {
        self.store.ingested_per_minute(from, to, scope).await
    }

    /// Messages matching `filter`, newest first (no payloads).
    pub async fn messages(
        &self,
        filter: &MessageFilter,
    ) -> Result<Vec<MessageSummary>, StoreError> {
        self.store.list_messages(filter).await
    }

    /// One message with its payload decrypted and its per-group state.
    pub async fn message(
        &self,
        partition_id: Uuid,
        transaction_id: &str,
    ) -> Result<Option<MessageView>, StoreError> {
        let Some(mut detail) = self
            .store
            .message_detail(partition_id, transaction_id)
            .await?
        else {
            return Ok(None);
        };
        let stored_encrypted = super::crypto::is_envelope(&detail.payload);
        detail.payload = self.open(std::mem::take(&mut detail.payload));
        Ok(Some(MessageView {
            detail,
            stored_encrypted,
        }))
    }

    /// Deletes one message; false if unknown.
    pub async fn delete_message(
        &self,
        partition_id: Uuid,
        transaction_id: &str,
    ) -> Result<bool, StoreError> {
        self.store
            .delete_message(partition_id, transaction_id)
            .await
    }

    /// A queue's configuration for the admin views (cached like every lookup).
    pub async fn queue_config(&self, name: &str) -> Result<Option<QueueRow>, StoreError> {
        self.queue(name).await
    }
}
