//! `/transaction` with its `kv` and `timers` riders: acks and pushes, then
//! the KV operations (guards of locks among them), then the timer writes, in
//! one PostgreSQL transaction. A lost `required` KV operation rolls all of it
//! back, as does any failing ack or push.

use super::kv::{kv_apply, KvOp, KvOutcome, KvPrecondition, KvResult};
use super::op::{with_op, DbOp};
use super::timers::{timers_apply, TimerVerdict, TimerWrite};
use super::transaction::run_operations;
use super::{Store, StoreError, TxFailure, TxOperation, TxOutcome};

/// What a committed (or precondition-refused) bundle did.
#[derive(Debug)]
pub enum BundleOutcome {
    Committed {
        outcomes: Vec<TxOutcome>,
        kv: Vec<KvResult>,
        timers: Vec<TimerVerdict>,
    },
    /// Nothing was applied: a `required` KV op (at its rider position) lost.
    Precondition(KvPrecondition),
}

impl Store {
    /// Runs a transaction with riders; see the module doc.
    pub async fn run_bundle(
        &self,
        ops: &[TxOperation],
        kv: &[KvOp],
        timers: &[TimerWrite],
    ) -> Result<BundleOutcome, TxFailure> {
        with_op!(self.db, DbOp::Transaction, |client| {
            let tx = client.transaction().await.map_err(StoreError::from)?;
            let outcomes = run_operations(&tx, ops).await?;
            let failure = |e: StoreError| TxFailure {
                failed_at: ops.len(),
                message: e.client_text(),
                done: Vec::new(),
                store: Some(e),
            };
            let kv = match kv_apply(&tx, kv).await.map_err(failure)? {
                KvOutcome::Done(r) => r,
                KvOutcome::Precondition(p) => {
                    tx.rollback().await.map_err(StoreError::from)?;
                    return Ok(BundleOutcome::Precondition(p));
                }
            };
            let timers = timers_apply(&tx, timers).await.map_err(failure)?;
            tx.commit().await.map_err(StoreError::from)?;
            Ok(BundleOutcome::Committed {
                outcomes,
                kv,
                timers,
            })
        })
    }
}
