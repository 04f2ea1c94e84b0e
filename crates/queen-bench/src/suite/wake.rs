//! Wake-up latency: a parked pop answered by a push through the same broker or through its mesh peer.

use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use tokio::time::Instant;

use super::{drain_all, queue_name, rss_mb, Suite};
use crate::api::{AckItem, Api, PopParams};
use crate::broker::{free_port, Broker, MeshSide};
use crate::load::{self, RunState};
use crate::meter::Meter;
use crate::results::ScenarioResult;
use crate::stats::Latencies;

/// Parks a pop on `pop_api`, pushes one message through `push_api`, and
/// measures until the pop answers; `samples` times.
async fn wake_samples(
    suite: &Suite,
    push_api: &Api,
    pop_api: &Api,
    id: &str,
) -> Result<(Latencies, Latencies, u64)> {
    let run = RunState::new(queue_name("wake"), u64::from(suite.cfg.wake_samples) + 1);
    let payload = suite.cfg.payload_bytes;
    let params = PopParams {
        batch: 1,
        partitions: 1,
        wait_ms: Some(5000),
        consumer_group: None,
    };
    // Create queue and partition, and warm both brokers' caches.
    push_api
        .push_raw(load::push_body(&run, "p0", 0, 1, payload), 1)
        .await?;
    drain_all(pop_api, &run.queue, 1, Duration::from_secs(20)).await?;

    let (mut from_answer, mut from_send) = (Latencies::default(), Latencies::default());
    let mut missed = 0;
    for seq in 1..=u64::from(suite.cfg.wake_samples) {
        let pop = {
            let api = pop_api.clone();
            let queue = run.queue.clone();
            let params = PopParams {
                consumer_group: None,
                ..params
            };
            tokio::spawn(async move {
                let r = api.pop(&queue, &params).await;
                (r, Instant::now())
            })
        };
        tokio::time::sleep(Duration::from_millis(suite.cfg.wake_park_ms)).await;
        let sent = Instant::now();
        push_api
            .push_raw(load::push_body(&run, "p0", seq, seq + 1, payload), 1)
            .await?;
        let answered = Instant::now();
        let (msgs, popped_at) = pop.await.context("pop task")?;
        let msgs = msgs?;
        if msgs.is_empty() {
            missed += 1;
            continue;
        }
        from_answer.record(popped_at.saturating_duration_since(answered));
        from_send.record(popped_at.duration_since(sent));
        let acks: Vec<AckItem<'_>> = msgs
            .iter()
            .filter_map(|m| {
                Some(AckItem {
                    transaction_id: &m.transaction_id,
                    partition_id: &m.partition_id,
                    lease_id: m.lease_id.as_deref().filter(|l| !l.is_empty())?,
                    status: "completed",
                })
            })
            .collect();
        pop_api.ack_batch(&acks).await?;
        if seq.is_multiple_of(50) {
            eprintln!("[{id}] {seq}/{} samples", suite.cfg.wake_samples);
        }
    }
    Ok((from_answer, from_send, missed))
}

fn wake_result(
    id: &str,
    kind: &str,
    (from_answer, from_send, missed): (Latencies, Latencies, u64),
    res: crate::meter::Resources,
    idle: Option<f64>,
) -> ScenarioResult {
    let n = from_answer.len() as u64;
    let mut r = ScenarioResult {
        id: id.into(),
        kind: kind.into(),
        messages: n,
        seconds: res.seconds,
        msg_per_s: 0.0,
        latency_of: "wake".into(),
        latency: from_answer.summary(),
        resources: Some(res),
        broker_idle_rss_mb: idle,
        ..ScenarioResult::default()
    };
    r.latencies
        .insert("wake from push sent".into(), from_send.summary());
    r.detail("samples", n);
    r.detail("missed", missed);
    r.detail(
        "measures",
        "parked pop answered minus push answered (0 if the pop came first)",
    );
    r
}

