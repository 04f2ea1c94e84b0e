//! Embedded, forward-only migrations, applied under an advisory lock so that
//! several replicas starting together against one empty database all come up.

use tokio_postgres::Client;

use super::StoreError;

refinery::embed_migrations!("migrations");

/// Key of the session advisory lock that serialises migrations ("queenmig").
const MIGRATION_LOCK_KEY: i64 = 0x7175_6565_6e6d_6967;

/// Applies every pending migration. Safe to call from several processes at once.
pub async fn run_migrations(client: &mut Client) -> Result<usize, StoreError> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK_KEY])
        .await?;
    // the history table lives in our schema, which must exist before refinery looks
    client
        .batch_execute("CREATE SCHEMA IF NOT EXISTS queen")
        .await?;
    let result = migrations::runner()
        .set_migration_table_name("queen.schema_history")
        .run_async(client)
        .await;
    let unlock = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK_KEY])
        .await;
    let report = result.map_err(|e| StoreError::other("migration failed", e))?;
    unlock?;
    Ok(report.applied_migrations().len())
}

/// A fingerprint of the embedded migrations: changes whenever one is added or edited.
/// Test harnesses name their migrated template database after it.
pub fn migrations_fingerprint() -> u64 {
    migrations::runner()
        .get_migrations()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |acc, m| {
            (acc ^ m.checksum()).wrapping_mul(0x0100_0000_01b3)
        })
}
