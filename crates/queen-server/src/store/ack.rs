//! Ack: moving consumer cursors with `queen.ack_batch`. The common ack (every
//! message of one live lease, `completed`, in delivery order) first tries one
//! prepared statement, `sql/statements/consume_flight.sql`, shared by the acks
//! and pops waiting at the same moment (consumer group commit, `flights.rs` and
//! `consume.rs`); see `whole_lease`.

use std::fmt;

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::consume::{AckMember, ConsumeReq, ConsumeResp};
use super::op::{with_op, DbOp};
use super::{col, rows_into, Store, StoreError};

/// What an acknowledgement says happened to a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckStatus {
    /// `completed` (or its alias `success`): the cursor moves to the message.
    Completed,
    /// `failed`: redelivered while retries are left, then dead-lettered.
    Failed,
    /// `retry`: the lease is released without counting a retry.
    Retry,
    /// `dlq`: straight to the dead-letter queue.
    Dlq,
    /// Any other text, passed on as given: `queen.ack_batch` compares statuses
    /// case-insensitively (`COMPLETED` completes) and fails the item when it
    /// knows none of them.
    Other(String),
}

impl AckStatus {
    /// Reads a status as the client spelt it; absent means `completed`.
    pub fn parse(text: Option<&str>) -> Self {
        match text {
            None | Some("completed" | "success") => Self::Completed,
            Some("failed") => Self::Failed,
            Some("retry") => Self::Retry,
            Some("dlq") => Self::Dlq,
            Some(other) => Self::Other(other.to_owned()),
        }
    }

    /// The text `queen.ack_batch` reads.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Retry => "retry",
            Self::Dlq => "dlq",
            Self::Other(text) => text,
        }
    }
}

impl fmt::Display for AckStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One acknowledgement.
#[derive(Debug, Clone)]
pub struct AckItem {
    pub partition_id: Uuid,
    pub transaction_id: String,
    pub lease_id: Option<Uuid>,
    pub status: AckStatus,
    pub error: Option<String>,
}

/// The outcome of one [`AckItem`], by its position in the input.
#[derive(Debug, Clone)]
pub struct AckOutcome {
    pub index: usize,
    pub success: bool,
    pub error: Option<String>,
    pub queue_name: Option<String>,
    pub partition_name: Option<String>,
    pub lease_released: bool,
    pub dlq: bool,
    /// Offsets the cursor move passed over that no item of the call named
    /// (`queen.ack_batch`); 0 when nothing moved.
    pub skipped: i64,
    /// A `failed` ack that put the partition on hold for the queue's
    /// `retryDelay`: how long until its next delivery.
    pub retry_after: Option<std::time::Duration>,
}

/// What an ack request did.
#[derive(Debug, Clone, Default)]
pub struct Acked {
    /// One outcome per item, in input order.
    pub outcomes: Vec<AckOutcome>,
    /// Answered by the one-statement path (`sql/statements/consume_flight.sql`).
    pub by_statement: bool,
}

impl Store {
    /// Applies acknowledgements for one group: the whole-lease statement when
    /// it applies, `queen.ack_batch` for everything else.
    pub async fn acknowledge(&self, group: &str, items: &[AckItem]) -> Result<Acked, StoreError> {
        if let Some(member) = whole_lease(group, items) {
            if let ConsumeResp::Ack(Some(done)) =
                self.consume_flights.call(ConsumeReq::Ack(member)).await?
            {
                let last = items.len() - 1;
                let outcomes = (0..items.len())
                    .map(|index| AckOutcome {
                        index,
                        success: true,
                        error: None,
                        queue_name: Some(done.queue_name.clone()),
                        partition_name: Some(done.partition_name.clone()),
                        lease_released: index == last,
                        dlq: false,
                        // a whole lease, every message named
                        skipped: 0,
                        retry_after: None,
                    })
                    .collect();
                return Ok(Acked {
                    outcomes,
                    by_statement: true,
                });
            }
        }
        with_op!(self.db, DbOp::Ack, |client| {
            Ok(Acked {
                outcomes: ack_with(&*client, group, items, false).await?,
                by_statement: false,
            })
        })
    }
}

/// One `queen.ack_batch` call on `client`; `in_tx` (inside `/transaction`)
/// raises on the first refused item so the whole transaction rolls back.
pub(super) async fn ack_with(
    client: &impl GenericClient,
    group: &str,
    items: &[AckItem],
    in_tx: bool,
) -> Result<Vec<AckOutcome>, StoreError> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let partition_ids: Vec<Uuid> = items.iter().map(|a| a.partition_id).collect();
    let txn_ids: Vec<&str> = items.iter().map(|a| a.transaction_id.as_str()).collect();
    let lease_ids: Vec<Option<Uuid>> = items.iter().map(|a| a.lease_id).collect();
    let statuses: Vec<&str> = items.iter().map(|a| a.status.as_str()).collect();
    let errors: Vec<Option<&str>> = items.iter().map(|a| a.error.as_deref()).collect();
    let stmt = client
        .prepare_cached(
            "SELECT idx, success, error, queue_name, partition_name, lease_released, dlq, skipped,
                    retry_after_ms
             FROM queen.ack_batch($1, $2, $3, $4, $5, $6, $7)",
        )
        .await?;
    let rows = client
        .query(
            &stmt,
            &[
                &group,
                &partition_ids,
                &txn_ids,
                &lease_ids,
                &statuses,
                &errors,
                &in_tx,
            ],
        )
        .await?;
    let mut out = rows_into(&rows, |r| {
        let idx: i32 = col(r, "idx")?;
        Ok(AckOutcome {
            index: usize::try_from(idx - 1).unwrap_or_default(),
            success: col(r, "success")?,
            error: col(r, "error")?,
            queue_name: col(r, "queue_name")?,
            partition_name: col(r, "partition_name")?,
            lease_released: col(r, "lease_released")?,
            dlq: col(r, "dlq")?,
            skipped: col(r, "skipped")?,
            retry_after: col::<Option<i64>>(r, "retry_after_ms")?
                .map(|ms| std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        })
    })?;
    out.sort_by_key(|o| o.index);
    Ok(out)
}

/// The whole-lease ack's request, when `items` are all `completed` acks of
/// one partition under one lease (`sql/statements/consume_flight.sql` then checks
/// that they are exactly that lease's span); `None` sends them to
/// `queen.ack_batch`. When the statement applies them, every item succeeds
/// and the last releases the lease, as `queen.ack_batch` answers the same
/// items.
fn whole_lease(group: &str, items: &[AckItem]) -> Option<AckMember> {
    let first = items.first()?;
    let lease_id = first.lease_id?;
    let whole = items.iter().all(|a| {
        a.status == AckStatus::Completed
            && a.partition_id == first.partition_id
            && a.lease_id == Some(lease_id)
    });
    whole.then(|| AckMember {
        group: group.to_owned(),
        partition_id: first.partition_id,
        lease_id,
        transaction_ids: items.iter().map(|a| a.transaction_id.clone()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_as_the_contract_spells_them() {
        assert_eq!(AckStatus::parse(None), AckStatus::Completed);
        assert_eq!(AckStatus::parse(Some("success")), AckStatus::Completed);
        assert_eq!(AckStatus::parse(Some("retry")), AckStatus::Retry);
        assert_eq!(AckStatus::parse(Some("dlq")).as_str(), "dlq");
        // other spellings reach the database as given
        let odd = AckStatus::parse(Some("COMPLETED"));
        assert_eq!(odd, AckStatus::Other("COMPLETED".into()));
        assert_eq!(odd.as_str(), "COMPLETED");
    }
}
