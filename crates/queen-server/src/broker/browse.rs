//! The dashboard's read-only listings of key/value namespaces and keys and
//! of the queues with pending timers (`store/browse.rs`).

use super::{Broker, BrokerError};
use crate::store::{KvEntry, KvNamespace, TimerQueue};

impl Broker {
    /// Every key/value namespace with live keys.
    pub async fn kv_namespaces(&self) -> Result<Vec<KvNamespace>, BrokerError> {
        Ok(self.store.kv_namespaces().await?)
    }

    /// A page of one namespace's live keys, and whether more follow.
    pub async fn kv_entries(
        &self,
        ns: &str,
        after: Option<&str>,
        limit: i64,
    ) -> Result<(Vec<KvEntry>, bool), BrokerError> {
        Ok(self.store.kv_entries(ns, after, limit).await?)
    }

    /// Every queue with pending timers.
    pub async fn timer_queues(&self) -> Result<Vec<TimerQueue>, BrokerError> {
        Ok(self.store.timer_queues().await?)
    }
}
