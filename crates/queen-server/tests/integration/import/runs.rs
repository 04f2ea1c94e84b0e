//! Running the import again: nothing changes; a catch-up takes only what is
//! new (late commits included); a run killed halfway, run again, ends where
//! one uninterrupted run ends.

use std::time::Duration;

use queen_testkit::TestDb;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_changes_nothing_and_a_catch_up_takes_only_what_is_new() {
    let source = reference().await;
    let target = TestDb::new().await.unwrap();
    let dry = import(&target, &url(&source), "queen", Some(KEY), true)
        .await
        .unwrap();
    assert_eq!(dry.totals.imported, 14);
    assert_eq!(count_queues(&target).await, 0, "a dry run writes nothing");

    import(&target, &url(&source), "queen", Some(KEY), false)
        .await
        .unwrap();
    let (rows, versions) = (content(&target).await, row_versions(&target).await);
    let again = import(&target, &url(&source), "queen", Some(KEY), false)
        .await
        .unwrap();
    assert_eq!(again.totals.imported, 0);
    assert_eq!(again.totals.mismatches, 0, "{}", again.render());
    assert_eq!(content(&target).await, rows);
    assert_eq!(
        row_versions(&target).await,
        versions,
        "the second run wrote rows"
    );
    let dry = import(&target, &url(&source), "queen", Some(KEY), true)
        .await
        .unwrap();
    assert_eq!(dry.totals.imported, 0, "{}", dry.render());

    // the reference serves on: a new push, a push that committed late
    // (stamped before the last message imported), and cg1 acks up to tx-5
    let s = source.client().await.unwrap();
    s.batch_execute(
        "INSERT INTO queen.messages (id, transaction_id, partition_id, payload, created_at) VALUES
             ('019ad000-0000-7007-8000-000000000007', 'tx-7', 'b0000000-0000-4000-8000-000000000001',
              '{\"n\": 7}', '2026-11-30 10:00:06+00'),
             ('019ad000-0000-7003-8000-0000000000aa', 'tx-late', 'b0000000-0000-4000-8000-000000000001',
              '{\"late\": true}', '2026-11-30 10:00:04.5+00');
         UPDATE queen.partition_consumers SET last_consumed_id = '019ad000-0000-7004-8000-000000000005',
              last_consumed_created_at = '2026-11-30 10:00:02.300003+00', worker_id = NULL
         WHERE consumer_group = 'cg1' AND partition_id = 'b0000000-0000-4000-8000-000000000001';",
    )
    .await
    .unwrap();
    let catch_up = import(&target, &url(&source), "queen", Some(KEY), false)
        .await
        .unwrap();
    let t = &catch_up.totals;
    assert_eq!((t.imported, t.late), (2, 1), "{}", catch_up.render());
    let p1 = catch_up
        .queues
        .iter()
        .find(|q| q.name == "orders")
        .and_then(|q| q.partitions.iter().find(|p| p.name == "p1"))
        .unwrap();
    assert_eq!(p1.target_messages, Some(8));
    let cg1 = p1.groups.iter().find(|g| g.group == "cg1").unwrap();
    // after tx-5 in the source: tx-late, tx-6, tx-7; here the late one sits
    // after tx-6, so pending is tx-6, tx-late, tx-7: the same three
    assert_eq!((cg1.source_unconsumed, cg1.target_pending), (3, Some(3)));
    let c = target.client().await.unwrap();
    let order: Vec<String> = c
        .query(
            "SELECT unnest(s.transaction_ids) FROM queen.segments s JOIN queen.partitions p ON p.id = s.partition_id
             WHERE p.name = 'p1' ORDER BY s.first_offset",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        order,
        ["tx-1", "tx-2", "tx-3", "tx-4", "tx-5", "tx-6", "tx-late", "tx-7"]
    );
}

async fn count_queues(db: &TestDb) -> i64 {
    let c = db.client().await.unwrap();
    c.query_one("SELECT count(*) FROM queen.queues", &[])
        .await
        .unwrap()
        .get(0)
}

