//! `queen-bench suite`: the plain-SQL baselines and every broker scenario in
//! one run, a table and a JSON report at the end.
//!
//! With `--broker-bin` every scenario gets a fresh database and a freshly
//! started broker (a copy of the binary, so a rebuild during the run cannot
//! mix builds); with `--url` the scenarios share an external broker
//! (`--broker-pid` for its CPU and memory, `--db` for its database).
//!
//! Scenario cases are written as `/`-separated tokens: `b` batch, `n`
//! producers, `c` consumers (per group), `p` partitions, `g` consumer groups,
//! `m` message cap, `s` seconds cap, `r` offered rate (`rmax`, `r50000`, or
//! `r50%` = half the flat-out rate of the same case).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context as _, Result};
use serde::Serialize;

use crate::api::Api;
use crate::broker::{Broker, BrokerSpec};
use crate::cases::{self, System};
use crate::meter::{Resources, Stopped};
use crate::peers::{Peer, PeerArgs, Session};
use crate::pg::{Monitor, PgArgs};
use crate::procstat;
use crate::results::{ScenarioResult, SuiteReport};

mod case;
mod facts;
mod queues;
mod sql;
mod wake;

pub use case::{parse_case, Case, Rate};
use facts::{git, machine_facts};
pub use queues::{drain_all, queue_name, warm_partitions};
use sql::sql_case;
use wake::{wake_mesh, wake_same};

#[derive(Debug, Clone, clap::Args, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SuiteConfig {
    /// Broker binary to start for each scenario (e.g. target/release/queen-server).
    #[arg(long, conflicts_with = "url")]
    pub broker_bin: Option<PathBuf>,
    /// An already running broker instead of --broker-bin.
    #[arg(long)]
    pub url: Option<String>,
    /// Pid of the external broker (for CPU and RSS).
    #[arg(long, requires = "url")]
    pub broker_pid: Option<u32>,
    /// Database of the external broker (for pg_stat_database); also where the
    /// SQL baselines run when given.
    #[arg(long)]
    pub db: Option<String>,
    /// Second external broker meshed with --url, for the cross-broker wake test.
    #[arg(long, requires = "url")]
    pub url_b: Option<String>,
    /// DB_POOL_SIZE of the brokers the suite starts.
    #[arg(long, default_value_t = 32)]
    pub pool_size: u32,
    /// Extra broker environment, KEY=VALUE (repeatable).
    #[arg(long = "broker-env", value_parser = parse_kv)]
    pub broker_env: Vec<(String, String)>,
    #[command(flatten)]
    pub pg: PgArgs,
    /// Systems every push, pop-ack, e2e and fan-out case runs on, in this
    /// order: queen, rabbitmq, nats. A peer that does not answer at the start
    /// is skipped with a line saying so.
    #[arg(long, value_delimiter = ',', default_value = "queen,rabbitmq,nats")]
    pub systems: Vec<String>,
    #[command(flatten)]
    pub peers: PeerArgs,
    /// Which groups of scenarios to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "sql,push,pop-ack,e2e,fanout,wake,wake-mesh"
    )]
    pub scenarios: Vec<String>,
    /// Plain-SQL baselines: rows/bB/cC/pP, commit/cC/pP, segment/bB/cC/pP.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "rows/b100/c16/p64,commit/c64/p64,segment/b100/c16/p64"
    )]
    pub sql_cases: Vec<String>,
    /// Push cases bB/nN/pP (also `pnew`, `anon`; `bin` or `binz` write
    /// Queen's pushes as the binary body of the 2.6 clients, plain or as
    /// zstd frames, for a side-by-side with the JSON body).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "b100/n16/p64,b100/n16/p1,b100/n16/p10000,b10/n16/p64,b1/n64/p64"
    )]
    pub push_cases: Vec<String>,
    /// Pre-filled queue (m messages) drained by c consumers with pop batch b.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "b100/c16/p64,b10/c16/p64"
    )]
    pub pop_ack_cases: Vec<String>,
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "b100/n16/c16/p64/rmax,b100/n16/c16/p64/r50000,b100/n16/c16/p64/r50%,b100/n16/c16/p10000/rmax"
    )]
    pub e2e_cases: Vec<String>,
    #[arg(long, value_delimiter = ',', default_value = "b100/n8/g4/c4/p64")]
    pub fanout_cases: Vec<String>,
    /// Default seconds cap of each scenario (the `s` token overrides).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Extra seconds consumers get after the producers stop.
    #[arg(long, default_value_t = 15.0)]
    pub drain_seconds: f64,
    /// Default message cap per push/e2e scenario (the `m` token overrides).
    #[arg(long, default_value_t = 2_000_000)]
    pub messages: u64,
    /// Messages pre-filled for pop-ack and pushed in fan-out (`m` overrides).
    #[arg(long, default_value_t = 200_000)]
    pub fill_messages: u64,
    #[arg(long, default_value_t = 256)]
    pub payload_bytes: usize,
    /// Wake-latency samples per wake scenario.
    #[arg(long, default_value_t = 200)]
    pub wake_samples: u32,
    /// Pause between parking the pop and pushing, in ms.
    #[arg(long, default_value_t = 30)]
    pub wake_park_ms: u64,
    /// Record the busiest statements of each scenario (`pg_stat_statements`,
    /// which the server must preload; use `track = all` to see the
    /// statements inside functions) and its functions' counters in the report.
    #[arg(long)]
    pub pg_statements: bool,
    /// Longest wait for PostgreSQL's statistics to settle after a scenario.
    #[arg(long, default_value_t = 5000)]
    pub pg_settle_ms: u64,
    /// Where run directories (broker logs, report.json) go.
    #[arg(long, default_value = "bench-results")]
    pub out_dir: PathBuf,
    /// Also write the report here.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
    /// A previous report to compare with.
    #[arg(long)]
    pub baseline_json: Option<PathBuf>,
    /// Throughput drop (percent) that counts as a regression.
    #[arg(long, default_value_t = 10.0)]
    pub regression_pct: f64,
    /// p99 rise (percent, and at least 1 ms) that counts as a regression.
    #[arg(long, default_value_t = 50.0)]
    pub latency_regression_pct: f64,
    /// Exit non-zero when the comparison finds a regression.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// Free text stored in the report, e.g. which build the broker binary is.
    #[arg(long)]
    pub build_note: Option<String>,
    /// Keep the scratch databases.
    #[arg(long)]
    pub keep_dbs: bool,
    #[arg(long, default_value_t = 30_000)]
    pub request_timeout_ms: u64,
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))
}

