//! What this replica reports about itself: health, the spool, the mesh, the
//! pool, and its metrics (JSON summary and Prometheus text).

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use prometheus::{Encoder, TextEncoder};

use super::metrics::Rates;
use super::Broker;
use crate::mesh::Mesh;
use crate::spool::SpoolStats;
use crate::store::PoolStatus;
use queen_proto::status::MeshPeer;

/// The health check's answer.
#[derive(Debug, Clone)]
pub struct HealthStatus {
    /// The schema is migrated and the database answers.
    pub healthy: bool,
    /// Why the database cannot be used, when the server says so: it refused
    /// the credentials (`authentication failed: host:port: 28P01: …`).
    pub database_error: Option<String>,
}

/// The disk spool as the maintenance and status routes show it.
#[derive(Debug, Clone)]
pub struct SpoolStatus {
    pub stats: SpoolStats,
    pub healthy: bool,
    /// PostgreSQL is not considered down.
    pub database_reachable: bool,
    pub directory: PathBuf,
}

/// This replica's view of the mesh.
#[derive(Debug, Clone)]
pub struct MeshStatus {
    pub listening: bool,
    pub peers: Vec<MeshPeer>,
    pub inbound_open: usize,
    pub inbound_accepted: u64,
    pub inbound_rejected: u64,
    pub inbound_frames: u64,
    pub guard: queen_proto::status::MeshGuard,
}

/// The numbers of `/metrics`.
#[derive(Debug, Clone, Copy)]
pub struct MetricsSummary {
    pub uptime_secs: u64,
    pub http_requests: u64,
    pub pushed: u64,
    pub popped: u64,
    pub acked: u64,
    pub rates: Rates,
    pub pool: PoolStatus,
}

/// Resident set size of this process in bytes, from /proc (0 where unavailable).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

impl Broker {
    /// Whether the schema is migrated and the database answers.
    pub async fn health(&self) -> HealthStatus {
        // while the watchdog holds it lost, answer at once: the spool's
        // replay loop probes and brings it back
        let healthy =
            self.store.is_ready() && !self.store.is_lost() && self.store.ping().await.is_ok();
        // the last connection attempt (start-up migrations, the replay
        // loop's probe, the pool) says why, when the server refused it
        let database_error = if healthy {
            None
        } else {
            self.store
                .credentials_refused()
                .map(|why| format!("authentication failed: {why}"))
        };
        HealthStatus {
            healthy,
            database_error,
        }
    }

    /// Whether the schema is known to be migrated (set once, at start); before,
    /// the HTTP side serves nothing but `/health` and the metrics.
    pub fn schema_ready(&self) -> bool {
        self.store.is_ready()
    }

    /// The mesh in two numbers, `(peers, connected)`; `None` when it does not run.
    pub fn mesh_peers(&self) -> Option<(usize, usize)> {
        let peers = self.mesh.as_ref()?.snapshot();
        Some((peers.len(), peers.iter().filter(|p| p.connected).count()))
    }

    /// Whether the database answers a trivial query (migrated or not).
    pub async fn database_answers(&self) -> bool {
        self.store.ping().await.is_ok()
    }

    /// The pool's limit, open, idle and waiting counts.
    pub fn pool_status(&self) -> PoolStatus {
        self.store.pool_status()
    }

    /// The spool's numbers and state.
    pub fn spool_status(&self) -> SpoolStatus {
        SpoolStatus {
            stats: self.spool.stats(),
            healthy: self.spool.is_healthy(),
            database_reachable: !self.spool.outage.is_down(),
            directory: self.spool.dir().to_owned(),
        }
    }

