//! `/metrics` (JSON) and `/metrics/prometheus` (text exposition format 0.0.4).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use prometheus::{Encoder, TextEncoder};
use serde_json::{json, Value};

use crate::app::AppState;
use crate::http::error::ApiError;

/// Resident set size of this process in bytes, from /proc (0 where unavailable).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

pub async fn json(State(app): State<AppState>) -> Json<Value> {
    let m = &app.broker.metrics;
    let pool = app.broker.store.pool_status();
    let rates = app.broker.rates();
    let rss = rss_bytes();
    Json(json!({
        "uptime": m.started.elapsed().as_secs(),
        "requests": {"total": m.http_requests.get(), "rate": 0},
        "messages": {
            "total": m.pushed.get(),
            "rate": rates.pushed_per_second,
            "popped": m.popped.get(),
            "acked": m.acked_total(),
        },
        "database": {
            "poolSize": pool.max_size, "openConnections": pool.open,
            "idleConnections": pool.idle, "waitingRequests": pool.waiting,
        },
        "memory": {"rss": rss, "heapTotal": 0, "heapUsed": 0, "external": 0, "arrayBuffers": 0},
        "cpu": {"user": 0, "system": 0},
    }))
}

pub async fn prometheus(State(app): State<AppState>) -> Result<Response, ApiError> {
    let b = &app.broker;
    let m = &b.metrics;
    let pool = b.store.pool_status();
    m.uptime.set(m.started.elapsed().as_secs() as i64);
    m.pool_size.set(pool.max_size as i64);
    m.pool_idle.set(pool.idle as i64);
    m.pool_active.set(pool.active() as i64);
    m.pool_waiting.set(pool.waiting as i64);
    m.parked_queues.set(b.waker.parked_queues() as i64);
    m.push_maintenance
        .set(i64::from(b.flags.push_maintenance()));
    m.pop_maintenance.set(i64::from(b.flags.pop_maintenance()));
    let spool = b.spool.stats();
    m.spool_records.set(spool.records as i64);
    m.spool_bytes.set(spool.bytes as i64);
    m.spool_failed.set(spool.failed as i64);
    if let Ok(rows) = b.store.partition_stats(None).await {
        m.dlq_depth_by_queue.reset();
        let mut total = 0;
        for r in &rows {
            total += r.dead_letter;
            if r.dead_letter > 0 {
                m.dlq_depth_by_queue
                    .with_label_values(&[r.queue.as_str()])
                    .add(r.dead_letter);
            }
        }
        m.dlq_depth.set(total);
    }
    m.mesh_auth.reset();
    m.mesh_auth
        .with_label_values(&[b.config.mesh.auth.as_str()])
        .set(1);
    if let Some(mesh) = b.mesh.get() {
        for p in mesh.snapshot() {
            let set = |stat: &str, v: u64| {
                m.mesh_peer
                    .with_label_values(&[p.addr.as_str(), stat])
                    .set(i64::try_from(v).unwrap_or(i64::MAX));
            };
            set("connected", u64::from(p.connected));
            set("sent", p.sent);
            set("dropped", p.dropped);
            set("reconnects", p.reconnects);
        }
    }
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&m.registry.gather(), &mut out)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out,
    )
        .into_response())
}
