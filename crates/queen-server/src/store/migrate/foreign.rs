//! A schema `queen` that something else created (the reference broker, an
//! unrelated application) is refused before anything is written into it.

use tokio_postgres::Client;

use super::HISTORY_TABLE;
use crate::store::StoreError;

/// How the refusal starts, so callers can tell it from an outage.
pub(crate) const FOREIGN_SCHEMA: &str =
    "schema `queen` in this database was not created by this broker";

/// Refuses a schema `queen` that holds objects but no migration history of ours.
pub(crate) async fn refuse_foreign_schema(client: &Client) -> Result<(), StoreError> {
    let row = client
        .query_one(
            "SELECT current_database() AS db,
                    to_regclass($1) IS NOT NULL AS ours,
                    (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                      WHERE n.nspname = 'queen' AND c.relkind IN ('r', 'p', 'v', 'm')) AS relations,
                    (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                      WHERE n.nspname = 'queen') AS functions,
                    (SELECT string_agg(relname, ', ' ORDER BY relname) FROM (
                       SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                        WHERE n.nspname = 'queen' AND c.relkind IN ('r', 'p')
                        ORDER BY c.relname LIMIT 5) t) AS sample",
            &[&HISTORY_TABLE],
        )
        .await?;
    let ours: bool = row.try_get("ours")?;
    let relations: i64 = row.try_get("relations")?;
    let functions: i64 = row.try_get("functions")?;
    if ours || (relations == 0 && functions == 0) {
        return Ok(());
    }
    let db: String = row.try_get("db")?;
    let sample: Option<String> = row.try_get("sample")?;
    Err(StoreError::internal(format!(
        "{FOREIGN_SCHEMA}: database {db:?} holds {relations} tables or views and {functions} functions \
         in schema queen ({}) but no {HISTORY_TABLE}, perhaps the reference Queen broker's; nothing was \
         written. Point this broker at another database (PG_DB, or the path of DATABASE_URL), or drop \
         that schema if it is disposable",
        sample.unwrap_or_else(|| "no tables".to_owned())
    )))
}

/// True for the refusal of `refuse_foreign_schema`.
pub fn is_foreign_schema(e: &StoreError) -> bool {
    e.to_string().contains(FOREIGN_SCHEMA)
}
