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
use tokio::time::Instant;

use crate::api::{AckItem, Api, PopParams};
use crate::baseline;
use crate::broker::{free_port, Broker, BrokerSpec, MeshSide};
use crate::cases::{self, System};
use crate::load::{self, RunState};
use crate::meter::{Meter, Resources, Stopped};
use crate::peers::{Peer, PeerArgs, Session};
use crate::pg::{Monitor, PgArgs};
use crate::procstat;
use crate::results::{ScenarioResult, SuiteReport};
use crate::stats::Latencies;

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

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    Max,
    Fixed(f64),
    HalfOfMax(f64),
}

/// A parsed case: `b100/n16/c16/p64/r50%`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Case {
    pub head: Option<String>,
    pub b: Option<u32>,
    pub n: Option<u32>,
    pub c: Option<u32>,
    pub p: Option<u32>,
    pub g: Option<u32>,
    pub m: Option<u64>,
    pub s: Option<f64>,
    pub r: Option<Rate>,
}

pub fn parse_case(text: &str) -> Result<Case> {
    let mut case = Case::default();
    for (i, tok) in text.split('/').map(str::trim).enumerate() {
        let Some(key) = tok.chars().next() else {
            bail!("empty token in case {text:?}");
        };
        if i == 0 && tok.len() > 1 && tok != "rmax" && tok.bytes().all(|b| b.is_ascii_alphabetic())
        {
            case.head = Some(tok.to_owned());
            continue;
        }
        let val = &tok[key.len_utf8()..];
        let num = || -> Result<u64> {
            val.parse()
                .with_context(|| format!("bad number in {tok:?} of case {text:?}"))
        };
        let small = || -> Result<u32> { Ok(u32::try_from(num()?)?.max(1)) };
        match key {
            'b' => case.b = Some(small()?),
            'n' => case.n = Some(small()?),
            'c' if !val.is_empty() && val.bytes().all(|b| b.is_ascii_digit()) => {
                case.c = Some(small()?);
            }
            'p' => case.p = Some(small()?),
            'g' => case.g = Some(small()?),
            'm' => case.m = Some(num()?.max(1)),
            's' => {
                case.s = Some(
                    val.parse()
                        .with_context(|| format!("bad seconds in case {text:?}"))?,
                );
            }
            'r' if val == "max" => case.r = Some(Rate::Max),
            'r' if val.ends_with('%') => {
                let pct: f64 = val
                    .trim_end_matches('%')
                    .parse()
                    .with_context(|| format!("bad rate in case {text:?}"))?;
                case.r = Some(Rate::HalfOfMax(pct / 100.0));
            }
            'r' => case.r = Some(Rate::Fixed(num()? as f64)),
            _ => bail!("unknown token {tok:?} in case {text:?}"),
        }
    }
    Ok(case)
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

fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

async fn machine_facts(monitor: &Monitor) -> std::collections::BTreeMap<String, String> {
    let mut m = std::collections::BTreeMap::new();
    m.insert(
        "cpus".into(),
        std::thread::available_parallelism().map_or_else(|_| "?".into(), |n| n.to_string()),
    );
    if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
        if let Some(model) = info
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        {
            m.insert("cpuModel".into(), model);
        }
    }
    if let Ok(info) = std::fs::read_to_string("/proc/meminfo") {
        if let Some(l) = info.lines().next() {
            m.insert(
                "memTotal".into(),
                l.trim_start_matches("MemTotal:").trim().into(),
            );
        }
    }
    for s in [
        "server_version",
        "max_connections",
        "shared_buffers",
        "synchronous_commit",
        "fsync",
        "wal_level",
        "commit_delay",
    ] {
        if let Ok(v) = monitor.server_setting(s).await {
            m.insert(format!("pg.{s}"), v);
        }
    }
    m
}

