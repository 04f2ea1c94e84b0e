//! Three real `queen-server` processes on loopback against one fresh database.
//! Each broker reaches PostgreSQL through its own [`FaultProxy`] (one per
//! server with a standby: both in one `DATABASE_URL`), and each
//! broker's mesh listener sits behind a proxy too, so the peers dial proxies and
//! the mesh can be cut without touching HTTP or the database.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use queen_testkit::{free_port, FaultProxy};

use crate::pgserver::DbTarget;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::schedule::{Target, BROKERS};

/// How brokers are started.
#[derive(Debug, Clone)]
pub struct BrokerSpec {
    pub bin: PathBuf,
    pub work_dir: PathBuf,
    /// `DB_POOL_SIZE` of each broker: 3 × pool must fit `max_connections`.
    pub pool_size: u32,
    pub log_level: String,
}

/// One broker: its process (while alive), ports, proxies and log.
#[derive(Debug)]
pub struct Node {
    pub idx: usize,
    pub url: String,
    env: Vec<(String, String)>,
    child: Option<Child>,
    pub log: PathBuf,
    starts: u32,
    /// One per PostgreSQL address slot (two with a standby).
    pg_proxies: Vec<FaultProxy>,
    mesh_proxy: FaultProxy,
    /// Exits nobody asked for (crash, panic, refused start), with their status.
    pub unexpected_exits: Vec<String>,
}

#[derive(Debug)]
pub struct Cluster {
    pub nodes: Vec<Node>,
    spec: BrokerSpec,
    http: reqwest::Client,
    t0: Instant,
    /// Broker to try first for the next maintenance switch.
    next_admin: usize,
}

/// Time a (re)started broker has to open its HTTP port.
const LISTEN_LIMIT: Duration = Duration::from_secs(30);

impl Node {
    fn spawn(&mut self, spec: &BrokerSpec, t0: Instant) -> Result<()> {
        self.starts += 1;
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("open {}", self.log.display()))?;
        writeln!(
            log,
            "==== queen-chaos: start #{} of broker {} at t={:.3}s ====",
            self.starts,
            self.idx,
            t0.elapsed().as_secs_f64()
        )?;
        let child = Command::new(&spec.bin)
            .arg("serve")
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawn {}", spec.bin.display()))?;
        self.child = Some(child);
        Ok(())
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Notices a process that exited by itself; returns true while it runs.
    pub fn poll_alive(&mut self, t0: Instant) -> bool {
        let Some(child) = self.child.as_mut() else {
            return false;
        };
        match child.try_wait() {
            Ok(None) => true,
            Ok(Some(status)) => {
                self.unexpected_exits.push(format!(
                    "broker {} exited by itself at t={:.1}s with {status} (see {})",
                    self.idx,
                    t0.elapsed().as_secs_f64(),
                    self.log.display()
                ));
                self.child = None;
                false
            }
            Err(_) => true,
        }
    }

    /// SIGKILL and reap.
    pub async fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
        }
    }
}

/// How a broker reaches its database: `PG_*` through its one proxy, or
/// every proxy in one multi-host `DATABASE_URL` that only takes a server
/// accepting writes (`target_session_attrs=read-write`), or, without
/// proxies, the target's own URI (a pg_auto_failover formation's).
fn db_env(db: &DbTarget, proxies: &[FaultProxy]) -> Vec<(String, String)> {
    if let (Some(url), []) = (&db.url, proxies) {
        return vec![("DATABASE_URL".into(), url.clone())];
    }
    if let [one] = proxies {
        return vec![
            ("PG_HOST".into(), "127.0.0.1".into()),
            ("PG_PORT".into(), one.addr().port().to_string()),
            ("PG_USER".into(), db.user.clone()),
            ("PG_PASSWORD".into(), String::new()),
            ("PG_DB".into(), db.name.clone()),
        ];
    }
    let hosts: Vec<String> = proxies
        .iter()
        .map(|p| format!("127.0.0.1:{}", p.addr().port()))
        .collect();
    vec![(
        "DATABASE_URL".into(),
        format!(
            "postgresql://{}@{}/{}?target_session_attrs=read-write",
            db.user,
            hosts.join(","),
            db.name
        ),
    )]
}