pub(super) async fn wake_same(suite: &mut Suite) -> Result<ScenarioResult> {
    eprintln!("-- wake/same: {} samples", suite.cfg.wake_samples);
    let mut env = suite.env("wake").await?;
    let result = async {
        let meter = Meter::start(env.pid, &suite.monitor, &suite.cfg.pg, &env.db).await?;
        let s = wake_samples(suite, &env.api, &env.api, "wake/same").await?;
        let (res, rss_after) = suite.finish(&mut env, meter.stop(), None).await?;
        let mut r = wake_result("wake/same", "wake", s, res, env.idle_rss_mb);
        r.broker_rss_after_mb = rss_after;
        anyhow::Ok(r)
    }
    .await;
    suite.release(env).await;
    result
}

pub(super) async fn wake_mesh(suite: &mut Suite) -> Result<ScenarioResult> {
    eprintln!(
        "-- wake-mesh: {} samples, pop parked on B, push on A",
        suite.cfg.wake_samples
    );
    let id = "wake-mesh/two-brokers";
    let Some(spec) = suite.spec.clone() else {
        let (Some(a), Some(b)) = (suite.cfg.url.clone(), suite.cfg.url_b.clone()) else {
            bail!("wake-mesh needs --broker-bin, or --url and --url-b");
        };
        let (api_a, api_b) = (suite.api(&a)?, suite.api(&b)?);
        let db = suite.cfg.db.clone().unwrap_or_default();
        let meter = Meter::start(suite.cfg.broker_pid, &suite.monitor, &suite.cfg.pg, &db).await?;
        let s = wake_samples(suite, &api_a, &api_b, id).await?;
        let res = meter
            .stop()
            .finish(&suite.monitor, &db, suite.settle(), None)
            .await?;
        return Ok(wake_result(id, "wake-mesh", s, res, None));
    };
    let db = suite.scratch_db("mesh").await?;
    let (mesh_a, mesh_b) = (free_port()?, free_port()?);
    let mut brokers = Vec::new();
    let result = async {
        let a = Broker::start(
            &spec,
            &suite.cfg.pg,
            &db,
            &format!("{db}_a"),
            Some(MeshSide {
                server_id: "bench-a".into(),
                mesh_port: mesh_a,
                peers: format!("127.0.0.1:{mesh_b}"),
            }),
        )
        .await?;
        let (url_a, pid_a) = (a.url.clone(), a.pid);
        brokers.push(a);
        let b = Broker::start(
            &spec,
            &suite.cfg.pg,
            &db,
            &format!("{db}_b"),
            Some(MeshSide {
                server_id: "bench-b".into(),
                mesh_port: mesh_b,
                peers: format!("127.0.0.1:{mesh_a}"),
            }),
        )
        .await?;
        let url_b = b.url.clone();
        brokers.push(b);
        wait_mesh(&[&url_a, &url_b]).await?;
        let idle = rss_mb(Some(pid_a));
        let (api_a, api_b) = (suite.api(&url_a)?, suite.api(&url_b)?);
        let meter = Meter::start(Some(pid_a), &suite.monitor, &suite.cfg.pg, &db).await?;
        let s = wake_samples(suite, &api_a, &api_b, id).await?;
        let stopped = meter.stop();
        for b in brokers.drain(..) {
            b.stop().await;
        }
        let res = stopped
            .finish(&suite.monitor, &db, suite.settle(), None)
            .await?;
        let mut r = wake_result(id, "wake-mesh", s, res, idle);
        r.detail("brokerMetricsOf", "A (the pushing broker)");
        anyhow::Ok(r)
    }
    .await;
    for b in brokers {
        b.stop().await;
    }
    if !suite.cfg.keep_dbs {
        let _ = suite.monitor.drop_database(&db).await;
    }
    result
}

/// Waits until every broker reports a connected peer.
async fn wait_mesh(urls: &[&String]) -> Result<()> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let mut up = 0;
        for url in urls {
            let state: Option<serde_json::Value> = match http
                .get(format!("{url}/api/v1/system/shared-state"))
                .send()
                .await
            {
                Ok(r) => r.json().await.ok(),
                Err(_) => None,
            };
            if state
                .as_ref()
                .and_then(|s| s.get("peersConnected"))
                .and_then(serde_json::Value::as_u64)
                .is_some_and(|n| n >= 1)
            {
                up += 1;
            }
        }
        if up == urls.len() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("the two brokers' mesh did not connect within 30 s")
}
