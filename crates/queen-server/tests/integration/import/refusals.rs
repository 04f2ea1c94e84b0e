//! Bad input ends with one clear message and nothing written.

use queen_testkit::TestDb;

use super::support::*;

/// Everything an import could write, counted.
async fn written(db: &TestDb) -> i64 {
    let c = db.client().await.unwrap();
    c.query_one(
        "SELECT (SELECT count(*) FROM queen.queues) + (SELECT count(*) FROM queen.partitions)
              + (SELECT count(*) FROM queen.import_progress) + (SELECT count(*) FROM queen.system_state)
              + (SELECT count(*) FROM queen.consumer_subscriptions)",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

async fn refused(target: &TestDb, url: &str, schema: &str, key: Option<&str>) -> String {
    let e = import(target, url, schema, key, false)
        .await
        .expect_err("the import should refuse");
    assert_eq!(written(target).await, 0, "{e:#}");
    format!("{e:#}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_ends_with_one_clear_message_and_writes_nothing() {
    let source = reference().await;
    let target = TestDb::new().await.unwrap();

    // not a reference database: this broker's own, an empty one, a wrong schema
    let ours = TestDb::new().await.unwrap();
    let e = refused(&target, &url(&ours), "queen", Some(KEY)).await;
    assert!(
        e.contains("not a reference Queen 0.15 database") && e.contains("this broker's own schema"),
        "{e}"
    );
    let empty = TestDb::empty().await.unwrap();
    let e = refused(&target, &url(&empty), "queen", Some(KEY)).await;
    assert!(
        e.contains("not a reference Queen 0.15 database") && e.contains("has no tables"),
        "{e}"
    );
    let e = refused(&target, &url(&source), "other", Some(KEY)).await;
    assert!(
        e.contains("schema other") && e.contains("has no tables"),
        "{e}"
    );
    let c = source.client().await.unwrap();
    c.batch_execute(
        "ALTER TABLE queen.partition_consumers RENAME COLUMN last_consumed_created_at TO x",
    )
    .await
    .unwrap();
    let e = refused(&target, &url(&source), "queen", Some(KEY)).await;
    assert!(
        e.contains("table partition_consumers") && e.contains("no column last_consumed_created_at"),
        "{e}"
    );
    c.batch_execute(
        "ALTER TABLE queen.partition_consumers RENAME COLUMN x TO last_consumed_created_at",
    )
    .await
    .unwrap();
    let e = refused(
        &target,
        "postgres://nobody@127.0.0.1:1/none",
        "queen",
        Some(KEY),
    )
    .await;
    assert!(
        e.contains("cannot connect to the source 127.0.0.1:1/none"),
        "{e}"
    );
    let e = refused(&target, "not a url=", "queen", Some(KEY)).await;
    assert!(e.contains("source URL does not parse"), "{e}");

    // the key: wrong, or none for encrypted payloads
    let wrong = "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    let e = refused(&target, &url(&source), "queen", Some(wrong)).await;
    assert!(
        e.contains("QUEEN_ENCRYPTION_KEY does not open the source's payloads")
            && e.contains("of queue jobs"),
        "{e}"
    );
    let e = refused(&target, &url(&source), "queen", None).await;
    assert!(
        e.contains("QUEEN_ENCRYPTION_KEY is not set") && e.contains("queue jobs"),
        "{e}"
    );

    // a role that may not read the source
    let role = format!("queen_imp_{}", uuid::Uuid::new_v4().simple());
    c.batch_execute(&format!("CREATE ROLE {role} LOGIN"))
        .await
        .unwrap();
    let e = refused(&target, &url_as(&source, &role), "queen", Some(KEY)).await;
    assert!(
        e.contains(&format!("role {role} lacks USAGE on schema queen")),
        "{e}"
    );
    c.batch_execute(&format!(
        "GRANT USAGE ON SCHEMA queen TO {role}; GRANT SELECT ON ALL TABLES IN SCHEMA queen TO {role};
         REVOKE SELECT ON queen.dead_letter_queue FROM {role}"
    ))
    .await
    .unwrap();
    let e = refused(&target, &url_as(&source, &role), "queen", Some(KEY)).await;
    assert!(
        e.contains(&format!(
            "role {role} cannot SELECT from \"queen\".dead_letter_queue"
        )),
        "{e}"
    );
    c.batch_execute(&format!("DROP OWNED BY {role}; DROP ROLE {role}"))
        .await
        .unwrap();

    // a dry run never writes, whatever it finds
    let report = import(&target, &url(&source), "queen", Some(KEY), true)
        .await
        .unwrap();
    assert_eq!(report.totals.imported, 14);
    assert_eq!(written(&target).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_source_may_be_this_database_under_another_schema() {
    let target = TestDb::new().await.unwrap();
    let c = target.client().await.unwrap();
    c.batch_execute(&renamed(SCHEMA, "ref_")).await.unwrap();
    c.batch_execute(&renamed(FILL, "ref_")).await.unwrap();
    let report = import(&target, &url(&target), "ref_queen", Some(KEY), false)
        .await
        .unwrap();
    assert_eq!((report.totals.imported, report.totals.mismatches), (14, 0));
    let skipped = report.render();
    assert!(
        skipped.contains("streams"),
        "ref_queen_streams is read: {skipped}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_that_does_not_decrypt_stops_the_run_naming_it() {
    let source = reference().await;
    let target = TestDb::new().await.unwrap();
    // j-4's tag altered: the key opens j-1 and j-2, not j-4
    let s = source.client().await.unwrap();
    s.batch_execute(
        "UPDATE queen.messages SET payload = jsonb_set(payload, '{authTag}', '\"AAAAAAAAAAAAAAAAAAAAAA==\"')
         WHERE transaction_id = 'j-4'",
    )
    .await
    .unwrap();
    let e = import(&target, &url(&source), "queen", Some(KEY), false)
        .await
        .expect_err("j-4 does not decrypt");
    let e = format!("{e:#}");
    assert!(
        e.contains("message j-4 of queue jobs partition Default"),
        "{e}"
    );
    // its partition is not half-imported
    let c = target.client().await.unwrap();
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM queen.segments s JOIN queen.partitions p ON p.id = s.partition_id
             JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'jobs'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "{e}");
}