/// Where a Queen scenario runs.
pub struct Env {
    pub api: Api,
    pub pid: Option<u32>,
    pub db: String,
    broker: Option<Broker>,
    owned_db: bool,
    pub idle_rss_mb: Option<f64>,
}

pub struct Suite {
    pub cfg: SuiteConfig,
    pub monitor: Monitor,
    spec: Option<BrokerSpec>,
    run_id: String,
    counter: u32,
    /// Sessions to the peers that answered at the start of the run.
    peers: Vec<(Peer, Arc<Session>)>,
    /// The systems each load case runs on (unreachable peers left out).
    systems: Vec<System>,
}

fn rss_mb(pid: Option<u32>) -> Option<f64> {
    pid.and_then(procstat::memory)
        .map(|m| m.rss as f64 / (1024.0 * 1024.0))
}

impl Suite {
    fn api(&self, url: &str) -> Result<Api> {
        Api::new(url, Duration::from_millis(self.cfg.request_timeout_ms))
    }

    async fn scratch_db(&mut self, what: &str) -> Result<String> {
        self.counter += 1;
        let db = format!("queen_bench_{}_{}_{what}", self.run_id, self.counter)
            .replace(['-', '/', '%'], "_");
        self.monitor.create_database(&db).await?;
        Ok(db)
    }

    /// The session to `peer` opened at the start of the run.
    pub fn session(&self, peer: Peer) -> Result<Arc<Session>> {
        self.peers
            .iter()
            .find(|(p, _)| *p == peer)
            .map(|(_, s)| Arc::clone(s))
            .with_context(|| format!("{} is not connected", peer.name()))
    }

    /// A broker for one scenario: fresh database and process, or the external one.
    pub async fn env(&mut self, name: &str) -> Result<Env> {
        let Some(spec) = self.spec.clone() else {
            let url = self
                .cfg
                .url
                .clone()
                .context("--url or --broker-bin is required")?;
            let api = self.api(&url)?;
            api.check_reachable().await?;
            return Ok(Env {
                api,
                pid: self.cfg.broker_pid,
                db: self.cfg.db.clone().unwrap_or_default(),
                broker: None,
                owned_db: false,
                idle_rss_mb: None,
            });
        };
        let db = self.scratch_db(name).await?;
        let broker = match Broker::start(&spec, &self.cfg.pg, &db, &db, None).await {
            Ok(b) => b,
            Err(e) => {
                let _ = self.monitor.drop_database(&db).await;
                return Err(e);
            }
        };
        // Let the fresh broker settle, then take its idle footprint.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let pid = Some(broker.pid);
        Ok(Env {
            api: self.api(&broker.url)?,
            pid,
            idle_rss_mb: rss_mb(pid),
            db,
            broker: Some(broker),
            owned_db: true,
        })
    }

