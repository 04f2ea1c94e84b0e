//! Maintenance modes: switched through the API, persisted in PostgreSQL,
//! cached per replica, spread by hints and re-read by the reconcile job.
//!
//! The cached flag is what the replica applies (the effective state). Next to
//! it each mode keeps what set it (`database`, `api`, `mesh` with the sending
//! peer) and the stored value last read, so the routes can report a flag a
//! mesh frame set that PostgreSQL does not hold. The reconcile job re-applies
//! the stored value every `QUEEN_RECONCILE_INTERVAL_MS`.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use queen_proto::mesh::{Frame, MaintenanceKind, MaintenanceModeSet};
use queen_proto::status::{MaintenanceModeState, MaintenanceModes};

use super::Broker;
use crate::store::StoreError;

/// What set a flag's applied value.
#[derive(Debug, Clone, Default)]
struct Origin {
    source: &'static str,
    from: Option<String>,
    at: Option<DateTime<Utc>>,
    /// The value PostgreSQL held when last read; `None`: not read yet.
    stored: Option<bool>,
}

/// The origins of both flags.
#[derive(Debug, Default)]
pub struct Origins {
    push: Mutex<Origin>,
    pop: Mutex<Origin>,
}

impl Origins {
    fn of(&self, kind: MaintenanceKind) -> std::sync::MutexGuard<'_, Origin> {
        match kind {
            MaintenanceKind::Push => &self.push,
            MaintenanceKind::Pop => &self.pop,
        }
        .lock()
        .unwrap_or_else(|e| e.into_inner())
    }
}

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
        self.apply_maintenance(kind, enabled, "api", None);
        self.flags.origins.of(kind).stored = Some(enabled);
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

    /// A peer's MAINTENANCE_MODE_SET frame: applied like a local switch, its
    /// sender remembered.
    pub(super) fn apply_mesh_maintenance(&self, kind: MaintenanceKind, enabled: bool, from: &str) {
        self.apply_maintenance(kind, enabled, "mesh", Some(from));
    }

    /// Applies a maintenance flag to this replica's cache; a change records
    /// its source (an unchanged value keeps the source that set it).
    fn apply_maintenance(
        &self,
        kind: MaintenanceKind,
        enabled: bool,
        source: &'static str,
        from: Option<&str>,
    ) {
        let flag = match kind {
            MaintenanceKind::Push => &self.flags.push_maintenance,
            MaintenanceKind::Pop => &self.flags.pop_maintenance,
        };
        let mut origin = self.flags.origins.of(kind);
        let changed = flag.swap(enabled, Ordering::Relaxed) != enabled;
        if changed || origin.at.is_none() || source == "api" {
            origin.source = source;
            origin.from = from.map(str::to_owned);
            origin.at = Some(Utc::now());
        }
        drop(origin);
        if changed {
            tracing::info!(
                mode = mode_name(kind),
                enabled,
                source,
                from = from.unwrap_or("-"),
                "maintenance mode changed"
            );
        }
    }

    /// Re-reads persisted state that other replicas may have changed and
    /// applies it (the reconcile job: PostgreSQL wins, a mesh-set flag it does
    /// not hold ends here).
    pub async fn reconcile(&self) -> Result<(), StoreError> {
        for kind in [MaintenanceKind::Push, MaintenanceKind::Pop] {
            let enabled = self.store.maintenance(kind).await?;
            self.flags.origins.of(kind).stored = Some(enabled);
            self.apply_maintenance(kind, enabled, "database", None);
        }
        Ok(())
    }

    /// Re-reads the stored flags for the maintenance routes: a stored value
    /// that changed since it was last read (a switch on another replica) is
    /// applied; an unchanged one leaves the applied value, so a flag a mesh
    /// frame set stays visible as such until the reconcile job.
    pub async fn refresh_stored_maintenance(&self) -> Result<(), StoreError> {
        for kind in [MaintenanceKind::Push, MaintenanceKind::Pop] {
            let enabled = self.store.maintenance(kind).await?;
            let (before, mesh_set) = {
                let mut o = self.flags.origins.of(kind);
                (o.stored.replace(enabled), o.source == "mesh")
            };
            // first read: apply unless a peer's frame set the flag meanwhile
            if before.map_or(!mesh_set, |b| b != enabled) {
                self.apply_maintenance(kind, enabled, "database", None);
            }
        }
        Ok(())
    }

    /// Both modes as this replica applies them, with what set them.
    pub fn maintenance_modes(&self) -> MaintenanceModes {
        let state = |kind| {
            let o = self.flags.origins.of(kind).clone();
            MaintenanceModeState {
                enabled: self.maintenance(kind),
                stored: o.stored,
                source: if o.at.is_none() { "default" } else { o.source },
                from: o.from,
                since: o.at.map(queen_proto::time::format_millis),
            }
        };
        MaintenanceModes {
            push: state(MaintenanceKind::Push),
            pop: state(MaintenanceKind::Pop),
        }
    }
}
