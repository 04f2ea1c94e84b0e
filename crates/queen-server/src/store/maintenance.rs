//! Maintenance flags: cluster-wide switches kept in `queen.system_state`
//! (`{"enabled": bool}` under the reference's key names).

use queen_proto::mesh::MaintenanceKind;

use super::op::{with_op, DbOp};
use super::{col, Store, StoreError};

/// The `queen.system_state` key of a maintenance mode (the reference's names).
fn flag_key(kind: MaintenanceKind) -> &'static str {
    match kind {
        MaintenanceKind::Push => "maintenance_mode",
        MaintenanceKind::Pop => "pop_maintenance_mode",
    }
}

impl Store {
    /// Reads whether a maintenance mode is on (off when never set).
    pub async fn maintenance(&self, kind: MaintenanceKind) -> Result<bool, StoreError> {
        with_op!(self.db, DbOp::Flags, |client| {
            let row = client
                .query_opt(
                    "SELECT coalesce((value->>'enabled')::boolean, false) AS enabled
                         FROM queen.system_state WHERE key = $1",
                    &[&flag_key(kind)],
                )
                .await?;
            row.map_or(Ok(false), |r| col(&r, "enabled"))
        })
    }

    /// Switches a maintenance mode.
    pub async fn set_maintenance(
        &self,
        kind: MaintenanceKind,
        enabled: bool,
    ) -> Result<(), StoreError> {
        with_op!(self.db, DbOp::Flags, |client| {
            client
                    .execute(
                        "INSERT INTO queen.system_state (key, value, updated_at)
                         VALUES ($1, jsonb_build_object('enabled', $2::boolean), now())
                         ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
                        &[&flag_key(kind), &enabled],
                    )
                    .await?;
            Ok(())
        })
    }
}
