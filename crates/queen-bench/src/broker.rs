//! Brokers the suite starts itself (`--broker-bin`): one process per scenario
//! on a fresh database, or two meshed ones for the cross-broker wake test.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::pg::PgArgs;

/// How to start a broker.
#[derive(Debug, Clone)]
pub struct BrokerSpec {
    pub bin: PathBuf,
    pub pool_size: u32,
    /// Where logs and spool directories go.
    pub work_dir: PathBuf,
    /// Extra `KEY=VALUE` environment for every broker.
    pub env: Vec<(String, String)>,
}

/// Mesh settings of one of a pair of brokers.
pub struct MeshSide {
    pub server_id: String,
    pub mesh_port: u16,
    pub peers: String,
}

/// A running broker; stopped (SIGTERM, then SIGKILL) by [`Broker::stop`] or on drop.
pub struct Broker {
    child: Option<Child>,
    pub pid: u32,
    pub url: String,
    pub log: PathBuf,
}

/// A free loopback TCP port (bound, then released; racy but fine on a quiet box).
pub fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(l.local_addr()?.port())
}

impl Broker {
    pub async fn start(
        spec: &BrokerSpec,
        pg: &PgArgs,
        db: &str,
        name: &str,
        mesh: Option<MeshSide>,
    ) -> Result<Self> {
        let port = free_port()?;
        let log = spec.work_dir.join(format!("{name}.log"));
        let spool = spec.work_dir.join(format!("spool-{name}"));
        std::fs::create_dir_all(&spool).with_context(|| format!("creating {}", spool.display()))?;
        let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone()?;
        let mut cmd = Command::new(&spec.bin);
        cmd.arg("serve")
            .env("PORT", port.to_string())
            .env("HOST", "127.0.0.1")
            .env("PG_HOST", &pg.pg_host)
            .env("PG_PORT", pg.pg_port.to_string())
            .env("PG_USER", &pg.pg_user)
            .env("PG_DB", db)
            .env("DB_POOL_SIZE", spec.pool_size.to_string())
            .env("LOG_LEVEL", "warn")
            // no load balancer to drain from: SIGTERM stops at once
            .env("SHUTDOWN_DRAIN_MS", "0")
            .env("FILE_BUFFER_DIR", &spool)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .kill_on_drop(true);
        if !pg.pg_password.is_empty() {
            cmd.env("PG_PASSWORD", &pg.pg_password);
        }
        match mesh {
            Some(m) => {
                cmd.env("QUEEN_SERVER_ID", m.server_id)
                    .env("QUEEN_MESH_PORT", m.mesh_port.to_string())
                    .env("QUEEN_MESH_PEERS", m.peers);
            }
            None => {
                // A lone broker must not try to mesh with anything on the box.
                cmd.env("QUEEN_MESH_PEERS", "")
                    .env("QUEEN_MESH_PORT", free_port()?.to_string());
            }
        }
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting broker {}", spec.bin.display()))?;
        let pid = child.id().context("broker exited at once")?;
        let broker = Self {
            child: Some(child),
            pid,
            url: format!("http://127.0.0.1:{port}"),
            log,
        };
        broker.wait_healthy(Duration::from_secs(60)).await?;
        Ok(broker)
    }

    async fn wait_healthy(&self, within: Duration) -> Result<()> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()?;
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(r) = http.get(format!("{}/health", self.url)).send().await {
                if r.status().is_success() {
                    return Ok(());
                }
            }
            if crate::procstat::cpu_seconds(self.pid).is_none() {
                bail!("broker exited during start; log: {}", tail(&self.log));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!(
            "broker not healthy within {within:?}; log: {}",
            tail(&self.log)
        )
    }

    /// SIGTERM, up to 10 s for a clean exit, then SIGKILL.
    pub async fn stop(mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(self.pid.to_string())
            .status();
        if tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}
