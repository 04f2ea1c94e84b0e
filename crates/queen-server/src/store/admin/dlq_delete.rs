//! Dead letters: deleting entries (the dashboard's "delete").

use uuid::Uuid;

use crate::store::op::{with_op, DbOp};
use crate::store::{Store, StoreError};

impl Store {
    /// Deletes the dead-letter entries of one message (of one group, or of
    /// every group); returns how many it deleted.
    pub async fn delete_dead_letters(
        &self,
        partition_id: Uuid,
        transaction_id: &str,
        consumer_group: Option<&str>,
    ) -> Result<u64, StoreError> {
        with_op!(self.db, DbOp::DeadLetters, |client| {
            Ok(client
                .execute(
                    "DELETE FROM queen.dead_letters
                     WHERE partition_id = $1 AND transaction_id = $2
                       AND ($3::text IS NULL OR consumer_group = $3)",
                    &[&partition_id, &transaction_id, &consumer_group],
                )
                .await?)
        })
    }
}
