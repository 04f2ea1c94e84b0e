//! The schema runner: a fresh install and an upgrade from the oldest schema
//! of the landed history end identical, stored function files are skipped
//! when unchanged and applied again when changed, and a history the runner
//! does not know is refused without touching the database.

use std::collections::BTreeSet;

use queen_server::store::run_migrations;
use queen_testkit::TestDb;

use crate::common::texts;
use tokio_postgres::Client;

/// The broker's own versioned migrations, embedded once more so a test can
/// stop them at an earlier version (the broker always runs all of them).
mod landed {
    refinery::embed_migrations!("migrations");
}

/// Migrates `client`'s database with the versioned migrations up to
/// `version` only, and no stored function: the state a database is in between
/// an older build's migrations and this build's.
async fn migrate_up_to(client: &mut Client, version: i32) {
    client
        .batch_execute("CREATE SCHEMA IF NOT EXISTS queen")
        .await
        .unwrap();
    landed::migrations::runner()
        .set_target(refinery::Target::Version(version))
        .set_migration_table_name("queen.schema_history")
        .run_async(client)
        .await
        .unwrap();
}

/// Everything PostgreSQL knows about schema `queen`, one line per fact, with
/// no oids and nothing that depends on when or in which order objects were
/// created: function definitions, relations with their kind and options,
/// columns (type, default, nullability, storage), indexes, constraints,
/// views, sequences, triggers, types and comments; and the two history
/// tables of the runner.
async fn catalog(client: &Client) -> BTreeSet<String> {
    let queries: [(&str, &str); 14] = [
        (
            "function",
            "SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid)
             FROM pg_proc p WHERE p.pronamespace = 'queen'::regnamespace",
        ),
        (
            "relation",
            "SELECT c.relname, concat_ws(' ', c.relkind, c.relpersistence, c.relreplident,
                                         coalesce(array_to_string(c.reloptions, ','), '-'))
             FROM pg_class c WHERE c.relnamespace = 'queen'::regnamespace",
        ),
        (
            "column",
            "SELECT c.relname || '.' || a.attname,
                    concat_ws(' ', a.attnum, format_type(a.atttypid, a.atttypmod),
                              CASE WHEN a.attnotnull THEN 'not null' ELSE 'null' END,
                              'default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-'),
                              'storage=' || a.attstorage::text,
                              'compression=' || a.attcompression::text,
                              'identity=' || a.attidentity::text, 'generated=' || a.attgenerated::text,
                              'collation=' || a.attcollation::regcollation::text)
             FROM pg_attribute a
             JOIN pg_class c ON c.oid = a.attrelid
             LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
             WHERE c.relnamespace = 'queen'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped",
        ),
        (
            "index",
            "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
             FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
             WHERE c.relnamespace = 'queen'::regnamespace",
        ),
        (
            "constraint",
            "SELECT con.conrelid::regclass::text || ' ' || con.conname, pg_get_constraintdef(con.oid)
             FROM pg_constraint con WHERE con.connamespace = 'queen'::regnamespace",
        ),
        (
            "view",
            "SELECT v.viewname::text, v.definition FROM pg_views v WHERE v.schemaname = 'queen'",
        ),
        (
            "sequence",
            "SELECT s.sequencename::text,
                    concat_ws(' ', s.data_type, s.start_value, s.min_value, s.max_value,
                              s.increment_by, s.cycle, s.cache_size)
             FROM pg_sequences s WHERE s.schemaname = 'queen'",
        ),
        (
            "sequence owner",
            "SELECT s.relname::text, d.refobjid::regclass::text || '.' || d.refobjsubid
             FROM pg_depend d JOIN pg_class s ON s.oid = d.objid
             WHERE s.relkind = 'S' AND s.relnamespace = 'queen'::regnamespace
               AND d.deptype IN ('a', 'i') AND d.refclassid = 'pg_class'::regclass",
        ),
        (
            "trigger",
            "SELECT t.tgrelid::regclass::text || ' ' || t.tgname, pg_get_triggerdef(t.oid)
             FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
             WHERE c.relnamespace = 'queen'::regnamespace AND NOT t.tgisinternal",
        ),
        (
            "type",
            "SELECT t.typname::text, t.typtype::text
             FROM pg_type t WHERE t.typnamespace = 'queen'::regnamespace",
        ),
        (
            "comment",
            "SELECT pg_describe_object(d.classoid, d.objoid, d.objsubid), d.description
             FROM pg_description d
             WHERE (pg_identify_object(d.classoid, d.objoid, d.objsubid)).schema = 'queen'",
        ),
        (
            "statistics target",
            "SELECT c.relname || '.' || a.attname, a.attstattarget::text
             FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
             WHERE c.relnamespace = 'queen'::regnamespace AND a.attnum > 0
               AND coalesce(a.attstattarget, -1) <> -1",
        ),
        (
            "schema history",
            "SELECT h.version::text, h.name || ' ' || h.checksum FROM queen.schema_history h",
        ),
        (
            "function history",
            "SELECT f.name, f.checksum FROM queen.function_history f",
        ),
    ];
    let mut facts = BTreeSet::new();
    for (kind, sql) in queries {
        for row in client.query(sql, &[]).await.unwrap() {
            let name: String = row.get(0);
            let value: String = row.get(1);
            facts.insert(format!("{kind} {name}: {value}"));
        }
    }
    facts
}

