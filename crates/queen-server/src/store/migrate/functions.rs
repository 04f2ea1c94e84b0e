//! The stored functions of schema `queen`: one file per function under
//! `sql/functions/`, named after it, embedded in the binary and applied with
//! `CREATE OR REPLACE` after the versioned migrations, in one transaction.
//! `queen.function_history` holds the SHA-256 of each file as applied: an
//! unchanged file is skipped, a changed one applied again. Signature changes
//! need a versioned migration as well (see the parent module).

use std::collections::HashMap;

use sha2::{Digest, Sha256};
use tokio_postgres::Client;

use crate::store::StoreError;

/// One embedded function file.
struct FunctionFile {
    /// The function's name, which is also the file's name without `.sql`.
    name: &'static str,
    sql: &'static str,
}

impl FunctionFile {
    fn digest(&self) -> [u8; 32] {
        Sha256::digest(self.sql.as_bytes()).into()
    }

    fn checksum(&self) -> String {
        hex::encode(self.digest())
    }
}

macro_rules! function_files {
    ($($name:literal),* $(,)?) => {
        &[$(FunctionFile {
            name: $name,
            sql: include_str!(concat!("../../../sql/functions/", $name, ".sql")),
        }),*]
    };
}

/// Every function file, in the order they are created. A file comes after
/// the functions its body calls: PostgreSQL checks a SQL-language body when
/// the function is created (`seek` needs `offset_at_or_before`), while a
/// PL/pgSQL body resolves names only when it runs.
const FUNCTION_FILES: &[FunctionFile] = function_files![
    "offset_before",
    "subscription_start",
    "dead_letter",
    "offset_at_or_before",
    "message_at",
    "oldest_after",
    "message_status",
    "walk_eligible",
    "lease_mint",
    "lease_key",
    "cursor_lock_key",
    "group_policy",
    "retry_wait",
    "claim_partition",
    "pop_queue",
    "push_batch",
    "queue_backlog",
    "push_bounded",
    "ack_batch",
    "extend_lease",
    "delete_queue",
    "delete_message",
    "seek",
    "apply_retention",
    "cleanup_partitions",
    "evict_expired",
    "refresh_planner_stats",
    "record_queue_metrics",
    "fetch_records",
    "ephemeral_settings",
    "ephemeral_expire",
    "ephemeral_reclaim",
    "ephemeral_push",
    "ephemeral_pop",
    "ephemeral_ack",
    "ephemeral_reset",
    "ephemeral_delete",
    "ephemeral_collect",
    "kv_write",
];

/// Applies every file whose checksum differs from the one recorded (all of
/// them with `all`), records the new checksums and forgets files that no
/// longer exist. Returns how many files it applied.
pub(super) async fn apply(client: &mut Client, all: bool) -> Result<usize, StoreError> {
    let tx = client.transaction().await?;
    let recorded: HashMap<String, String> = tx
        .query("SELECT name, checksum FROM queen.function_history", &[])
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let mut applied = 0;
    for file in FUNCTION_FILES {
        let checksum = file.checksum();
        if !all && recorded.get(file.name) == Some(&checksum) {
            continue;
        }
        tx.batch_execute(file.sql).await.map_err(|e| {
            StoreError::internal(format!("apply sql/functions/{}.sql: {e}", file.name))
        })?;
        tx.execute(
            "INSERT INTO queen.function_history (name, checksum) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = now()",
            &[&file.name, &checksum],
        )
        .await?;
        applied += 1;
    }
    let names: Vec<&str> = FUNCTION_FILES.iter().map(|f| f.name).collect();
    tx.execute(
        "DELETE FROM queen.function_history WHERE name <> ALL ($1)",
        &[&names],
    )
    .await?;
    tx.commit().await?;
    Ok(applied)
}

/// One number per file, in creation order, for the schema fingerprint.
pub(super) fn fingerprints() -> impl Iterator<Item = u64> {
    FUNCTION_FILES.iter().map(|f| {
        let d = f.digest();
        u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::FUNCTION_FILES;

    #[test]
    fn every_file_under_sql_functions_is_applied_once() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/sql/functions");
        let on_disk: BTreeSet<String> = std::fs::read_dir(dir)
            .expect("read sql/functions")
            .map(|e| {
                e.expect("directory entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        let listed: Vec<String> = FUNCTION_FILES
            .iter()
            .map(|f| format!("{}.sql", f.name))
            .collect();
        let unique: BTreeSet<String> = listed.iter().cloned().collect();
        assert_eq!(unique.len(), listed.len(), "a file is listed twice");
        assert_eq!(on_disk, unique, "sql/functions and FUNCTION_FILES differ");
    }

    #[test]
    fn every_file_defines_the_function_it_is_named_after() {
        for file in FUNCTION_FILES {
            let create = format!("CREATE OR REPLACE FUNCTION queen.{}(", file.name);
            assert_eq!(
                file.sql.matches("CREATE OR REPLACE FUNCTION").count(),
                1,
                "{}.sql must define exactly one function",
                file.name
            );
            assert!(
                file.sql.contains(&create),
                "{}.sql must define queen.{}",
                file.name,
                file.name
            );
        }
    }
}
