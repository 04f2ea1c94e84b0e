//! Consumer groups: cursors with their lag, stored subscriptions, deleting a
//! group, moving its cursors (seek), rewriting its subscription time.

use chrono::{DateTime, Utc};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::store::op::{with_op, DbOp};
use crate::store::{col, rows_into, Store, StoreError};

/// One consumer cursor with what lies ahead of it.
#[derive(Debug, Clone)]
pub struct Cursor {
    pub consumer_group: String,
    pub queue: String,
    pub partition: String,
    pub partition_id: Uuid,
    pub offset_lag: i64,
    pub oldest_unconsumed_at: Option<DateTime<Utc>>,
    pub last_consumed_at: Option<DateTime<Utc>>,
    pub total_consumed: i64,
    pub lease_active: bool,
    pub lease_holder: Option<String>,
}

/// A stored subscription of a group on a queue.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub consumer_group: String,
    pub queue: String,
    pub mode: String,
    pub timestamp: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
}

impl Cursor {
    fn from_row(r: &Row) -> Result<Self, StoreError> {
        Ok(Self {
            consumer_group: col(r, "consumer_group")?,
            queue: col(r, "queue")?,
            partition: col(r, "partition")?,
            partition_id: col(r, "partition_id")?,
            offset_lag: col(r, "offset_lag")?,
            oldest_unconsumed_at: col(r, "oldest_unconsumed_at")?,
            last_consumed_at: col(r, "last_consumed_at")?,
            total_consumed: col(r, "total_consumed")?,
            lease_active: col(r, "lease_active")?,
            lease_holder: col(r, "lease_holder")?,
        })
    }
}

impl Store {
    /// Deletes a group's cursors (on one queue, or on all) and optionally its
    /// stored subscriptions. Returns the number of cursors deleted.
    pub async fn delete_consumer_group(
        &self,
        group: &str,
        queue: Option<&str>,
        delete_metadata: bool,
    ) -> Result<u64, StoreError> {
        with_op!(self.db, DbOp::GroupWrite, |client| {
            let tx = client.transaction().await?;
            let deleted = tx
                .execute(
                    "DELETE FROM queen.log_consumers lc USING queen.partitions p, queen.queues q
                         WHERE lc.partition_id = p.id AND p.queue_id = q.id
                           AND lc.consumer_group = $1 AND ($2::text IS NULL OR q.name = $2)",
                    &[&group, &queue],
                )
                .await?;
            // the group is gone: its next pop registers it anew
            tx.execute(
                "DELETE FROM queen.group_policies
                     WHERE consumer_group = $1 AND ($2::text IS NULL OR queue_name = $2)",
                &[&group, &queue],
            )
            .await?;
            if delete_metadata {
                tx.execute(
                    "DELETE FROM queen.consumer_subscriptions
                         WHERE consumer_group = $1 AND ($2::text IS NULL OR queue_name = $2)",
                    &[&group, &queue],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(deleted)
        })
    }

    /// Rewrites the stored subscription timestamp of a group on every queue.
    pub async fn update_subscription_timestamp(
        &self,
        group: &str,
        at: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        with_op!(self.db, DbOp::GroupWrite, |client| {
            Ok(client
                .execute(
                    "UPDATE queen.consumer_subscriptions SET subscription_timestamp = $2
                         WHERE consumer_group = $1",
                    &[&group, &at],
                )
                .await?)
        })
    }

    /// Every cursor (of one group, or of all), with its lag.
    pub async fn cursors(&self, group: Option<&str>) -> Result<Vec<Cursor>, StoreError> {
        with_op!(self.db, DbOp::Groups, |client| {
            let rows = client
                    .query(
                        "SELECT lc.consumer_group, q.name AS queue, p.name AS partition,
                                p.id AS partition_id,
                                greatest(p.next_offset - 1 - greatest(lc.committed_offset, p.low_offset - 1), 0)
                                    AS offset_lag,
                                queen.oldest_after(p.id, greatest(lc.committed_offset, p.low_offset - 1))
                                    AS oldest_unconsumed_at,
                                lc.last_consumed_at, lc.total_consumed,
                                coalesce(lc.lease_expires_at > now(), false) AS lease_active,
                                lc.lease_holder
                         FROM queen.log_consumers lc
                         JOIN queen.partitions p ON p.id = lc.partition_id
                         JOIN queen.queues q ON q.id = p.queue_id
                         WHERE ($1::text IS NULL OR lc.consumer_group = $1)
                         ORDER BY lc.consumer_group, q.name, p.name",
                        &[&group],
                    )
                    .await?;
            rows_into(&rows, Cursor::from_row)
        })
    }

    /// The (group, queue) pairs whose stored policy is conflation, of
    /// `group` and `queue` when given (`queen.group_policies`).
    pub async fn conflating_groups(
        &self,
        group: Option<&str>,
        queue: Option<&str>,
    ) -> Result<Vec<(String, String)>, StoreError> {
        with_op!(self.db, DbOp::Groups, |client| {
            let rows = client
                .query(
                    "SELECT consumer_group, queue_name FROM queen.group_policies
                         WHERE conflation AND ($1::text IS NULL OR consumer_group = $1)
                           AND ($2::text IS NULL OR queue_name = $2)
                         ORDER BY consumer_group, queue_name",
                    &[&group, &queue],
                )
                .await?;
            rows_into(&rows, |r| {
                Ok((col(r, "consumer_group")?, col(r, "queue_name")?))
            })
        })
    }

    /// Stored subscriptions (queue-wide and per partition).
    pub async fn subscriptions(&self) -> Result<Vec<Subscription>, StoreError> {
        with_op!(self.db, DbOp::Groups, |client| {
            let rows = client
                .query(
                    "SELECT consumer_group, queue_name, subscription_mode, subscription_timestamp,
                                created_at
                         FROM queen.consumer_subscriptions
                         ORDER BY consumer_group, queue_name, partition_name",
                    &[],
                )
                .await?;
            rows_into(&rows, |r| {
                Ok(Subscription {
                    consumer_group: col(r, "consumer_group")?,
                    queue: col(r, "queue_name")?,
                    mode: col(r, "subscription_mode")?,
                    timestamp: col(r, "subscription_timestamp")?,
                    created_at: col(r, "created_at")?,
                })
            })
        })
    }

    /// Moves a group's existing cursors on a queue; see `queen.seek`.
    /// Returns (partition, new committed offset) per cursor moved.
    pub async fn seek(
        &self,
        group: &str,
        queue_id: Uuid,
        partition: Option<&str>,
        to_end: bool,
        at: Option<DateTime<Utc>>,
    ) -> Result<Vec<(String, i64)>, StoreError> {
        with_op!(self.db, DbOp::GroupWrite, |client| {
            let rows = client
                .query(
                    "SELECT partition_name, committed_offset FROM queen.seek($1, $2, $3, $4, $5)",
                    &[&group, &queue_id, &partition, &to_end, &at],
                )
                .await?;
            rows_into(&rows, |r| {
                Ok((col(r, "partition_name")?, col(r, "committed_offset")?))
            })
        })
    }
}