    pub async fn release(&self, env: Env) {
        if let Some(b) = env.broker {
            b.stop().await;
        }
        if env.owned_db && !self.cfg.keep_dbs {
            if let Err(e) = self.monitor.drop_database(&env.db).await {
                eprintln!("warning: {e:#}");
            }
        }
    }

    /// Ends a measurement: RSS two seconds after the load, then the broker is
    /// stopped (its backends flush their statistics on exit, so the deltas
    /// are complete), then the statistics are read.
    pub async fn finish(
        &self,
        env: &mut Env,
        stopped: Stopped,
        seconds: Option<f64>,
    ) -> Result<(Resources, Option<f64>)> {
        let mut rss_after = None;
        if env.pid.is_some() {
            tokio::time::sleep(Duration::from_secs(2)).await;
            rss_after = rss_mb(env.pid);
        }
        if let Some(b) = env.broker.take() {
            b.stop().await;
        }
        let res = stopped
            .finish(&self.monitor, &env.db, self.settle(), seconds)
            .await?;
        Ok((res, rss_after))
    }

    /// Before a measurement, after unmeasured preparation: a managed broker is
    /// restarted on the same database, so the preparation's statistics are
    /// flushed and the measured broker starts clean; an external one only
    /// waits for the statistics to settle.
    pub async fn restart(&self, env: &mut Env) -> Result<()> {
        let Some(spec) = &self.spec else {
            self.monitor.settle(&env.db, self.settle()).await?;
            return Ok(());
        };
        if let Some(b) = env.broker.take() {
            b.stop().await;
        }
        let name = format!("{}_2", env.db);
        let broker = Broker::start(spec, &self.cfg.pg, &env.db, &name, None).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        env.api = self.api(&broker.url)?;
        env.pid = Some(broker.pid);
        env.broker = Some(broker);
        self.monitor.settle(&env.db, self.settle()).await?;
        Ok(())
    }

    pub fn settle(&self) -> Duration {
        Duration::from_millis(self.cfg.pg_settle_ms)
    }

    pub fn seconds(&self, c: &Case) -> f64 {
        c.s.unwrap_or(self.cfg.seconds)
    }
}

