//! The real binary SIGKILLed with a non-empty spool, restarted on the same
//! directory: every acknowledged push ends up in PostgreSQL exactly once.

use std::time::{Duration, Instant};

use reqwest::StatusCode;

use super::harness::*;

const LIMIT: Duration = Duration::from_secs(60);

/// Every id of `partitions` × `0..n` is stored exactly once, in order.
async fn assert_exactly_once(rig: &Rig, q: &str, partitions: &[&str], n: usize) {
    for p in partitions {
        let want: Vec<String> = (0..n).map(|i| format!("{p}-{i}")).collect();
        assert_eq!(stored(&rig.db, q, p).await, want, "partition {p}");
    }
}

fn count_lines(log: &str, needle: &str) -> usize {
    log.lines().filter(|l| l.contains(needle)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_killed_during_an_outage_loses_nothing() {
    let rig = Rig::new().await;
    let env = rig.env(&[]);
    let log = rig.spool_dir().with_extension("log");
    let child = Child9::start(&env, log.clone()).await;
    let http = reqwest::Client::new();
    let q = unique("kill-outage");
    let parts = ["a", "b"];

    rig.proxy.cut();
    let items = numbered(&q, &parts, 40);
    let results = push_chunks(&child.url, &http, &items, 8).await;
    assert_buffered(&results, &items);
    let text = child.log_text();
    assert_eq!(
        count_lines(&text, "PostgreSQL unreachable"),
        1,
        "one WARN per outage, not one per request:\n{text}"
    );
    child.kill9();

    rig.proxy.restore();
    let child = Child9::start(&env, log).await;
    wait_stored(&rig.db, &q, 80, LIMIT).await;
    assert_exactly_once(&rig, &q, &parts, 40).await;
    drop(child);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_killed_during_a_drain_loses_and_doubles_nothing() {
    let rig = Rig::new().await;
    // small replay batches so the drain takes long enough to be interrupted
    let env = rig.env(&[
        ("FILE_BUFFER_MAX_BATCH", "2"),
        ("FILE_BUFFER_EVENTS_PER_FILE", "150"),
    ]);
    let log = rig.spool_dir().with_extension("log");
    let child = Child9::start(&env, log.clone()).await;
    let http = reqwest::Client::new();
    let q = unique("kill-drain");
    let parts = ["a", "b", "c"];
    let n = 300;

    rig.proxy.cut();
    let items = numbered(&q, &parts, n);
    let results = push_chunks(&child.url, &http, &items, 100).await;
    assert_buffered(&results, &items);
    rig.proxy.restore();

    // kill it once the replay has started but before it is done
    let started = Instant::now();
    let at_kill = loop {
        let stored = stored_count(&rig.db, &q).await;
        if stored > 0 {
            break stored;
        }
        assert!(started.elapsed() < LIMIT, "the drain never started");
        sleep_ms(5).await;
    };
    child.kill9();
    let total = (n * parts.len()) as i64;
    assert!(
        at_kill < total,
        "the drain finished before the kill ({at_kill})"
    );

    let child = Child9::start(&env, log).await;
    wait_stored(&rig.db, &q, total, LIMIT).await;
    assert_exactly_once(&rig, &q, &parts, n).await;
    let resp = http
        .get(format!("{}/api/v1/system/maintenance", child.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let state: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(state["bufferedMessages"], 0, "{state}");
    let text = child.log_text();
    assert!(
        count_lines(&text, "PostgreSQL reachable again") >= 1,
        "an INFO when the outage ends:\n{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spool_directory_serves_one_broker_and_must_be_writable() {
    let rig = Rig::new().await;
    let env = rig.env(&[]);
    let first = Child9::start(&env, rig.spool_dir().with_extension("log")).await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_queen-server"))
        .arg("serve")
        .env_clear()
        .envs(&env)
        .env("PORT", "0")
        .output()
        .expect("run a second broker");
    assert!(
        !out.status.success(),
        "a second broker on the same directory started"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("FILE_BUFFER_DIR") && err.contains("another live broker"),
        "{err}"
    );

    let mut env = env.clone();
    env.insert("FILE_BUFFER_DIR".into(), "/proc/queen-cannot-create".into());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_queen-server"))
        .arg("serve")
        .env_clear()
        .envs(&env)
        .env("PORT", "0")
        .output()
        .expect("run a broker on a bad directory");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("FILE_BUFFER_DIR=/proc/queen-cannot-create"),
        "{err}"
    );
    drop(first);
}
