//! `TestCluster`: several brokers on one database, joined by the TCP mesh on loopback.

use std::collections::HashMap;
use std::time::Duration;

use crate::broker::base_env;
use crate::{TestBroker, TestDb};

/// Returns a loopback port that was free a moment ago.
pub fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Brokers `node-0 … node-N` with mesh ports on loopback, each a peer of the
/// others (`node-j@127.0.0.1:port`, so strict mode knows every peer's id).
#[derive(Debug)]
pub struct TestCluster {
    brokers: Vec<Option<TestBroker>>,
    /// The environment each broker was started with (to restart one).
    pub envs: Vec<HashMap<String, String>>,
    pub mesh_ports: Vec<u16>,
}

impl TestCluster {
    /// Starts `n` meshed brokers on `db`, with `extra` environment for all of them.
    pub async fn start(n: usize, db: &TestDb, extra: &[(&str, &str)]) -> anyhow::Result<Self> {
        let mesh_ports = (0..n)
            .map(|_| free_port())
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut envs = Vec::new();
        for (i, port) in mesh_ports.iter().enumerate() {
            let mut env = base_env(db);
            let peers: Vec<String> = mesh_ports
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(j, p)| format!("node-{j}@127.0.0.1:{p}"))
                .collect();
            env.insert("QUEEN_SERVER_ID".into(), format!("node-{i}"));
            env.insert("QUEEN_MESH_PORT".into(), port.to_string());
            env.insert("QUEEN_MESH_PEERS".into(), peers.join(","));
            env.insert("QUEEN_SYNC_HEARTBEAT_MS".into(), "200".into());
            for (k, v) in extra {
                env.insert((*k).to_owned(), (*v).to_owned());
            }
            envs.push(env);
        }
        let mut brokers = Vec::new();
        for env in &envs {
            let b = TestBroker::start_env(env.clone()).await?;
            b.wait_healthy(Duration::from_secs(20)).await?;
            brokers.push(Some(b));
        }
        Ok(Self {
            brokers,
            envs,
            mesh_ports,
        })
    }

    /// Waits until every broker reports every peer connected on its stats surface.
    pub async fn wait_mesh_up(&self, limit: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let mut all = true;
            for b in self.brokers.iter().flatten() {
                let (_, s) = b.get("/api/v1/system/shared-state").await;
                let want = s["peers"].as_array().map_or(0, Vec::len);
                if s["peersConnected"].as_u64() != Some(want as u64) || want == 0 {
                    all = false;
                }
            }
            if all {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!("mesh not up after {limit:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Broker `i`; panics if it is stopped.
    pub fn node(&self, i: usize) -> &TestBroker {
        self.brokers[i].as_ref().expect("node is running")
    }

    /// Stops broker `i` (its HTTP and mesh ports close).
    pub async fn stop(&mut self, i: usize) {
        if let Some(b) = self.brokers[i].take() {
            b.stop().await;
        }
    }

    /// Starts broker `i` again with the environment it had.
    pub async fn start_node(&mut self, i: usize) -> anyhow::Result<()> {
        let b = TestBroker::start_env(self.envs[i].clone()).await?;
        b.wait_healthy(Duration::from_secs(20)).await?;
        self.brokers[i] = Some(b);
        Ok(())
    }
}