/// Fails with the facts only one side has when two catalogs differ.
#[track_caller]
fn assert_same_catalog(fresh: &BTreeSet<String>, upgraded: &BTreeSet<String>) {
    let only = |a: &BTreeSet<String>, b: &BTreeSet<String>| {
        a.difference(b).cloned().collect::<Vec<_>>().join("\n")
    };
    assert!(
        fresh == upgraded,
        "the schemas differ\n--- only after a fresh install:\n{}\n--- only after the upgrade:\n{}",
        only(fresh, upgraded),
        only(upgraded, fresh)
    );
}

/// Names of the stored function files under `sql/functions/`.
fn function_files() -> BTreeSet<String> {
    std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/sql/functions"))
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".sql").unwrap().to_owned()
        })
        .collect()
}

/// (name, checksum, applied_at) of every row of `queen.function_history`.
async fn function_history(client: &Client) -> BTreeSet<(String, String, String)> {
    client
        .query(
            "SELECT name, checksum, applied_at::text FROM queen.function_history",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// The text of `sql/functions/<name>.sql` with a comment line added to the
/// function's body: the same function, defined differently.
fn edited_function_file(name: &str, note: &str) -> String {
    let path = format!("{}/sql/functions/{name}.sql", env!("CARGO_MANIFEST_DIR"));
    let file = std::fs::read_to_string(path).unwrap();
    let edited = file.replacen(" AS $$\n", &format!(" AS $$\n    -- {note}\n"), 1);
    assert_ne!(edited, file, "{name}.sql has no body opening with `AS $$`");
    edited
}

async fn function_def(client: &Client, name: &str) -> String {
    client
        .query_one(
            "SELECT pg_get_functiondef(p.oid) FROM pg_proc p
             WHERE p.pronamespace = 'queen'::regnamespace AND p.proname = $1",
            &[&name],
        )
        .await
        .unwrap()
        .get(0)
}

/// Number of versioned migrations the broker embeds (`migrations/V*.sql`).
fn versioned_migrations() -> usize {
    std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().starts_with('V'))
        })
        .count()
}