async fn sql_case(suite: &mut Suite, text: &str) -> Result<ScenarioResult> {
    let case = parse_case(text)?;
    let (kind, kind_name) = match case.head.as_deref() {
        Some("rows") => (baseline::Kind::Rows, "sql-rows"),
        Some("commit") => (baseline::Kind::Commit, "sql-commit"),
        Some("segment") => (baseline::Kind::Segment, "sql-segment"),
        other => bail!("SQL case must start with rows, commit or segment, got {other:?}"),
    };
    let spec = baseline::Spec {
        kind,
        clients: case.c.unwrap_or(16),
        batch: if kind == baseline::Kind::Commit {
            1
        } else {
            case.b.unwrap_or(100)
        },
        partitions: case.p.unwrap_or(64),
        messages: case.m.unwrap_or(suite.cfg.messages),
        seconds: suite.seconds(&case),
        payload_bytes: suite.cfg.payload_bytes,
    };
    let id = match kind {
        baseline::Kind::Commit => format!("sql-commit/c{}/p{}", spec.clients, spec.partitions),
        _ => format!(
            "{kind_name}/b{}/c{}/p{}",
            spec.batch, spec.clients, spec.partitions
        ),
    };
    let (db, owned) = match &suite.cfg.db {
        Some(db) if suite.spec.is_none() => (db.clone(), false),
        _ => (suite.scratch_db("sql").await?, true),
    };
    eprintln!(
        "-- {id}: {} clients, {} msgs per transaction, no broker",
        spec.clients, spec.batch
    );
    let result = async {
        let meter = Meter::start(None, &suite.monitor, &suite.cfg.pg, &db).await?;
        let (out, connections) = baseline::run(&suite.cfg.pg, &db, &spec, &id).await?;
        let stopped = meter.stop();
        drop(connections);
        let res = stopped
            .finish(&suite.monitor, &db, suite.settle(), Some(out.seconds))
            .await?;
        let secs = out.seconds.max(1e-9);
        let mut r = ScenarioResult {
            id: id.clone(),
            kind: kind_name.into(),
            messages: out.messages,
            seconds: out.seconds,
            msg_per_s: out.messages as f64 / secs,
            latency_of: "transaction".into(),
            latency: out.latency,
            commits_per_s: Some(out.transactions as f64 / secs),
            resources: Some(res),
            ..ScenarioResult::default()
        };
        r.detail("clients", spec.clients);
        r.detail("messagesPerTransaction", spec.batch);
        r.detail("transactions", out.transactions);
        anyhow::Ok(r)
    }
    .await;
    if owned && !suite.cfg.keep_dbs {
        let _ = suite.monitor.drop_database(&db).await;
    } else if !owned {
        // Leave nothing behind in a database we do not own.
        if let Ok(c) = suite.cfg.pg.connect(&db).await {
            let _ = c
                .batch_execute("DROP TABLE IF EXISTS bench_rows, bench_segments")
                .await;
        }
    }
    result
}

pub fn queue_name(prefix: &str) -> String {
    format!(
        "bench-{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// Creates the queue and all its partitions (one message each, unmeasured),
/// so a measured run sees steady state rather than partition creation.
pub async fn warm_partitions(
    api: &Api,
    queue: &str,
    partitions: u32,
    payload_bytes: usize,
) -> Result<u64> {
    let run = RunState::new(queue.to_owned(), u64::from(partitions));
    let salt = load::salt(&run.prefix);
    let chunk = 200u64;
    let mut first = 0u64;
    let total = u64::from(partitions);
    while first < total {
        let last = (first + chunk).min(total);
        let mut body = String::from("{\"items\":[");
        for i in first..last {
            if i > first {
                body.push(',');
            }
            body.push_str(&format!(
                "{{\"queue\":\"{queue}\",\"partition\":\"{}\",\"transactionId\":\"{}\",\"payload\":{}}}",
                load::partition_name(i),
                load::txid(&run.prefix, i),
                load::payload_for(payload_bytes, i, salt)
            ));
        }
        body.push_str("]}");
        api.push_raw(body, (last - first) as usize)
            .await
            .context("warming up partitions")?;
        first = last;
    }
    Ok(total)
}

/// Pops and acks everything in the queue (unmeasured), wide pops.
pub async fn drain_all(api: &Api, queue: &str, expected: u64, within: Duration) -> Result<u64> {
    let params = PopParams {
        batch: 1000,
        partitions: 200,
        wait_ms: None,
        consumer_group: None,
    };
    let deadline = Instant::now() + within;
    let mut got = 0;
    let mut empty = 0;
    while got < expected && Instant::now() < deadline {
        let msgs = api.pop(queue, &params).await?;
        if msgs.is_empty() {
            empty += 1;
            if empty > 50 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        got += msgs.len() as u64;
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
        if !acks.is_empty() {
            api.ack_batch(&acks).await?;
        }
    }
    Ok(got)
}

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

async fn wake_same(suite: &mut Suite) -> Result<ScenarioResult> {
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

async fn wake_mesh(suite: &mut Suite) -> Result<ScenarioResult> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_parse() {
        let c = parse_case("b100/n16/c8/p10000/r50%").unwrap();
        assert_eq!(
            (c.b, c.n, c.c, c.p, c.r),
            (
                Some(100),
                Some(16),
                Some(8),
                Some(10000),
                Some(Rate::HalfOfMax(0.5))
            )
        );
        let c = parse_case("commit/c64/p64").unwrap();
        assert_eq!(c.head.as_deref(), Some("commit"));
        assert_eq!(c.c, Some(64));
        assert_eq!(parse_case("b1/rmax").unwrap().r, Some(Rate::Max));
        assert_eq!(
            parse_case("b1/r50000/s2.5/m10").unwrap(),
            Case {
                b: Some(1),
                r: Some(Rate::Fixed(50000.0)),
                s: Some(2.5),
                m: Some(10),
                ..Case::default()
            }
        );
        assert!(parse_case("b100/x3").is_err());
        assert!(parse_case("b100/bx").is_err());
        assert_eq!(parse_case("rows/b1").unwrap().head.as_deref(), Some("rows"));
    }
}