    /// The mesh's state; `None` when it does not run.
    pub fn mesh_status(&self) -> Option<MeshStatus> {
        let mesh = self.mesh.as_ref()?;
        Some(MeshStatus {
            listening: mesh.listening.load(Ordering::Relaxed),
            peers: mesh.snapshot(),
            inbound_open: mesh.inbound.open.load(Ordering::Relaxed),
            inbound_accepted: mesh.inbound.accepted.load(Ordering::Relaxed),
            inbound_rejected: mesh.inbound.rejected.load(Ordering::Relaxed),
            inbound_frames: mesh.inbound.frames.load(Ordering::Relaxed),
            guard: mesh_guard(mesh),
        })
    }

    /// The mesh listener's pre-authentication numbers, when the mesh runs.
    pub fn mesh_guard(&self) -> Option<queen_proto::status::MeshGuard> {
        self.mesh.as_deref().map(mesh_guard)
    }

    /// Counts one HTTP request.
    pub fn count_http_request(&self) {
        self.metrics.http_requests.inc();
    }

    /// Messages pushed, popped and acked by this replica since start.
    pub fn throughput_totals(&self) -> (u64, u64, u64) {
        let m = &self.metrics;
        (m.pushed.get(), m.popped.get(), m.acked_total())
    }

    /// The numbers of `/metrics`.
    pub fn metrics_summary(&self) -> MetricsSummary {
        let m = &self.metrics;
        MetricsSummary {
            uptime_secs: m.started.elapsed().as_secs(),
            http_requests: m.http_requests.get(),
            pushed: m.pushed.get(),
            popped: m.popped.get(),
            acked: m.acked_total(),
            rates: self.rates(),
            pool: self.store.pool_status(),
        }
    }

    /// Every metric in the Prometheus text format, gauges brought up to date
    /// first (the DLQ depth from the database when it answers).
    pub async fn prometheus_text(&self) -> Result<Vec<u8>, prometheus::Error> {
        let m = &self.metrics;
        let pool = self.store.pool_status();
        m.uptime.set(m.started.elapsed().as_secs() as i64);
        m.pool_size.set(pool.max_size as i64);
        m.pool_idle.set(pool.idle as i64);
        m.pool_active.set(pool.active() as i64);
        m.pool_waiting.set(pool.waiting as i64);
        m.parked_queues.set(self.waker.parked_queues() as i64);
        m.push_maintenance
            .set(i64::from(self.flags.push_maintenance()));
        m.pop_maintenance
            .set(i64::from(self.flags.pop_maintenance()));
        let spool = self.spool.stats();
        m.spool_records.set(spool.records as i64);
        m.spool_bytes.set(spool.bytes as i64);
        m.spool_failed.set(spool.failed as i64);
        if let Ok(rows) = self.store.partition_stats(None).await {
            m.dlq_depth_by_queue.reset();
            m.expired_by_queue.reset();
            for r in &rows {
                if r.expired > 0 {
                    m.expired_by_queue
                        .with_label_values(&[r.queue.as_str()])
                        .add(r.expired);
                }
                if r.dead_letter > 0 {
                    m.dlq_depth_by_queue
                        .with_label_values(&[r.queue.as_str()])
                        .add(r.dead_letter);
                }
            }
        }
        if let Some(depth) = self.refresh_reference_series().await {
            m.dlq_depth.with_label_values(&["cluster"]).set(depth);
        }
        self.refresh_stream_gauges().await;
        m.mesh_auth.reset();
        m.mesh_auth
            .with_label_values(&[self.config.mesh.auth.as_str()])
            .set(1);
        if let Some(mesh) = &self.mesh {
            for (reason, n) in mesh.refusals() {
                let c = m.mesh_refused.with_label_values(&[reason]);
                c.inc_by(n.saturating_sub(c.get()));
            }
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
        TextEncoder::new().encode(&m.registry.gather(), &mut out)?;
        Ok(out)
    }
}

fn mesh_guard(mesh: &Mesh) -> queen_proto::status::MeshGuard {
    queen_proto::status::MeshGuard {
        unauthenticated: mesh.inbound.unauthenticated.load(Ordering::Relaxed),
        refused: mesh.refusals().into_iter().collect(),
    }
}
