//! The reference database of the import tests: the layout written from the
//! sheet (`reference/schema.sql`), filled the way the reference does
//! (`reference/fill.sql`), and the target's content as plain rows to compare.

use std::collections::HashMap;

use queen_server::config::Config;
use queen_server::import::report::Report;
use queen_server::import::ImportOptions;
use queen_testkit::{base_env, TestDb};

pub const SCHEMA: &str = include_str!("../reference/schema.sql");
pub const FILL: &str = include_str!("../reference/fill.sql");
/// The key the fixture's envelopes were sealed with (bytes 00..1f).
pub const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

/// The fixture's SQL with schemas `queen` / `queen_streams` renamed to
/// `<prefix>queen` / `<prefix>queen_streams`.
pub fn renamed(sql: &str, prefix: &str) -> String {
    if prefix.is_empty() {
        return sql.to_owned();
    }
    sql.replace("queen_streams", "\u{1}")
        .replace("queen.", &format!("{prefix}queen."))
        .replace("EXISTS queen;", &format!("EXISTS {prefix}queen;"))
        .replace('\u{1}', &format!("{prefix}queen_streams"))
}

/// A database holding the reference's layout and the fixture's rows.
pub async fn reference() -> TestDb {
    let db = TestDb::empty().await.unwrap();
    let c = db.client().await.unwrap();
    c.batch_execute(SCHEMA).await.unwrap();
    c.batch_execute(FILL).await.unwrap();
    db
}

/// The URL of `db` as `user`.
pub fn url_as(db: &TestDb, user: &str) -> String {
    format!("postgres://{user}@{}:{}/{}", db.host, db.port, db.name)
}

pub fn url(db: &TestDb) -> String {
    url_as(db, &db.user)
}

/// The broker configuration of `target`, with `extra` variables.
pub fn config(target: &TestDb, extra: &[(&str, &str)]) -> Config {
    let mut env: HashMap<String, String> = base_env(target);
    for (k, v) in extra {
        env.insert((*k).to_owned(), (*v).to_owned());
    }
    Config::from_env(&env).unwrap()
}

/// Imports `source_url` (schema `schema`) into `target` with `key` (if any).
pub async fn import(
    target: &TestDb,
    source_url: &str,
    schema: &str,
    key: Option<&str>,
    dry_run: bool,
) -> anyhow::Result<Report> {
    let extra: Vec<(&str, &str)> = key
        .map(|k| ("QUEEN_ENCRYPTION_KEY", k))
        .into_iter()
        .collect();
    let opts = ImportOptions {
        from: source_url.to_owned(),
        schema: schema.to_owned(),
        dry_run,
        quiet: true,
        jobs: 2,
        overlap: std::time::Duration::from_secs(10),
        page: 3,
    };
    queen_server::import::run(&config(target, &extra), &opts).await
}

/// What the target holds, by names and offsets (no generated ids, no row
/// versions): equal for two databases that hold the same import.
pub async fn content(db: &TestDb) -> Vec<String> {
    let c = db.client().await.unwrap();
    let queries = [
        "SELECT 'queue ' || name || ' ' || namespace || '/' || task || ' ' || lease_time || ' '
                || retry_limit || ' ' || retry_delay || ' ' || max_size || ' ' || ttl || ' ' || priority
                || ' ' || dead_letter_queue || ' ' || dlq_after_max_retries || ' ' || retention_enabled
                || ' ' || retention_seconds || ' ' || completed_retention_seconds || ' '
                || encryption_enabled || ' ' || created_at FROM queen.queues",
        "SELECT 'partition ' || q.name || '/' || p.name || ' ' || p.next_offset || ' ' || p.low_offset
                || ' ' || coalesce(p.last_created_at::text, '-') || ' ' || p.created_at
         FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id",
        "SELECT 'segment ' || q.name || '/' || p.name || ' ' || s.first_offset || '-' || s.last_offset
                || ' ' || s.created_at || ' ' || s.message_ids::text || s.transaction_ids::text
                || s.trace_ids::text || s.payloads::text || coalesce(s.producer_subs::text, '-')
         FROM queen.segments s JOIN queen.partitions p ON p.id = s.partition_id
         JOIN queen.queues q ON q.id = p.queue_id",
        "SELECT 'key ' || q.name || '/' || p.name || ' ' || k.transaction_id || ' ' || k.msg_offset
                || ' ' || k.message_id
         FROM queen.message_keys k JOIN queen.partitions p ON p.id = k.partition_id
         JOIN queen.queues q ON q.id = p.queue_id",
        "SELECT 'cursor ' || q.name || '/' || p.name || ' ' || lc.consumer_group || ' '
                || lc.committed_offset || ' ' || lc.retry_count || ' ' || lc.total_consumed || ' '
                || coalesce(lc.lease_id::text, 'no lease') || ' ' || coalesce(lc.last_consumed_at::text, '-')
         FROM queen.log_consumers lc JOIN queen.partitions p ON p.id = lc.partition_id
         JOIN queen.queues q ON q.id = p.queue_id",
        "SELECT 'subscription ' || consumer_group || ' ' || queue_name || '/' || partition_name || ' '
                || subscription_mode || ' ' || subscription_timestamp FROM queen.consumer_subscriptions",
        "SELECT 'dead ' || q.name || '/' || p.name || ' ' || d.consumer_group || ' ' || d.msg_offset || ' '
                || d.transaction_id || ' ' || d.payload || ' ' || coalesce(d.error_message, '-') || ' '
                || d.retry_count || ' ' || d.original_created_at || ' ' || d.failed_at
         FROM queen.dead_letters d JOIN queen.partitions p ON p.id = d.partition_id
         JOIN queen.queues q ON q.id = p.queue_id",
        "SELECT 'trace ' || t.id || ' ' || q.name || '/' || p.name || ' ' || t.transaction_id || ' '
                || t.consumer_group || ' ' || t.event_type || ' ' || t.data::text || ' '
                || t.trace_names::text || ' ' || t.created_at
         FROM queen.message_traces t JOIN queen.partitions p ON p.id = t.partition_id
         JOIN queen.queues q ON q.id = p.queue_id",
        "SELECT 'progress ' || ip.source_partition_id || ' ' || q.name || '/' || p.name || ' '
                || coalesce(ip.last_created_at::text, '-') || ' '
                || coalesce(ip.last_message_id::text, '-') || ' ' || ip.messages
         FROM queen.import_progress ip JOIN queen.partitions p ON p.id = ip.partition_id
         JOIN queen.queues q ON q.id = p.queue_id",
        "SELECT 'flag ' || key || ' ' || value::text FROM queen.system_state",
    ];
    let mut out = Vec::new();
    for q in queries {
        for row in c.query(q, &[]).await.unwrap() {
            out.push(row.get::<_, String>(0));
        }
    }
    out.sort();
    out
}

/// Row versions of the tables an import writes: unchanged by a run that
/// writes nothing.
pub async fn row_versions(db: &TestDb) -> Vec<String> {
    let c = db.client().await.unwrap();
    let mut out = Vec::new();
    for table in [
        "queues",
        "partitions",
        "segments",
        "message_keys",
        "log_consumers",
        "consumer_subscriptions",
        "dead_letters",
        "message_traces",
        "import_progress",
        "system_state",
    ] {
        let sql = format!(
            "SELECT '{table} ' || coalesce(string_agg(ctid::text || ':' || xmin::text, ',' ORDER BY ctid), '')
             FROM queen.{table}"
        );
        out.push(c.query_one(&sql, &[]).await.unwrap().get::<_, String>(0));
    }
    out
}