/// Queue `queue` with partition `p` holding one segment of messages with
/// `txns` (payload `{}`, offsets from 1) and their keys, written as rows
/// (the columns every schema version since V1 has).
async fn store_segment(client: &Client, queue: &str, txns: &[&str]) {
    let n = i64::try_from(txns.len()).unwrap();
    let txns: Vec<String> = txns.iter().map(|t| (*t).to_owned()).collect();
    client
        .execute(
            "WITH q AS (INSERT INTO queen.queues (id, name) VALUES (gen_random_uuid(), $1) RETURNING id),
                  p AS (INSERT INTO queen.partitions (id, queue_id, name, next_offset, last_created_at)
                        SELECT gen_random_uuid(), q.id, 'p', $2::bigint + 1, now() FROM q RETURNING id),
                  m AS (SELECT t.txn, t.k, gen_random_uuid() AS mid
                        FROM unnest($3::text[]) WITH ORDINALITY AS t(txn, k)),
                  s AS (INSERT INTO queen.segments (partition_id, last_offset, first_offset, created_at,
                                                    message_ids, transaction_ids, trace_ids, payloads)
                        SELECT p.id, $2::bigint, 1, now(), (SELECT array_agg(mid ORDER BY k) FROM m), $3,
                               array_fill(NULL::uuid, ARRAY[$2::integer]),
                               array_fill('{}'::text, ARRAY[$2::integer])
                        FROM p)
             INSERT INTO queen.message_keys (partition_id, transaction_id, msg_offset, message_id)
             SELECT p.id, m.txn, m.k, m.mid FROM p, m",
            &[&queue, &n, &txns],
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_install_and_an_upgrade_from_the_oldest_landed_schema_end_identical() {
    let fresh = TestDb::empty().await.unwrap();
    let mut fresh_client = fresh.client().await.unwrap();
    assert_eq!(
        run_migrations(&mut fresh_client).await.unwrap(),
        versioned_migrations()
    );

    let old = TestDb::empty().await.unwrap();
    let mut old_client = old.client().await.unwrap();
    migrate_up_to(&mut old_client, 2).await;
    // a message stored before the upgrade, to be popped through the new functions
    store_segment(&old_client, "kept", &["before-upgrade"]).await;
    assert_eq!(
        run_migrations(&mut old_client).await.unwrap(),
        versioned_migrations() - 2
    );

    assert_same_catalog(&catalog(&fresh_client).await, &catalog(&old_client).await);

    let popped: Vec<String> = texts(
        &old_client,
        "SELECT m.transaction_id FROM queen.queues q,
                queen.pop_queue(q.id, q.name, 'g', 10, 1, gen_random_uuid(), 60, false, 0, 0,
                                'all', NULL, 'test', '{}', true, true) m
         WHERE q.name = 'kept'",
    )
    .await;
    assert_eq!(popped, vec!["before-upgrade".to_owned()]);

    // once up to date, running again changes nothing
    let before = catalog(&old_client).await;
    assert_eq!(run_migrations(&mut old_client).await.unwrap(), 0);
    assert_same_catalog(&before, &catalog(&old_client).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_holds_exactly_one_function_per_file() {
    let db = TestDb::new().await.unwrap();
    let client = db.client().await.unwrap();
    let rows = client
        .query(
            "SELECT p.proname::text, count(*) FROM pg_proc p
             WHERE p.pronamespace = 'queen'::regnamespace GROUP BY p.proname",
            &[],
        )
        .await
        .unwrap();
    let mut names = BTreeSet::new();
    for row in rows {
        let name: String = row.get(0);
        let overloads: i64 = row.get(1);
        assert_eq!(overloads, 1, "queen.{name} has {overloads} overloads");
        names.insert(name);
    }
    assert_eq!(names, function_files());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_files_are_skipped_when_unchanged_and_applied_again_when_changed() {
    let db = TestDb::new().await.unwrap();
    let mut client = db.client().await.unwrap();
    let push_batch = function_def(&client, "push_batch").await;
    let recorded = function_history(&client).await;
    assert_eq!(
        recorded
            .iter()
            .map(|(n, _, _)| n.clone())
            .collect::<BTreeSet<_>>(),
        function_files()
    );

    // push_batch as an older file left it; seek edited by hand, its file unchanged
    client
        .batch_execute(&edited_function_file(
            "push_batch",
            "as an older file had it",
        ))
        .await
        .unwrap();
    client
        .execute(
            "UPDATE queen.function_history SET checksum = 'of an older file'
             WHERE name = 'push_batch'",
            &[],
        )
        .await
        .unwrap();
    assert_ne!(function_def(&client, "push_batch").await, push_batch);
    client
        .batch_execute(&edited_function_file("seek", "edited by hand"))
        .await
        .unwrap();
    let seek_by_hand = function_def(&client, "seek").await;

    assert_eq!(run_migrations(&mut client).await.unwrap(), 0);
    assert_eq!(function_def(&client, "push_batch").await, push_batch);
    assert_eq!(
        function_def(&client, "seek").await,
        seek_by_hand,
        "an unchanged file is not applied again"
    );
    let now = function_history(&client).await;
    let changed: Vec<&String> = now.difference(&recorded).map(|(name, _, _)| name).collect();
    assert_eq!(changed, vec!["push_batch"]);
    let checksum = |set: &BTreeSet<(String, String, String)>| {
        set.iter()
            .find(|(n, _, _)| n == "push_batch")
            .map(|(_, c, _)| c.clone())
    };
    assert_eq!(checksum(&now), checksum(&recorded));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_the_runner_does_not_know_is_refused_and_left_alone() {
    let db = TestDb::empty().await.unwrap();
    let mut client = db.client().await.unwrap();
    migrate_up_to(&mut client, 2).await;
    // a V1 applied from a different text than this build embeds
    client
        .execute(
            "UPDATE queen.schema_history SET name = 'schema', checksum = '1' WHERE version = 1",
            &[],
        )
        .await
        .unwrap();
    let before = untouched_catalog(&client).await;

    let err = run_migrations(&mut client).await.unwrap_err().to_string();
    assert!(err.contains("migration failed"), "{err}");
    assert_eq!(untouched_catalog(&client).await, before);
}

/// The catalog of a database the runner has not touched yet (no
/// `queen.function_history` to read).
async fn untouched_catalog(client: &Client) -> Vec<String> {
    client
        .query(
            "SELECT h.version || ' ' || h.name || ' ' || h.checksum FROM queen.schema_history h
             UNION ALL
             SELECT p.oid::regprocedure::text FROM pg_proc p
             WHERE p.pronamespace = 'queen'::regnamespace
             UNION ALL
             SELECT c.relname::text FROM pg_class c WHERE c.relnamespace = 'queen'::regnamespace
             ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_handed_out_before_lease_keys_is_still_extended() {
    // V24 drops the index on lease_id: a lease live across the upgrade must
    // stay extendable, and its cursor row gets a key
    let db = TestDb::empty().await.unwrap();
    let mut client = db.client().await.unwrap();
    migrate_up_to(&mut client, 23).await;
    let lease = uuid::Uuid::now_v7();
    client
        .execute(
            "WITH q AS (INSERT INTO queen.queues (id, name) VALUES (gen_random_uuid(), 'held')
                        RETURNING id),
                  p AS (INSERT INTO queen.partitions (id, queue_id, name, next_offset, last_created_at)
                        SELECT gen_random_uuid(), q.id, 'p', 2, now() FROM q RETURNING id)
             INSERT INTO queen.log_consumers (partition_id, consumer_group, committed_offset,
                                              lease_id, lease_end_offset, lease_expires_at)
             SELECT p.id, 'g', 0, $1, 1, now() + interval '30 seconds' FROM p",
            &[&lease],
        )
        .await
        .unwrap();
    run_migrations(&mut client).await.unwrap();
    let row = client
        .query_one(
            "SELECT e.renewed, e.expires_at > now() + interval '100 seconds' AS later, e.reason,
                    (SELECT cursor_key FROM queen.log_consumers) AS key
             FROM queen.extend_lease($1, 120) e",
            &[&lease],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i32>("renewed"), 1);
    assert!(row.get::<_, bool>("later"));
    assert_eq!(row.get::<_, Option<String>>("reason"), None);
    assert!(row.get::<_, i64>("key") > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analyze_keeps_no_statistics_of_the_message_arrays() {
    let db = TestDb::new().await.unwrap();
    let client = db.client().await.unwrap();
    store_segment(&client, "stats", &["a", "b"]).await;
    client
        .batch_execute("ANALYZE queen.segments")
        .await
        .unwrap();
    let analyzed: BTreeSet<String> = texts(
        &client,
        "SELECT attname::text FROM pg_stats WHERE schemaname = 'queen' AND tablename = 'segments'",
    )
    .await;
    let want: BTreeSet<String> = [
        "partition_id",
        "last_offset",
        "first_offset",
        "created_at",
        "deleted_offsets",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(analyzed, want);
}
