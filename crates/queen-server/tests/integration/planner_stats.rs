//! `queen.refresh_planner_stats()`: the hot tables are analyzed once they
//! changed a lot, by one replica at a time.

use serde_json::{json, Value};

use crate::common::*;

async fn analyzed_rows(client: &tokio_postgres::Client) -> f32 {
    client
        .query_one(
            "SELECT reltuples FROM pg_class WHERE oid = 'queen.partitions'::regclass",
            &[],
        )
        .await
        .expect("reltuples")
        .get(0)
}

async fn refresh(client: &tokio_postgres::Client) -> i32 {
    client
        .query_one("SELECT queen.refresh_planner_stats()", &[])
        .await
        .expect("refresh")
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_that_grew_are_analyzed_once_and_by_one_session_at_a_time() {
    let (db, b) = setup().await;
    let client = db.client().await.expect("db client");
    let queue = unique("stats");
    // 1 500 new partitions: more rows changed than the 1 000 floor
    for chunk in 0..3 {
        let items: Vec<Value> = (0..500)
            .map(|i| json!({ "queue": queue, "partition": format!("p{chunk}-{i}"), "payload": i }))
            .collect();
        let (status, body) = b.post("/api/v1/push", &json!({ "items": items })).await;
        assert_eq!(status.as_u16(), 201, "{body}");
    }
    // the broker's sessions report their write counters when they end
    b.stop().await;

    // another session holds the job's lock: nothing is analyzed
    let other = db.client().await.expect("second client");
    other.execute("BEGIN", &[]).await.expect("begin");
    other
        .query_one("SELECT pg_advisory_xact_lock(8175552184878984812)", &[])
        .await
        .expect("lock");
    assert_eq!(refresh(&client).await, 0);
    other.execute("COMMIT", &[]).await.expect("commit");

    // released: the tables that grew are analyzed, with their real size
    let mut counted = false;
    for _ in 0..50 {
        let changed: i64 = client
            .query_one(
                "SELECT n_mod_since_analyze FROM pg_stat_user_tables
                 WHERE schemaname = 'queen' AND relname = 'partitions'",
                &[],
            )
            .await
            .expect("counters")
            .get(0);
        if changed >= 1_500 {
            counted = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(counted, "the pushes' writes never reached the counters");
    assert!(refresh(&client).await >= 1, "nothing analyzed");
    assert!(analyzed_rows(&client).await >= 1_500.0);
    assert_eq!(refresh(&client).await, 0, "analyzed twice");

    // a small change is not worth an analyze
    client
        .execute(
            "UPDATE queen.partitions SET last_created_at = now()
             WHERE id IN (SELECT id FROM queen.partitions LIMIT 10)",
            &[],
        )
        .await
        .expect("update");
    client
        .query_one("SELECT pg_stat_force_next_flush()", &[])
        .await
        .expect("flush");
    client.execute("SELECT 1", &[]).await.expect("report");
    assert_eq!(
        refresh(&client).await,
        0,
        "ten updates triggered an analyze"
    );
}
