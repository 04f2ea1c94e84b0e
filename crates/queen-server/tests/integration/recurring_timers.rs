//! Recurring timers (issue 38, item 5): an interval or cron schedule fires
//! once per tick, on the schedule's grid, never before its tick (both sides
//! read the database clock), each fire under `txn@<tick>`; missed ticks fire
//! once or not at all; a cancel stops it; bad schedules are refused naming
//! the field; three brokers with one killed fire each tick once.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use base64::Engine;
use chrono::{DateTime, Utc};
use queen_testkit::{TestBroker, TestCluster, TestDb};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

fn payload() -> String {
    base64::engine::general_purpose::STANDARD.encode(br#"{"tick":true}"#)
}

fn at(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap_or_else(|| panic!("a time: {v}")))
        .unwrap()
        .with_timezone(&Utc)
}

/// One fire as a consumer saw it: the tick named by its transactionId, and
/// when the database stored it.
#[derive(Debug, Clone)]
struct Fire {
    txn: String,
    tick: DateTime<Utc>,
    created: DateTime<Utc>,
}

fn fire_of(m: &Value, txn: &str) -> Fire {
    let t = m["transactionId"].as_str().unwrap();
    let tick = t
        .strip_prefix(&format!("{txn}@"))
        .unwrap_or_else(|| panic!("{t} is not a fire of {txn}"));
    Fire {
        txn: t.to_owned(),
        tick: at(&json!(tick)),
        created: at(&m["createdAt"]),
    }
}

/// Pops (and acks) what is in `q` through `b` for up to `wait_ms`.
async fn pop_fires(b: &TestBroker, q: &str, txn: &str, wait_ms: u64) -> Vec<Fire> {
    let (s, body) = b
        .get(&pop_path(
            q,
            None,
            &format!("wait=true&timeout={wait_ms}&batch=50"),
        ))
        .await;
    if s != StatusCode::OK {
        return Vec::new();
    }
    let mut out = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        out.push(fire_of(m, txn));
        let (s, a) = b
            .post(
                "/api/v1/ack",
                &json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                        "leaseId": m["leaseId"], "status": "completed"}),
            )
            .await;
        assert!(s.is_success(), "{a}");
    }
    out
}

/// Asserts the fires are distinct ticks of the grid `first + k · interval`,
/// each stored not before its tick.
fn assert_on_grid_once_never_early(fires: &[Fire], first: DateTime<Utc>, interval_ms: i64) {
    let mut seen = HashSet::new();
    for f in fires {
        assert!(seen.insert(f.txn.clone()), "tick fired twice: {f:?}");
        let off = (f.tick - first).num_microseconds().unwrap();
        assert!(
            off >= 0 && off % (interval_ms * 1000) == 0,
            "off the grid of {first}: {f:?}"
        );
        assert!(f.created >= f.tick, "fired before its tick: {f:?}");
    }
}

