//! Maintenance modes: switched through the API, persisted in PostgreSQL,
//! cached per replica, spread by hints and re-read by the reconcile job.

use std::sync::atomic::Ordering;

use queen_proto::mesh::{Frame, MaintenanceKind, MaintenanceModeSet};

use super::Broker;
use crate::store::StoreError;

fn mode_name(kind: MaintenanceKind) -> &'static str {
    match kind {
        MaintenanceKind::Push => "push",
        MaintenanceKind::Pop => "pop",
    }
}

impl Broker {
    /// Sets a maintenance flag in PostgreSQL and in this replica's cache, and
    /// tells the peers.
    pub async fn set_maintenance(
        &self,
        kind: MaintenanceKind,
        enabled: bool,
    ) -> Result<(), StoreError> {
        self.store.set_maintenance(kind, enabled).await?;
        self.apply_maintenance(kind, enabled);
        self.announce_maintenance(kind, enabled);
        if kind == MaintenanceKind::Push && !enabled {
            // replay what maintenance mode spooled, now rather than at the next tick
            self.spool.kick.notify_one();
        }
        Ok(())
    }

    fn announce_maintenance(&self, kind: MaintenanceKind, enabled: bool) {
        if let Some(mesh) = &self.mesh {
            mesh.send(&Frame::MaintenanceModeSet(MaintenanceModeSet {
                mode: kind,
                enabled,
            }));
        }
    }

    /// Whether a maintenance mode is on, as this replica knows it.
    pub fn maintenance(&self, kind: MaintenanceKind) -> bool {
        match kind {
            MaintenanceKind::Push => self.flags.push_maintenance(),
            MaintenanceKind::Pop => self.flags.pop_maintenance(),
        }
    }

    /// Applies a maintenance flag to this replica's cache (hint or reconcile).
    pub(super) fn apply_maintenance(&self, kind: MaintenanceKind, enabled: bool) {
        let flag = match kind {
            MaintenanceKind::Push => &self.flags.push_maintenance,
            MaintenanceKind::Pop => &self.flags.pop_maintenance,
        };
        if flag.swap(enabled, Ordering::Relaxed) != enabled {
            tracing::info!(mode = mode_name(kind), enabled, "maintenance mode changed");
        }
    }

    /// Re-reads persisted state that other replicas may have changed.
    pub async fn reconcile(&self) -> Result<(), StoreError> {
        for kind in [MaintenanceKind::Push, MaintenanceKind::Pop] {
            let enabled = self.store.maintenance(kind).await?;
            self.apply_maintenance(kind, enabled);
        }
        Ok(())
    }
}
