//! The schema of `queen`, brought up to date in one step under one advisory
//! lock, so that several replicas starting together against one empty
//! database all come up:
//!
//! 1. the versioned migrations (`migrations/V{n}__name.sql`, refinery,
//!    history in `queen.schema_history`): tables, columns, indexes, views,
//!    reloptions, and signature changes of functions;
//! 2. the stored functions, one file each under `sql/functions/`, applied
//!    with `CREATE OR REPLACE` when their checksum changed ([`functions`]).
//!
//! Rules for changing the schema:
//! - DDL goes in a new versioned migration. A migration is never edited once
//!   a build that applied it left the developer's machine: refinery refuses
//!   a database whose applied migrations differ from the embedded ones.
//! - A function body changes in its file, nowhere else.
//! - A signature change (arguments added, removed or retyped, another return
//!   type, a function removed) also needs a versioned migration that drops
//!   the old signature (`DROP FUNCTION queen.f(old argument types)`):
//!   `CREATE OR REPLACE` of a new argument list creates a second overload
//!   beside the old one, and a new return type is refused. Whenever a
//!   versioned migration was applied, every function file is applied again
//!   in the same run, so a function that migration dropped comes back at
//!   once.
//!
//! The integration test `schema` proves that an upgrade from the oldest
//! landed schema and a fresh install end identical.

mod foreign;
mod functions;

pub use foreign::is_foreign_schema;
pub(crate) use foreign::refuse_foreign_schema;

use tokio_postgres::Client;

use super::StoreError;

refinery::embed_migrations!("migrations");

/// Key of the session advisory lock that serialises migrations ("queenmig").
const MIGRATION_LOCK_KEY: i64 = 0x7175_6565_6e6d_6967;

/// Where refinery records the applied versioned migrations.
const HISTORY_TABLE: &str = "queen.schema_history";

/// Brings the schema up to date; returns how many versioned migrations it
/// applied. Safe to call from several processes at once.
pub async fn run_migrations(client: &mut Client) -> Result<usize, StoreError> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK_KEY])
        .await?;
    let result = migrate_locked(client).await;
    let unlock = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK_KEY])
        .await;
    let applied = result?;
    unlock?;
    Ok(applied)
}

async fn migrate_locked(client: &mut Client) -> Result<usize, StoreError> {
    foreign::refuse_foreign_schema(client).await?;
    // the history table lives in our schema, which must exist before refinery looks
    client
        .batch_execute("CREATE SCHEMA IF NOT EXISTS queen")
        .await?;
    let report = migrations::runner()
        .set_migration_table_name(HISTORY_TABLE)
        .run_async(client)
        .await
        .map_err(|e| StoreError::other("migration failed", e))?;
    let applied = report.applied_migrations().len();
    let functions = functions::apply(client, applied > 0).await?;
    if applied > 0 || functions > 0 {
        tracing::info!(
            migrations = applied,
            function_files = functions,
            "database schema updated"
        );
    }
    Ok(applied)
}

/// A fingerprint of the embedded schema: changes whenever a versioned
/// migration or a stored function file is added, removed or edited. Test
/// harnesses name their migrated template database after it.
pub fn migrations_fingerprint() -> u64 {
    let migrations = migrations::runner()
        .get_migrations()
        .iter()
        .map(refinery::Migration::checksum)
        .collect::<Vec<_>>();
    migrations
        .into_iter()
        .chain(functions::fingerprints())
        .fold(0xcbf2_9ce4_8422_2325_u64, |acc, sum| {
            (acc ^ sum).wrapping_mul(0x0100_0000_01b3)
        })
}