async fn schedule(b: &TestBroker, op: Value) -> Value {
    let (s, r) = b.post("/api/v1/timers", &json!([op])).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    r["results"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interval_timer_fires_each_tick_once_never_early_until_cancelled() {
    let (db, b) = setup().await;
    let q = unique("rt-int");
    let e = schedule(
        &b,
        json!({"op": "schedule", "queue": q, "timerKey": "every", "payload": payload(),
               "intervalMs": 400, "delayMs": 200, "txn": "beat"}),
    )
    .await;
    assert_eq!(e["status"], "scheduled", "{e}");
    assert_eq!(
        (&e["recurring"], &e["intervalMs"], &e["catchUp"]),
        (&json!(true), &json!(400), &json!("one")),
        "{e}"
    );
    assert_eq!(e["nextTickAt"], e["deliverAt"], "{e}");
    let first = at(&e["deliverAt"]);

    let mut fires = Vec::new();
    let until = Instant::now() + Duration::from_secs(30);
    while fires.len() < 6 {
        assert!(
            Instant::now() < until,
            "only {} fires: {fires:?}",
            fires.len()
        );
        fires.extend(pop_fires(&b, &q, "beat", 1000).await);
    }
    assert_on_grid_once_never_early(&fires, first, 400);
    assert_eq!(fires[0].tick, first, "the first fire at delayMs");

    // list and peek show the schedule, the next tick and the fires so far
    let (_, p) = b.get(&format!("/api/v1/timers/{q}/every")).await;
    assert_eq!(p["found"], true, "{p}");
    assert_eq!((&p["intervalMs"], &p["txn"]), (&json!(400), &json!("beat")));
    assert!(p["fires"].as_i64().unwrap() >= 6, "{p}");
    let next = at(&p["nextTickAt"]);
    assert!(next > fires.last().unwrap().tick, "{p}");
    assert_eq!(
        (next - first).num_microseconds().unwrap() % 400_000,
        0,
        "{p}"
    );
    let (_, l) = b.get(&format!("/api/v1/timers/{q}")).await;
    assert_eq!(l["rows"][0]["intervalMs"], 400, "{l}");
    assert!(l["rows"][0]["payload"].is_null(), "{l}");

    // a cancel stops it: nothing fires for several intervals after
    let (s, c) = b.delete(&format!("/api/v1/timers/{q}/every")).await;
    assert_eq!(
        (s, &c["status"], &c["txn"]),
        (StatusCode::OK, &json!("cancelled"), &json!("beat"))
    );
    let client = db.client().await.unwrap();
    let cancelled_at: DateTime<Utc> = client
        .query_one("SELECT clock_timestamp()", &[])
        .await
        .unwrap()
        .get(0);
    let mut late = Vec::new();
    let quiet_until = Instant::now() + Duration::from_millis(2000);
    while Instant::now() < quiet_until {
        late.extend(pop_fires(&b, &q, "beat", 500).await);
    }
    // a fire committed before the cancel may not have been popped yet;
    // none is stored after it
    assert!(
        late.iter().all(|f| f.created < cancelled_at),
        "fired after the cancel: {late:?}"
    );
    let (_, p) = b.get(&format!("/api/v1/timers/{q}/every")).await;
    assert_eq!(p["found"], false, "{p}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_timer_fires_at_delay_then_on_its_grid_and_a_reschedule_makes_it_one_shot() {
    let (_db, b) = setup().await;
    let q = unique("rt-cron");
    let e = schedule(
        &b,
        json!({"op": "schedule", "queue": q, "timerKey": "c", "payload": payload(),
               "cron": "*/5 * * * *", "timezone": "Asia/Kolkata", "delayMs": 0, "txn": "cr"}),
    )
    .await;
    assert_eq!(
        (&e["cron"], &e["timezone"]),
        (&json!("*/5 * * * *"), &json!("Asia/Kolkata"))
    );
    let fires = pop_fires(&b, &q, "cr", 5000).await;
    assert_eq!(fires.len(), 1, "the first fire at delayMs: {fires:?}");
    assert_eq!(fires[0].tick, at(&e["deliverAt"]));
    // then the grid: a whole five minutes (Kolkata is UTC+5:30, so the
    // UTC minute is a multiple of five as well)
    let (_, p) = b.get(&format!("/api/v1/timers/{q}/c")).await;
    let next = at(&p["nextTickAt"]);
    assert!(next > fires[0].created, "{p}");
    assert_eq!(next.timestamp() % 300, 0, "{p}");
    assert!((next - fires[0].created).num_seconds() <= 300, "{p}");
    assert_eq!(
        (&p["fires"], &p["timezone"]),
        (&json!(1), &json!("Asia/Kolkata"))
    );

    // without delayMs the first fire is the first tick
    let e = schedule(
        &b,
        json!({"op": "schedule", "queue": q, "timerKey": "c2", "payload": payload(),
               "cron": "0 0 1 1 *"}),
    )
    .await;
    let first = at(&e["deliverAt"]);
    assert_eq!(
        first.format("%m-%d %H:%M:%S").to_string(),
        "01-01 00:00:00",
        "{e}"
    );
    assert_eq!(e["timezone"], "UTC", "{e}");

    // a reschedule under the same key is a new timer: one-shot now
    let e = schedule(
        &b,
        json!({"op": "reschedule", "queue": q, "timerKey": "c", "payload": payload(),
               "delayMs": 60000}),
    )
    .await;
    assert_eq!(e["status"], "rescheduled", "{e}");
    assert!(e.get("recurring").is_none(), "{e}");
    let (_, p) = b.get(&format!("/api/v1/timers/{q}/c")).await;
    assert!(
        p.get("cron").is_none() && p.get("nextTickAt").is_none(),
        "{p}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_schedules_are_refused_naming_the_field_and_nothing_is_stored() {
    let (db, b) = setup().await;
    let q = unique("rt-bad");
    let op = |extra: Value| {
        let mut o = json!({"op": "schedule", "queue": q, "timerKey": "k", "payload": payload()});
        for (k, v) in extra.as_object().unwrap() {
            o[k] = v.clone();
        }
        o
    };
    for (extra, reason, field) in [
        (json!({"cron": "61 * * * *"}), "timers_bad_cron", "cron"),
        (json!({"cron": "* * * * * *"}), "timers_bad_cron", "cron"),
        (json!({"cron": "0 0 30 2 *"}), "timers_bad_cron", "cron"),
        (
            json!({"cron": "* * * * *", "timezone": "Europe/Atlantis"}),
            "timers_bad_timezone",
            "timezone",
        ),
        (
            json!({"intervalMs": 0}),
            "timers_bad_interval",
            "intervalMs",
        ),
        (
            json!({"intervalMs": "1s"}),
            "timers_bad_interval",
            "intervalMs",
        ),
        (
            json!({"intervalMs": 1000, "cron": "* * * * *"}),
            "timers_bad_schedule",
            "cron",
        ),
        (
            json!({"intervalMs": 1000, "catchUp": "all"}),
            "timers_bad_catch_up",
            "catchUp",
        ),
    ] {
        // alone, and beside a good op: the call is refused whole
        let good = json!({"op": "schedule", "queue": q, "timerKey": "good", "payload": payload(),
                          "intervalMs": 1000});
        let (s, r) = b
            .post("/api/v1/timers", &json!([good, op(extra.clone())]))
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{extra}: {r}");
        assert_eq!(
            (&r["error"], &r["reason"]),
            (&json!("timers_bad_request"), &json!(reason)),
            "{r}"
        );
        assert!(r["detail"].as_str().unwrap().contains(field), "{r}");
        // the transaction rider refuses it the same way, before anything runs
        let (s, r) = b
            .post(
                "/api/v1/transaction",
                &json!({"operations": [{"type": "push", "items": [{"queue": q, "payload": 1}]}],
                        "timers": [op(extra.clone())]}),
            )
            .await;
        assert_eq!(
            (s, &r["reason"]),
            (StatusCode::BAD_REQUEST, &json!(reason)),
            "{r}"
        );
    }
    let client = db.client().await.unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM queen.timers", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "nothing stored");
    let (s, _) = b.get(&pop_path(&q, None, "wait=false")).await;
    assert_eq!(s, StatusCode::NO_CONTENT, "no rider push applied");

    // a good recurring timer rides a transaction
    let (s, r) = b
        .post(
            "/api/v1/transaction",
            &json!({"operations": [], "timers": [op(json!({"intervalMs": 60000, "txn": "tx-rt"}))]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let (_, p) = b.get(&format!("/api/v1/timers/{q}/k")).await;
    assert_eq!(
        (&p["intervalMs"], &p["txn"]),
        (&json!(60000), &json!("tx-rt")),
        "{p}"
    );
}

/// Ticks a timer's row back by `secs` (both the tick and the due time), as
/// if every broker had been away that long longer.
async fn move_back(db: &TestDb, q: &str, key: &str, secs: i64) {
    let client = db.client().await.unwrap();
    let n = client
        .execute(
            "UPDATE queen.timers SET tick_at = tick_at - make_interval(secs => $3),
                    deliver_at = deliver_at - make_interval(secs => $3)
              WHERE queue = $1 AND timer_key = $2",
            &[&q, &key, &(secs as f64)],
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_ticks_after_downtime_fire_once_or_not_at_all() {
    let db = TestDb::new().await.unwrap();
    let mut c = TestCluster::start(1, &db, &[]).await.unwrap();
    let q = unique("rt-miss");
    let mut firsts = Vec::new();
    // periods long enough that no tick passes by itself during the test
    for (key, catch_up, every) in [
        ("one", "one", json!({"intervalMs": 3_600_000})),
        ("none", "none", json!({"intervalMs": 3_600_000})),
        ("cron-one", "one", json!({"cron": "0 0 * * *"})),
        ("cron-none", "none", json!({"cron": "0 0 * * *"})),
    ] {
        let mut op = json!({"op": "schedule", "queue": q, "timerKey": key, "payload": payload(),
                            "catchUp": catch_up, "txn": key, "partition": key});
        for (k, v) in every.as_object().unwrap() {
            op[k] = v.clone();
        }
        firsts.push(at(&schedule(c.node(0), op).await["deliverAt"]));
    }
    // the broker goes away; while it is, five ticks of each pass (the rows
    // are moved back five periods: the grid stays, the clock does not wait)
    c.stop(0).await;
    for (key, period) in [
        ("one", 3600),
        ("none", 3600),
        ("cron-one", 86400),
        ("cron-none", 86400),
    ] {
        move_back(&db, &q, key, 5 * period).await;
    }
    c.start_node(0).await.unwrap();
    let b = c.node(0);
    let wait_settled = Instant::now() + Duration::from_secs(15);
    loop {
        let (_, l) = b.get(&format!("/api/v1/timers/{q}")).await;
        let rows = l["rows"].as_array().unwrap();
        if rows.len() == 4 && rows.iter().all(|r| at(&r["nextTickAt"]) > Utc::now()) {
            break;
        }
        assert!(
            Instant::now() < wait_settled,
            "the sweep never caught up: {l}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (i, key) in ["one", "none", "cron-one", "cron-none"]
        .into_iter()
        .enumerate()
    {
        let (s, body) = b
            .get(&pop_path(&q, Some(key), "wait=true&timeout=1000&batch=10"))
            .await;
        let (_, p) = b.get(&format!("/api/v1/timers/{q}/{key}")).await;
        let next = at(&p["nextTickAt"]);
        if key.ends_with("none") {
            assert_eq!(
                s,
                StatusCode::NO_CONTENT,
                "{key}: missed ticks fired: {body}"
            );
            assert_eq!(p["fires"], 0, "{p}");
        } else {
            assert_eq!(s, StatusCode::OK, "{key}");
            let msgs = body["messages"].as_array().unwrap();
            assert_eq!(
                msgs.len(),
                1,
                "{key}: one fire for five missed ticks: {body}"
            );
            let f = fire_of(&msgs[0], key);
            // it stands for the latest passed tick: the one the broker
            // would have fired last, the period before the next
            assert!(f.created >= f.tick, "{f:?}");
            let period = if i < 2 { 3600 } else { 86400 };
            assert_eq!(
                (next - f.tick).num_seconds(),
                period,
                "{key}: {f:?} then {p}"
            );
            assert_eq!(p["fires"], 1, "{p}");
        }
        // still on the schedule's grid
        if i < 2 {
            let off = (next - firsts[i]).num_microseconds().unwrap();
            assert_eq!(off % 3_600_000_000, 0, "{p}");
        } else {
            assert_eq!(next.timestamp() % 86400, 0, "{p}");
            assert_eq!(next, firsts[i], "{p}");
        }
    }
    let text = prometheus_text(b).await;
    assert!(
        text.contains("queen_timer_events_total{event=\"skipped\"} 2"),
        "two timers skipped their missed ticks"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recurring_timer_fires_each_tick_once_across_three_brokers_with_one_killed() {
    let db = TestDb::new().await.unwrap();
    let mut c = TestCluster::start(3, &db, &[]).await.unwrap();
    let q = unique("rt-ha");
    let e = schedule(
        c.node(0),
        json!({"op": "schedule", "queue": q, "timerKey": "ha", "payload": payload(),
               "intervalMs": 500, "txn": "ha"}),
    )
    .await;
    let first = at(&e["deliverAt"]);
    let mut fires = Vec::new();
    let until = Instant::now() + Duration::from_secs(40);
    while fires.len() < 4 {
        assert!(Instant::now() < until, "{fires:?}");
        fires.extend(pop_fires(c.node(2), &q, "ha", 1000).await);
    }
    // the broker that took the schedule (and swept so far, most likely) dies
    c.stop(0).await;
    let killed_at = Utc::now();
    while fires.iter().filter(|f| f.created > killed_at).count() < 5 {
        assert!(Instant::now() < until, "{fires:?}");
        let node = 1 + fires.len() % 2;
        fires.extend(pop_fires(c.node(node), &q, "ha", 1000).await);
    }
    // cancelled through a survivor, drained: every stored message was
    // delivered, one per tick
    let (s, c1) = c.node(1).delete(&format!("/api/v1/timers/{q}/ha")).await;
    assert_eq!(
        (s, &c1["status"]),
        (StatusCode::OK, &json!("cancelled")),
        "{c1}"
    );
    loop {
        let more = pop_fires(c.node(1), &q, "ha", 300).await;
        if more.is_empty() {
            break;
        }
        fires.extend(more);
    }
    assert_on_grid_once_never_early(&fires, first, 500);
    let client = db.client().await.unwrap();
    let stored: i64 = client
        .query_one("SELECT count(*) FROM queen.message_keys", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored as usize, fires.len(), "one stored message per fire");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_refused_five_times_is_dead_lettered_and_the_timer_keeps_its_schedule() {
    let (db, b) = setup().await;
    let q = unique("rt-dlq");
    let admin = db.client().await.unwrap();
    admin
        .batch_execute(
            r#"ALTER TABLE queen.segments ADD CONSTRAINT refuse_poison
               CHECK (NOT ('{"refuse":true}' = ANY (payloads)))"#,
        )
        .await
        .unwrap();
    let poison = base64::engine::general_purpose::STANDARD.encode(br#"{"refuse":true}"#);
    let e = schedule(
        &b,
        json!({"op": "schedule", "queue": q, "timerKey": "p", "payload": poison,
               "intervalMs": 3_600_000, "delayMs": 0, "txn": "p"}),
    )
    .await;
    let tick = at(&e["deliverAt"]);
    let until = Instant::now() + Duration::from_secs(30);
    let p = loop {
        let (_, p) = b.get(&format!("/api/v1/timers/{q}/p")).await;
        assert_eq!(p["found"], true, "{p}");
        if at(&p["nextTickAt"]) > tick {
            break p;
        }
        assert!(Instant::now() < until, "never dead-lettered: {p}");
        if p["lastError"].is_string() {
            // skip the back-off: due again now
            admin
                .execute(
                    "UPDATE queen.timers SET deliver_at = clock_timestamp()
                      WHERE queue = $1 AND timer_key = 'p' AND deliver_at > clock_timestamp()",
                    &[&q],
                )
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // re-armed at the next tick, not removed; the refused tick is in the DLQ
    assert_eq!(
        at(&p["nextTickAt"]) - tick,
        chrono::Duration::hours(1),
        "{p}"
    );
    assert_eq!((&p["attempts"], &p["fires"]), (&json!(0), &json!(0)), "{p}");
    assert!(p["lastError"].is_null(), "{p}");
    let (s, d) = b
        .get(&format!("/api/v1/dlq?queue={q}&consumerGroup=__timer__"))
        .await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!(d["total"], 1, "{d}");
    let want = format!("p@{}", queen_proto::time::format_micros(tick));
    assert_eq!(d["messages"][0]["transactionId"], json!(want), "{d}");
}