/// Adds queue `bulk` with partitions p0..p5 of 40 messages each to the fixture.
async fn add_bulk(source: &TestDb) {
    let s = source.client().await.unwrap();
    s.batch_execute(
        "INSERT INTO queen.queues (id, name, namespace, task, created_at)
             VALUES ('a0000000-0000-4000-8000-0000000000b0', 'bulk', 'bulk', '', '2026-11-30 08:00:00+00');
         INSERT INTO queen.partitions (id, queue_id, name, created_at)
             SELECT ('b0000000-0000-4000-8000-0000000000b' || i)::uuid,
                    'a0000000-0000-4000-8000-0000000000b0', 'p' || i, '2026-11-30 08:00:00+00'
             FROM generate_series(0, 5) i;
         INSERT INTO queen.messages (transaction_id, partition_id, payload, created_at)
             SELECT 'b-' || i || '-' || n, ('b0000000-0000-4000-8000-0000000000b' || i)::uuid,
                    jsonb_build_object('i', i, 'n', n),
                    '2026-11-30 08:00:00+00'::timestamptz + n * interval '1 millisecond'
             FROM generate_series(0, 5) i, generate_series(1, 40) n;
         INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_consumed_id, last_consumed_created_at)
             SELECT m.partition_id, 'bulk-g', m.id, m.created_at FROM queen.messages m
             WHERE m.transaction_id LIKE 'b-%-20';",
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_killed_halfway_and_run_again_ends_as_one_uninterrupted_run() {
    let source = reference().await;
    add_bulk(&source).await;
    let whole = TestDb::new().await.unwrap();
    let report = import(&whole, &url(&source), "queen", Some(KEY), false)
        .await
        .unwrap();
    assert_eq!(report.totals.imported, 14 + 240);

    // the killed run: stopped for good while it waits inside the transaction
    // of bulk/p3 (a lock held here), after p0..p2 committed
    let target = TestDb::new().await.unwrap();
    let c = target.client().await.unwrap();
    c.batch_execute(
        "INSERT INTO queen.queues (id, name, namespace, task, created_at)
             VALUES (gen_random_uuid(), 'bulk', 'bulk', '', '2026-11-30 08:00:00+00');
         INSERT INTO queen.partitions (id, queue_id, name, created_at)
             SELECT gen_random_uuid(), id, 'p3', '2026-11-30 08:00:00+00' FROM queen.queues WHERE name = 'bulk';",
    )
    .await
    .unwrap();
    let mut blocker = target.client().await.unwrap();
    let hold = blocker.transaction().await.unwrap();
    hold.batch_execute("SELECT 1 FROM queen.partitions WHERE name = 'p3' FOR UPDATE")
        .await
        .unwrap();
    let mut child = crate::common::queen_server()
        .args([
            "import",
            "--from",
            &url(&source),
            "--jobs",
            "1",
            "--page",
            "7",
            "--json",
        ])
        .envs(queen_testkit::base_env(&target))
        .env("QUEEN_ENCRYPTION_KEY", KEY)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut waited = Duration::ZERO;
    loop {
        let done: i64 = c
            .query_one(
                "SELECT count(*) FROM queen.import_progress WHERE last_message_id IS NOT NULL",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let blocked: Vec<String> = c
            .query(
                "SELECT coalesce(wait_event_type, '-') || ' ' || query FROM pg_stat_activity
                 WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        if done == 3
            && blocked
                .iter()
                .any(|q| q.starts_with("Lock") && q.contains("queen."))
        {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                std::io::Read::read_to_string(&mut e, &mut err).unwrap();
            }
            panic!("the import ended ({status}) before p3: {err}");
        }
        assert!(
            waited < Duration::from_secs(60),
            "the import never reached p3 ({done} done, active: {blocked:?})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    hold.rollback().await.unwrap();
    // what the killed run left: p0..p2 whole, p3 untouched, nothing after
    let half: Vec<String> = content(&target)
        .await
        .into_iter()
        .filter(|r| r.starts_with("segment bulk/"))
        .map(|r| r.split(' ').nth(1).unwrap().to_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(half, ["bulk/p0", "bulk/p1", "bulk/p2"]);
    assert_eq!(count_queues(&target).await, 3, "queues come first");

    let rerun = import(&target, &url(&source), "queen", Some(KEY), false)
        .await
        .unwrap();
    assert_eq!(
        rerun.totals.imported,
        14 + 240 - 3 * 40,
        "{}",
        rerun.render()
    );
    assert_eq!(rerun.totals.mismatches, 0);
    assert_eq!(content(&target).await, content(&whole).await);
}