pub async fn run_suite(cfg: SuiteConfig) -> Result<bool> {
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let run_id = format!("{started_unix}");
    let run_dir = cfg.out_dir.join(format!("run-{run_id}"));
    std::fs::create_dir_all(&run_dir).with_context(|| format!("creating {}", run_dir.display()))?;
    let mut monitor = Monitor::connect(&cfg.pg).await?;
    if cfg.pg_statements {
        monitor.enable_statements().await?;
    }
    let systems = cfg
        .systems
        .iter()
        .map(|s| System::parse(s))
        .collect::<Result<Vec<_>>>()?;

    let spec = match &cfg.broker_bin {
        Some(bin) => {
            // Run a private copy: the original may be rebuilt while we measure.
            let copy = run_dir.join("queen-server");
            std::fs::copy(bin, &copy)
                .with_context(|| format!("copying broker binary {}", bin.display()))?;
            Some(BrokerSpec {
                bin: copy,
                pool_size: cfg.pool_size,
                work_dir: run_dir.clone(),
                env: cfg.broker_env.clone(),
            })
        }
        None if cfg.url.is_some() || !systems.contains(&System::Queen) => None,
        None => bail!("give --broker-bin PATH or --url URL (or leave queen out of --systems)"),
    };

    let mut report = SuiteReport {
        tool: format!("queen-bench {}", env!("CARGO_PKG_VERSION")),
        started_unix,
        git_commit: git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into()),
        git_dirty_server: git(&["status", "--porcelain", "crates/queen-server"])
            .is_some_and(|s| !s.trim().is_empty()),
        broker_bin: cfg.broker_bin.as_ref().map(|p| p.display().to_string()),
        build_note: cfg.build_note.clone(),
        machine: machine_facts(&monitor).await,
        settings: serde_json::to_value(&cfg)?,
        ..SuiteReport::default()
    };
    eprintln!(
        "queen-bench suite: commit {}{}, run dir {}",
        report.git_commit,
        if report.git_dirty_server {
            " (crates/queen-server has uncommitted changes)"
        } else {
            ""
        },
        run_dir.display()
    );

    let peers = cases::open_peers(&systems, &cfg.peers, &mut report.skipped).await;
    let systems: Vec<System> = systems
        .into_iter()
        .filter(|s| match s {
            System::Queen => true,
            System::Peer(p) => peers.iter().any(|(q, _)| q == p),
        })
        .collect();
    let mut suite = Suite {
        cfg,
        monitor,
        spec,
        run_id,
        counter: 0,
        peers,
        systems,
    };
    let chosen = suite.cfg.scenarios.clone();
    let wants = |s: &str| chosen.iter().any(|x| x == s || x == "all");

    if wants("sql") {
        for text in suite.cfg.sql_cases.clone() {
            let r = sql_case(&mut suite, &text).await;
            push_result(&mut report, r, &text, "sql");
        }
    }
    // Each case runs on every system in turn, so the systems of one case are
    // measured minutes apart rather than a whole suite apart.
    let systems = suite.systems.clone();
    for (group, fanout) in [
        ("push", false),
        ("pop-ack", false),
        ("e2e", false),
        ("fanout", true),
    ] {
        if !wants(group) {
            continue;
        }
        let texts = match group {
            "push" => suite.cfg.push_cases.clone(),
            "pop-ack" => suite.cfg.pop_ack_cases.clone(),
            "e2e" => suite.cfg.e2e_cases.clone(),
            _ => suite.cfg.fanout_cases.clone(),
        };
        for text in texts {
            for &system in &systems {
                let r = match group {
                    "push" => cases::push_case(&mut suite, system, &text).await,
                    "pop-ack" => cases::pop_ack_case(&mut suite, system, &text).await,
                    _ => cases::live_case(&mut suite, system, &report, &text, fanout).await,
                };
                let id = format!("{}{group}/{text}", system.prefix());
                push_result(&mut report, r, &id, group);
            }
        }
    }
    if wants("wake") {
        let r = wake_same(&mut suite).await;
        push_result(&mut report, r, "wake/same", "wake");
    }
    if wants("wake-mesh") {
        let r = wake_mesh(&mut suite).await;
        push_result(&mut report, r, "wake-mesh/two-brokers", "wake-mesh");
    }

    report.compute_ratios();
    report.compute_targets();
    if let Some(path) = &suite.cfg.baseline_json {
        let previous = SuiteReport::read_json(path)?;
        report.compare(
            &previous,
            suite.cfg.regression_pct,
            suite.cfg.latency_regression_pct,
        );
    }
    println!("{}", report.table());
    let path = run_dir.join("report.json");
    report.write_json(&path)?;
    report.write_json(&suite.cfg.out_dir.join("latest.json"))?;
    eprintln!("wrote {}", path.display());
    if let Some(p) = &suite.cfg.json_out {
        report.write_json(p)?;
        eprintln!("wrote {}", p.display());
    }
    let failed = report.results.iter().filter(|r| r.error.is_some()).count();
    let regressions = report.comparison.iter().filter(|c| c.regression).count();
    if failed > 0 {
        eprintln!("{failed} scenario(s) failed");
    }
    Ok(failed == 0 && !(suite.cfg.fail_on_regression && regressions > 0))
}

fn push_result(report: &mut SuiteReport, r: Result<ScenarioResult>, id: &str, kind: &str) {
    match r {
        Ok(mut r) => {
            if let Some(res) = r.resources.clone() {
                if r.messages > 0 && !r.kind.starts_with("wake") {
                    let per = |v: i64| v as f64 / r.messages as f64;
                    let (rows, commits) = (per(res.pg_rows_written), per(res.pg_commits));
                    r.detail("pgRowsPerMessage", rows);
                    r.detail("pgCommitsPerMessage", commits);
                    if let Some(cpu) = res.broker_cpu_s {
                        r.detail("brokerCpuMicrosPerMessage", 1e6 * cpu / r.messages as f64);
                    }
                    r.detail(
                        "pgCpuMicrosPerMessage",
                        1e6 * res.pg_cpu_s / r.messages as f64,
                    );
                }
            }
            eprintln!(
                "== {}: {:.0} msg/s, {} p50 {:.2} ms p99 {:.2} ms",
                r.id,
                r.msg_per_s,
                r.latency_of,
                r.latency.p50_ms.unwrap_or(0.0),
                r.latency.p99_ms.unwrap_or(0.0)
            );
            report.results.push(r);
        }
        Err(e) => {
            eprintln!("== {id}: FAILED: {e:#}");
            report.results.push(ScenarioResult::failed(
                id.to_owned(),
                kind,
                format!("{e:#}"),
            ));
        }
    }
}
