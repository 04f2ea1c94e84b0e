//! The schema of `queen`, brought up to date in one step under one advisory
//! lock, so that several replicas starting together against one empty
//! database all come up:
//!
//! 1. a database still carrying the development history from before the
//!    baseline has that history rewritten to the baseline (below);
//! 2. the versioned migrations (`migrations/V{n}__name.sql`, refinery,
//!    history in `queen.schema_history`): tables, columns, indexes, views,
//!    reloptions, and signature changes of functions;
//! 3. the stored functions, one file each under `sql/functions/`, applied
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
//! The baseline (`V1__baseline.sql`) replaced the development history
//! `V1__schema` .. `V10__ack_match_by_rank` (nothing had been released). A
//! database with exactly that history holds the baseline's tables, indexes
//! and views already; its history rows are replaced by one row for the
//! baseline, and `V2__function_history` then drops the functions that
//! history created, overloads included, so the files recreate the current
//! set. The integration test `schema` proves that such an upgrade and a
//! fresh install end identical.

mod foreign;
mod functions;

pub use foreign::is_foreign_schema;
pub(crate) use foreign::refuse_foreign_schema;

use chrono::{SecondsFormat, Utc};
use tokio_postgres::Client;

use super::StoreError;

refinery::embed_migrations!("migrations");

/// Key of the session advisory lock that serialises migrations ("queenmig").
const MIGRATION_LOCK_KEY: i64 = 0x7175_6565_6e6d_6967;

/// Where refinery records the applied versioned migrations.
const HISTORY_TABLE: &str = "queen.schema_history";

/// The development history before the baseline as refinery recorded it in
/// [`HISTORY_TABLE`]: version, name and checksum of each migration.
const PRE_BASELINE_HISTORY: [(i32, &str, u64); 10] = [
    (1, "schema", 10_147_438_886_126_829_799),
    (2, "functions", 12_028_168_625_257_160_167),
    (3, "admin", 14_923_048_388_537_189_058),
    (4, "jobs", 16_145_049_632_551_585_458),
    (5, "lookup_paths", 3_381_967_599_606_951_873),
    (6, "pop_hints", 2_554_685_480_230_400_090),
    (7, "planner_stats", 4_832_965_628_673_633_672),
    (8, "set_based_paths", 16_149_440_570_029_214_282),
    (9, "fewer_wasted_claims", 15_477_036_714_669_063_812),
    (10, "ack_match_by_rank", 14_114_900_562_603_916_866),
];

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
    adopt_pre_baseline_history(client).await?;
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

/// Rewrites a history of exactly [`PRE_BASELINE_HISTORY`] to the baseline, in
/// one transaction; refuses any other history that starts with it.
async fn adopt_pre_baseline_history(client: &mut Client) -> Result<(), StoreError> {
    let exists: bool = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&HISTORY_TABLE])
        .await?
        .get(0);
    if !exists {
        return Ok(());
    }
    let history: Vec<(i32, String, String)> = client
        .query(
            &format!("SELECT version, name, checksum FROM {HISTORY_TABLE} ORDER BY version"),
            &[],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let Some(first) = history.first() else {
        return Ok(());
    };
    let (pre_version, pre_name, _) = PRE_BASELINE_HISTORY[0];
    if first.0 != pre_version || first.1 != pre_name {
        return Ok(());
    }
    let complete = history.len() == PRE_BASELINE_HISTORY.len()
        && history
            .iter()
            .zip(PRE_BASELINE_HISTORY)
            .all(|((v, n, c), (pv, pn, pc))| *v == pv && n == pn && *c == pc.to_string());
    if !complete {
        let (version, name, _) = history.last().unwrap_or(first);
        return Err(StoreError::internal(format!(
            "database schema was migrated by a development build from before the schema \
             baseline and stops at V{version}__{name}; only the complete history up to \
             V10__ack_match_by_rank can be upgraded: migrate it with that build first, \
             or recreate the database"
        )));
    }
    let baseline = migrations::runner()
        .get_migrations()
        .iter()
        .find(|m| m.version() == 1)
        .cloned()
        .ok_or_else(|| StoreError::internal("the baseline migration V1 is missing"))?;
    let applied_on = Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true);
    let tx = client.transaction().await?;
    tx.execute(&format!("DELETE FROM {HISTORY_TABLE}"), &[])
        .await?;
    tx.execute(
        &format!(
            "INSERT INTO {HISTORY_TABLE} (version, name, applied_on, checksum) \
             VALUES ($1, $2, $3, $4)"
        ),
        &[
            &baseline.version(),
            &baseline.name(),
            &applied_on,
            &baseline.checksum().to_string(),
        ],
    )
    .await?;
    tx.commit().await?;
    tracing::info!("schema history from before the baseline rewritten to the baseline");
    Ok(())
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
