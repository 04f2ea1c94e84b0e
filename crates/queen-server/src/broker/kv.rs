//! Key/value use case: one validated call, applied whole or not at all.

use super::{Broker, BrokerError};
use crate::store::{KvOp, KvOutcome, KvResult};

impl Broker {
    /// Runs one `POST /api/v1/kv` call.
    pub async fn kv(&self, ops: Vec<KvOp>) -> Result<KvOutcome, BrokerError> {
        if ops.is_empty() {
            return Ok(KvOutcome::Done(Vec::new()));
        }
        let outcome = self.store.kv_call(&ops).await?;
        self.count_kv(&ops, &outcome);
        Ok(outcome)
    }

    pub(super) fn count_kv(&self, ops: &[KvOp], outcome: &KvOutcome) {
        let m = &self.surfaces;
        match outcome {
            KvOutcome::Precondition(_) => m.kv_calls.with_label_values(&["precondition"]).inc(),
            KvOutcome::Done(results) => {
                m.kv_calls.with_label_values(&["committed"]).inc();
                for (op, r) in ops.iter().zip(results) {
                    let outcome = match r {
                        KvResult::Write { applied: true, .. } => "applied",
                        KvResult::Write { .. } => "refused",
                        KvResult::Get(Some(_)) => "hit",
                        KvResult::Get(None) => "miss",
                        _ => "read",
                    };
                    m.kv_ops.with_label_values(&[op.kind.name(), outcome]).inc();
                }
            }
        }
    }
}
