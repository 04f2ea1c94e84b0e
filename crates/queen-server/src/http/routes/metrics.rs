//! `/metrics` (JSON) and `/metrics/prometheus` (text exposition format 0.0.4).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use queen_proto::status::{
    CpuMetrics, MemoryMetrics, MessageMetrics, Metrics, PoolMetrics, RequestMetrics,
};

use crate::app::AppState;
use crate::broker::status_rss_bytes;
use crate::http::error::ApiError;

pub async fn json(State(app): State<AppState>) -> Json<Metrics> {
    let m = app.broker.metrics_summary();
    let pool = m.pool;
    Json(Metrics {
        uptime: m.uptime_secs,
        requests: RequestMetrics {
            total: m.http_requests,
            rate: 0,
        },
        messages: MessageMetrics {
            total: m.pushed,
            rate: m.rates.pushed_per_second,
            popped: m.popped,
            acked: m.acked,
        },
        database: PoolMetrics {
            pool_size: pool.max_size,
            open_connections: pool.open,
            idle_connections: pool.idle,
            waiting_requests: pool.waiting,
        },
        memory: MemoryMetrics {
            rss: status_rss_bytes(),
            heap_total: 0,
            heap_used: 0,
            external: 0,
            array_buffers: 0,
        },
        cpu: CpuMetrics { user: 0, system: 0 },
        mesh: app.broker.mesh_guard(),
    })
}

pub async fn prometheus(State(app): State<AppState>) -> Result<Response, ApiError> {
    let text = app
        .broker
        .prometheus_text()
        .await
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}
