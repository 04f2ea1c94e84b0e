//! `/transaction` with `kv` and `timers` riders.

use uuid::Uuid;

use super::timers::TimerReq;
use super::{Broker, BrokerError, TxOp};
use crate::store::{
    BundleOutcome, KvOp, KvOutcome, KvPrecondition, KvResult, TimerVerdict, TimerWrite, TxFailure,
    TxOutcome,
};

/// What a transaction with riders did.
#[derive(Debug)]
pub struct BundleResult {
    pub transaction_id: Uuid,
    pub transaction_ids: Vec<String>,
    pub queues: Vec<Option<String>>,
    pub outcome: Result<BundleDone, BundleRefusal>,
}

#[derive(Debug)]
pub struct BundleDone {
    pub outcomes: Vec<TxOutcome>,
    pub kv: Vec<KvResult>,
    pub timer_writes: Vec<TimerWrite>,
    pub timers: Vec<TimerVerdict>,
}

/// Why nothing of the bundle was applied.
#[derive(Debug)]
pub enum BundleRefusal {
    /// A `required` KV op (a guard, a `once`) lost; `index` is in the rider.
    Precondition(KvPrecondition),
    Failed(TxFailure),
}

impl Broker {
    /// Runs acks, pushes, KV ops and timer writes in one transaction.
    pub async fn bundle(
        &self,
        ops: Vec<TxOp>,
        kv: Vec<KvOp>,
        timers: Vec<TimerReq>,
    ) -> Result<BundleResult, BrokerError> {
        let (store_ops, transaction_ids, queues) = self.prepare_tx(ops).await?;
        let timer_writes = self.prepare_timers(timers).await?;
        let transaction_id = Uuid::now_v7();
        let outcome = match self.store.run_bundle(&store_ops, &kv, &timer_writes).await {
            Ok(BundleOutcome::Committed {
                outcomes,
                kv: kv_results,
                timers,
            }) => {
                self.announce_tx(&outcomes, &store_ops);
                self.count_kv(&kv, &KvOutcome::Done(kv_results.clone()));
                self.timers_done(&timer_writes, &timers);
                Ok(BundleDone {
                    outcomes,
                    kv: kv_results,
                    timer_writes,
                    timers,
                })
            }
            Ok(BundleOutcome::Precondition(p)) => {
                self.surfaces
                    .kv_calls
                    .with_label_values(&["precondition"])
                    .inc();
                Err(BundleRefusal::Precondition(p))
            }
            Err(failure) => {
                if let Some(e) = failure.store.as_ref().filter(|e| e.is_unavailable()) {
                    return Err(BrokerError::Store(e.clone()));
                }
                Err(BundleRefusal::Failed(failure))
            }
        };
        Ok(BundleResult {
            transaction_id,
            transaction_ids,
            queues,
            outcome,
        })
    }
}
