//! The liveness probe: one dedicated connection, one `SELECT 1` per
//! `DB_PROBE_INTERVAL_MS`, each within `DB_PROBE_TIMEOUT_MS`.
//!
//! A connection outside the pool, so a busy pool never looks like a dead
//! database. A probe that fails (no answer in time, a closed link, no host of
//! the list that takes writes) declares the database lost
//! ([`Store::declare_lost`]); the spool's replay loop then probes through the
//! pool and brings it back.

use std::time::Duration;

use super::{Store, StoreError};

/// The probe's connection between probes.
#[derive(Default)]
pub struct Probe {
    conn: Option<tokio_postgres::Client>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("connected", &self.conn.is_some())
            .finish()
    }
}

impl Store {
    /// Asks `SELECT 1` on the probe's connection (opening one if needed)
    /// within `timeout`. On failure the connection is dropped.
    pub async fn probe(&self, probe: &mut Probe, timeout: Duration) -> Result<(), StoreError> {
        if probe.conn.as_ref().is_some_and(|c| c.is_closed()) {
            probe.conn = None;
        }
        let late =
            || StoreError::unavailable("PostgreSQL did not answer the liveness probe in time");
        let result = async {
            if probe.conn.is_none() {
                let open = tokio::time::timeout(self.hosts.round_deadline(), self.connect_direct());
                probe.conn = Some(open.await.map_err(|_| late())??);
            }
            let conn = probe
                .conn
                .as_ref()
                .ok_or_else(|| StoreError::internal("probe connection missing"))?;
            tokio::time::timeout(timeout, conn.simple_query("SELECT 1"))
                .await
                .map_err(|_| late())??;
            Ok::<(), StoreError>(())
        }
        .await;
        if result.is_err() {
            probe.conn = None;
        }
        result
    }

    /// Declares the database lost: in-flight calls are abandoned, their
    /// connections dropped, and calls fail at once until a health check
    /// answers. Returns whether it was up.
    pub fn declare_lost(&self) -> bool {
        self.db.declare_lost()
    }

    /// True while the database is declared lost.
    pub fn is_lost(&self) -> bool {
        self.db.is_lost()
    }
}