impl Cluster {
    /// Starts the proxies and the three brokers against database `db` on
    /// `upstreams` (the server of `db`, or a primary and its standby), and
    /// waits until every broker is healthy and sees both peers on the mesh.
    pub async fn start(
        spec: BrokerSpec,
        db: &DbTarget,
        upstreams: &[SocketAddr],
        t0: Instant,
    ) -> Result<Self> {
        if let Some(u) = upstreams.iter().find(|u| !u.ip().is_loopback()) {
            bail!("PostgreSQL must be on loopback for the fault proxies, not {u}");
        }
        let secret = uuid::Uuid::new_v4().simple().to_string();
        let mut mesh_ports = Vec::new();
        let mut mesh_proxies = Vec::new();
        for _ in 0..BROKERS {
            let port = free_port()?;
            mesh_proxies.push(FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], port))).await?);
            mesh_ports.push(port);
        }
        let proxy_ports: Vec<u16> = mesh_proxies.iter().map(|p| p.addr().port()).collect();
        let mut nodes = Vec::new();
        for (idx, mesh_proxy) in mesh_proxies.into_iter().enumerate() {
            let mut pg_proxies = Vec::new();
            for u in upstreams {
                pg_proxies.push(FaultProxy::start(*u).await?);
            }
            let http_port = free_port()?;
            let spool_dir = spec.work_dir.join(format!("spool-{idx}"));
            std::fs::create_dir_all(&spool_dir)?;
            let peers: Vec<String> = (0..BROKERS)
                .filter(|j| *j != idx)
                .map(|j| format!("127.0.0.1:{}", proxy_ports[j]))
                .collect();
            let mut env = vec![
                ("HOST".into(), "127.0.0.1".into()),
                ("PORT".into(), http_port.to_string()),
                ("DB_POOL_SIZE".into(), spec.pool_size.to_string()),
                ("DB_CONNECTION_TIMEOUT".into(), "1000".into()),
                ("QUEEN_SERVER_ID".into(), format!("chaos-{idx}")),
                ("QUEEN_MESH_PORT".into(), mesh_ports[idx].to_string()),
                ("QUEEN_MESH_PEERS".into(), peers.join(",")),
                ("QUEEN_SYNC_SECRET".into(), secret.clone()),
                ("QUEEN_SYNC_HEARTBEAT_MS".into(), "200".into()),
                ("FILE_BUFFER_DIR".into(), spool_dir.display().to_string()),
                ("FILE_BUFFER_FLUSH_MS".into(), "50".into()),
                // small replay batches: a kill after an outage lands mid-replay more often
                ("FILE_BUFFER_MAX_BATCH".into(), "10".into()),
                ("POP_WAIT_MAX_INTERVAL_MS".into(), "500".into()),
                ("LOG_LEVEL".into(), spec.log_level.clone()),
                ("RUST_BACKTRACE".into(), "1".into()),
                ("NO_COLOR".into(), "1".into()),
            ];
            env.extend(db_env(db, &pg_proxies));
            nodes.push(Node {
                idx,
                url: format!("http://127.0.0.1:{http_port}"),
                env,
                child: None,
                log: spec.work_dir.join(format!("broker-{idx}.log")),
                starts: 0,
                pg_proxies,
                mesh_proxy,
                unexpected_exits: Vec::new(),
            });
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(2))
            .build()?;
        let mut cluster = Self {
            nodes,
            spec,
            http,
            t0,
            next_admin: 0,
        };
        for i in 0..BROKERS {
            cluster.nodes[i].spawn(&cluster.spec, t0)?;
        }
        for i in 0..BROKERS {
            cluster.wait_healthy(i, LISTEN_LIMIT).await?;
        }
        cluster.wait_mesh(Duration::from_secs(30)).await?;
        Ok(cluster)
    }

    pub fn work_dir(&self) -> &std::path::Path {
        &self.spec.work_dir
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url.clone()).collect()
    }

    /// Waits until broker `i` answers `/health` with 200.
    pub async fn wait_healthy(&mut self, i: usize, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        let url = format!("{}/health", self.nodes[i].url);
        loop {
            if let Ok(r) = self.http.get(&url).send().await {
                if r.status().is_success() {
                    return Ok(());
                }
            }
            if !self.nodes[i].poll_alive(self.t0) {
                bail!(
                    "broker {i} is not running: {}",
                    self.nodes[i].unexpected_exits.join("; ")
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "broker {i} not healthy after {limit:?} (log: {})",
                    self.nodes[i].log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until broker `i` answers HTTP at all (health may be 503 while its
    /// database link is cut).
    async fn wait_listening(&mut self, i: usize, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        let url = format!("{}/health", self.nodes[i].url);
        loop {
            if self.http.get(&url).send().await.is_ok() {
                return Ok(());
            }
            if !self.nodes[i].poll_alive(self.t0) {
                bail!("broker {i} exited while starting");
            }
            if Instant::now() >= deadline {
                bail!("broker {i} did not listen within {limit:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until every broker reports both peers connected.
    pub async fn wait_mesh(&self, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            let mut up = 0;
            for n in &self.nodes {
                let url = format!("{}/api/v1/system/shared-state", n.url);
                if let Ok(r) = self.http.get(&url).send().await {
                    if let Ok(v) = r.json::<serde_json::Value>().await {
                        if v["peersConnected"].as_u64() == Some((BROKERS - 1) as u64) {
                            up += 1;
                        }
                    }
                }
            }
            if up == BROKERS {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!("mesh not fully connected after {limit:?} ({up} of {BROKERS} brokers see both peers)");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn targets(t: Target) -> Vec<usize> {
        match t {
            Target::One(i) => vec![i],
            Target::All => (0..BROKERS).collect(),
        }
    }

    pub fn cut_pg(&self, t: Target) {
        for i in Self::targets(t) {
            self.nodes[i].pg_proxies.iter().for_each(FaultProxy::cut);
        }
    }

    pub fn restore_pg(&self, t: Target) {
        for i in Self::targets(t) {
            self.nodes[i]
                .pg_proxies
                .iter()
                .for_each(FaultProxy::restore);
        }
    }

    /// Points every broker's address `slot` at `upstream` (new connections;
    /// open ones stay where they are).
    pub fn retarget_pg(&self, slot: usize, upstream: SocketAddr) {
        for n in &self.nodes {
            if let Some(p) = n.pg_proxies.get(slot) {
                p.retarget(upstream);
            }
        }
    }

    pub fn cut_mesh(&self) {
        for n in &self.nodes {
            n.mesh_proxy.cut();
        }
    }

    pub fn restore_mesh(&self) {
        for n in &self.nodes {
            n.mesh_proxy.restore();
        }
    }

    pub async fn kill(&mut self, i: usize) {
        self.nodes[i].kill9().await;
    }

    /// Starts broker `i` again (same ports, same spool) and waits until it
    /// listens; retries the start a few times if the port is still held.
    pub async fn restart(&mut self, i: usize) -> Result<()> {
        if self.nodes[i].is_running() {
            return Ok(());
        }
        let mut last = None;
        for _attempt in 0..3 {
            let exits = self.nodes[i].unexpected_exits.len();
            self.nodes[i].spawn(&self.spec, self.t0)?;
            match self.wait_listening(i, LISTEN_LIMIT).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    // a start refused (e.g. port in TIME_WAIT) is retried, not a finding
                    self.nodes[i].unexpected_exits.truncate(exits);
                    self.nodes[i].kill9().await;
                    last = Some(e);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("restart of broker {i} failed")))
    }

    /// Switches a maintenance mode through the first running broker that
    /// accepts it (round robin over the brokers between calls).
    pub async fn maintenance(&mut self, pop: bool, on: bool) -> Result<usize> {
        let path = if pop {
            "/api/v1/system/maintenance/pop"
        } else {
            "/api/v1/system/maintenance"
        };
        let mut last = String::new();
        for k in 0..BROKERS {
            let i = (self.next_admin + k) % BROKERS;
            if !self.nodes[i].is_running() {
                continue;
            }
            let r = self
                .http
                .post(format!("{}{path}", self.nodes[i].url))
                .json(&serde_json::json!({ "enabled": on }))
                .send()
                .await;
            match r {
                Ok(resp) if resp.status().is_success() => {
                    self.next_admin = i + 1;
                    return Ok(i);
                }
                Ok(resp) => last = format!("broker {i} answered {}", resp.status()),
                Err(e) => last = format!("broker {i}: {e}"),
            }
        }
        bail!("no broker switched the maintenance mode ({last})")
    }

    /// Undoes every fault: links restored, dead brokers started, maintenance off.
    pub async fn heal(&mut self) -> Result<()> {
        self.restore_pg(Target::All);
        self.restore_mesh();
        for i in 0..BROKERS {
            self.nodes[i].poll_alive(self.t0);
            if !self.nodes[i].is_running() {
                self.restart(i).await?;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        for pop in [false, true] {
            while let Err(e) = self.maintenance(pop, false).await {
                if Instant::now() >= deadline {
                    return Err(e.context("switching maintenance off after the traffic phase"));
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        Ok(())
    }

    /// Checks every broker for exits nobody asked for.
    pub fn poll(&mut self) {
        for n in &mut self.nodes {
            n.poll_alive(self.t0);
        }
    }

    pub fn unexpected_exits(&self) -> Vec<String> {
        self.nodes
            .iter()
            .flat_map(|n| n.unexpected_exits.iter().cloned())
            .collect()
    }

    /// SIGKILLs every broker (end of run or failure).
    pub async fn shutdown(&mut self) {
        self.poll();
        for n in &mut self.nodes {
            n.kill9().await;
        }
    }
}
