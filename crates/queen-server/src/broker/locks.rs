//! Locks and semaphores: each operation of a call on its own, in order.

use super::{Broker, BrokerError};
use crate::store::LockOutcome;

/// One validated lock operation.
#[derive(Debug, Clone)]
pub enum LockOp {
    Acquire {
        name: String,
        owner: Option<String>,
        limit: i32,
        ttl: i32,
    },
    Renew {
        name: String,
        token: i64,
        slot: i32,
        owner: Option<String>,
        ttl: i32,
    },
    Release {
        name: String,
        token: i64,
        slot: i32,
    },
    Get {
        name: String,
    },
}

impl LockOp {
    pub fn name(&self) -> &str {
        match self {
            Self::Acquire { name, .. }
            | Self::Renew { name, .. }
            | Self::Release { name, .. }
            | Self::Get { name } => name,
        }
    }
}

impl Broker {
    /// Runs one lock operation. An acquire without owner gets a fresh one.
    pub async fn lock_op(&self, op: &LockOp) -> Result<LockOutcome, BrokerError> {
        let (kind, result) = match op {
            LockOp::Acquire {
                name,
                owner,
                limit,
                ttl,
            } => {
                let owner = owner
                    .clone()
                    .unwrap_or_else(|| format!("anon:{}", uuid::Uuid::new_v4()));
                let mut pick = [0u8; 4];
                getrandom::fill(&mut pick).map_err(|e| BrokerError::Internal(e.to_string()))?;
                let r = self
                    .store
                    .lock_acquire(name, &owner, *limit, *ttl, u32::from_le_bytes(pick))
                    .await;
                ("acquire", r)
            }
            LockOp::Renew {
                name,
                token,
                slot,
                owner,
                ttl,
            } => (
                "renew",
                self.store
                    .lock_renew(name, *slot, *token, owner.as_deref(), *ttl)
                    .await,
            ),
            LockOp::Release { name, token, slot } => (
                "release",
                self.store.lock_release(name, *slot, *token).await,
            ),
            LockOp::Get { name } => ("get", self.store.lock_get(name).await),
        };
        let out = result?;
        let outcome = match &out {
            LockOutcome::Acquired { .. } => "granted",
            LockOutcome::Refused { .. } => "refused",
            LockOutcome::Renewed { .. } => "renewed",
            LockOutcome::Released { .. } => "released",
            LockOutcome::Lost { .. } => "lost",
            LockOutcome::Held { .. } => "read",
        };
        self.surfaces
            .lock_ops
            .with_label_values(&[kind, outcome])
            .inc();
        Ok(out)
    }
}
