//! `queen-chaos`: runs three real brokers on loopback against one fresh
//! database, drives producers and consumers through a fault schedule (SIGKILL
//! and restart, PostgreSQL links cut, the mesh cut, consumers paused past their
//! lease), drains, and checks that nothing was lost, doubled or reordered.
//!
//! Exit status: 0 when the checker found no violation, 1 when it found some,
//! 2 when the harness itself could not run (setup failed, interrupted).

mod check;
mod cluster;
mod dbstate;
mod journal;
mod pgserver;
mod rng;
mod schedule;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use clap::Parser;
use queen_testkit::TestDb;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::check::{Extra, SpoolState};
use crate::cluster::{BrokerSpec, Cluster};
use crate::journal::Journal;
use crate::pgserver::{DbTarget, PrivatePg};
use crate::rng::Rng;
use crate::schedule::{Action, Schedule, BROKERS};
use crate::workload::{ConsumerLog, Control, WorkloadConfig};

#[derive(Debug, Parser)]
#[command(
    name = "queen-chaos",
    about = "Fault-injection run of three Queen brokers with a delivery checker"
)]
struct Cli {
    /// Length of the traffic and fault phase (`60s` is the CI run, `30m` the long run).
    /// Up to 2 minutes the fixed short plan is scaled to it; longer runs get a
    /// random plan from --seed.
    #[arg(long, default_value = "60s")]
    duration: String,
    /// Replay a saved schedule (its own `duration` line wins over --duration).
    #[arg(long)]
    schedule: Option<PathBuf>,
    /// Use a random plan even for a short duration.
    #[arg(long)]
    random: bool,
    /// Seed of the random plan and of the workload's choices (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// The broker binary (default: `queen-server` next to this binary).
    #[arg(long)]
    broker_bin: Option<PathBuf>,
    /// Partitions of the test queue.
    #[arg(long, default_value_t = 24)]
    partitions: usize,
    /// Producers; each owns every N-th partition.
    #[arg(long, default_value_t = 3)]
    producers: usize,
    /// Consumer groups.
    #[arg(long, default_value_t = 2)]
    groups: usize,
    /// Consumers per group.
    #[arg(long, default_value_t = 3)]
    consumers: usize,
    /// Target messages per second over all producers.
    #[arg(long, default_value_t = 120.0)]
    rate: f64,
    /// Most fresh messages pushed in the whole run.
    #[arg(long, default_value_t = 2_000_000)]
    max_messages: u64,
    /// Most time the drain after the traffic phase may take (it also gives up
    /// after 60 s without progress).
    #[arg(long, default_value = "10m")]
    drain_timeout: String,
    /// `DB_POOL_SIZE` of each broker.
    #[arg(long, default_value_t = 6)]
    pool_size: u32,
    /// `LOG_LEVEL` of the brokers (their logs go to the work directory).
    #[arg(long, default_value = "info")]
    broker_log_level: String,
    /// Where logs, spools and the report go (default: a new directory under the temp dir).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Keep the work directory and the database even when the run passes.
    #[arg(long)]
    keep: bool,
    /// Run a private PostgreSQL server in the work directory (initdb; as user
    /// `postgres` when run as root), so schedules can restart it (`restart-pg`).
    #[arg(long)]
    private_pg: bool,
}

/// Lease of the test queue in seconds: short, so expiries happen often.
const LEASE_SECS: u64 = 2;
/// Failed acks before the DLQ.
const RETRY_LIMIT: u32 = 2;
/// Most messages per pop.
const MAX_BATCH: u64 = 10;
/// Longest one fault step may take (a restart waits for the broker to listen).
const STEP_LIMIT: Duration = Duration::from_secs(45);
/// The drain gives up when no cursor moved and no spool shrank for this long.
const DRAIN_STALL: Duration = Duration::from_secs(60);

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("queen-chaos: cannot start runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let code = runtime.block_on(async move {
        tokio::select! {
            r = run(cli) => match r {
                Ok(clean) => if clean { ExitCode::SUCCESS } else { ExitCode::from(1) },
                Err(e) => {
                    eprintln!("queen-chaos: harness failed: {e:#}");
                    ExitCode::from(2)
                }
            },
            _ = tokio::signal::ctrl_c() => {
                eprintln!("queen-chaos: interrupted; stopping brokers and dropping the database");
                ExitCode::from(2)
            }
        }
    });
    // the run future (brokers, proxies, database) is dropped by now
    runtime.shutdown_timeout(Duration::from_secs(5));
    code
}

fn default_broker_bin() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locate this binary")?;
    let dir = exe
        .parent()
        .context("this binary has no directory")?
        .to_path_buf();
    Ok(dir.join("queen-server"))
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

/// Runs one whole schedule; returns true when no violation was found.
async fn run(cli: Cli) -> Result<bool> {
    let t0 = Instant::now();
    let seed = cli.seed.unwrap_or_else(clock_seed);
    let mut rng = Rng::new(seed);
    if cli.groups == 0 || cli.consumers == 0 || cli.producers == 0 || cli.partitions == 0 {
        bail!("--groups, --consumers, --producers and --partitions must be at least 1");
    }
    let duration = schedule::parse_duration(&cli.duration)?;
    let drain_timeout = schedule::parse_duration(&cli.drain_timeout)?;
    let plan = match &cli.schedule {
        Some(path) => Schedule::parse(
            &std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?,
        )
        .with_context(|| format!("schedule {}", path.display()))?,
        None if duration <= Duration::from_secs(120) && !cli.random => schedule::short(duration)?,
        None => schedule::random(
            duration,
            &mut rng.fork(1),
            cli.groups,
            cli.consumers,
            cli.private_pg,
        ),
    };
    let bin = match cli.broker_bin.clone() {
        Some(b) => b,
        None => default_broker_bin()?,
    };
    if !bin.is_file() {
        bail!(
            "broker binary {} not found: build it (cargo build -p queen-server) or pass --broker-bin",
            bin.display()
        );
    }
    let work_dir = match &cli.work_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!(
            "queen-chaos-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        )),
    };
    std::fs::create_dir_all(&work_dir).with_context(|| format!("create {}", work_dir.display()))?;
    std::fs::write(work_dir.join("schedule.txt"), plan.to_string())?;

    println!(
        "queen-chaos: seed {seed}, traffic {}, {}",
        schedule::format_duration(plan.duration),
        plan.describe()
    );
    println!("queen-chaos: work directory {}", work_dir.display());

    if !cli.private_pg
        && plan
            .steps
            .iter()
            .any(|s| s.action == schedule::Action::RestartPg)
    {
        bail!("the schedule restarts PostgreSQL: that needs --private-pg");
    }
    let (test_db, private, db) = if cli.private_pg {
        let pg = PrivatePg::start(&work_dir)
            .await
            .context("start a private PostgreSQL")?;
        let target = pg.create_db("queen_chaos").await?;
        println!(
            "queen-chaos: private PostgreSQL on port {} ({})",
            pg.port,
            pg.data.display()
        );
        (None, Some(pg), target)
    } else {
        let t = TestDb::new().await.context("create the test database")?;
        let target = DbTarget {
            host: t.host.clone(),
            port: t.port,
            user: t.user.clone(),
            name: t.name.clone(),
        };
        (Some(t), None, target)
    };
    println!("queen-chaos: database {}", db.name);
    let outcome = run_on(
        &cli,
        seed,
        rng,
        &plan,
        &bin,
        &work_dir,
        &db,
        private.as_ref(),
        drain_timeout,
        t0,
    )
    .await;
    // the private server lives in the work directory: stop it first
    drop(private);
    let clean = match outcome {
        Ok(clean) => clean,
        Err(e) => {
            println!(
                "queen-chaos: run failed; logs kept in {}\n--- schedule ---\n{plan}",
                work_dir.display()
            );
            return Err(e);
        }
    };
    if clean && !cli.keep {
        let _ = std::fs::remove_dir_all(&work_dir);
    } else {
        println!(
            "queen-chaos: logs, spools and report kept in {}",
            work_dir.display()
        );
    }
    if cli.keep {
        if let Some(t) = test_db {
            println!("queen-chaos: database {} kept", db.name);
            std::mem::forget(t);
        }
    }
    println!(
        "queen-chaos: {} in {:.1}s",
        if clean { "PASS" } else { "FAIL" },
        t0.elapsed().as_secs_f64()
    );
    Ok(clean)
}

#[expect(
    clippy::too_many_arguments,
    reason = "the run's settings, resolved once in run()"
)]
async fn run_on(
    cli: &Cli,
    seed: u64,
    mut rng: Rng,
    plan: &Schedule,
    bin: &std::path::Path,
    work_dir: &std::path::Path,
    db: &DbTarget,
    pg: Option<&PrivatePg>,
    drain_timeout: Duration,
    t0: Instant,
) -> Result<bool> {
    let spec = BrokerSpec {
        bin: bin.to_path_buf(),
        work_dir: work_dir.to_path_buf(),
        pool_size: cli.pool_size,
        log_level: cli.broker_log_level.clone(),
    };
    let mut cluster = Cluster::start(spec, db, t0).await?;
    println!(
        "queen-chaos: 3 brokers up and meshed after {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    let result = drive(
        cli,
        seed,
        &mut rng,
        plan,
        &mut cluster,
        db,
        pg,
        drain_timeout,
        t0,
    )
    .await;
    cluster.shutdown().await;
    let (report, schedule_text) = result?;
    let text = report.render();
    println!("{text}");
    std::fs::write(work_dir.join("report.txt"), &text)?;
    if report.violation_count() > 0 {
        println!(
            "queen-chaos: the schedule of this run (seed {seed}); save it to crates/queen-chaos/schedules/ to keep it as a regression:\n{schedule_text}"
        );
    }
    Ok(report.violation_count() == 0)
}

fn group_names(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("g{}", char::from(b'a' + (i % 26) as u8)))
        .collect()
}

#[expect(
    clippy::too_many_arguments,
    reason = "the run's settings, resolved once in run()"
)]
async fn drive(
    cli: &Cli,
    seed: u64,
    rng: &mut Rng,
    plan: &Schedule,
    cluster: &mut Cluster,
    db: &DbTarget,
    pg: Option<&PrivatePg>,
    drain_timeout: Duration,
    t0: Instant,
) -> Result<(check::Report, String)> {
    let cfg = Arc::new(WorkloadConfig {
        queue: "chaos".to_owned(),
        partitions: cli.partitions,
        producers: cli.producers,
        groups: group_names(cli.groups),
        consumers_per_group: cli.consumers,
        rate: cli.rate,
        max_messages: cli.max_messages,
        lease_secs: LEASE_SECS,
        retry_limit: RETRY_LIMIT,
        max_batch: MAX_BATCH,
    });
    let http = workload::http_client()?;
    let urls = Arc::new(cluster.urls());
    workload::configure(&http, &urls[0], &cfg).await?;

    let traffic_start = Instant::now();
    let traffic_end = traffic_start + plan.duration;
    // a hard stop for every worker loop, whatever happens
    let hard_deadline = traffic_end + drain_timeout + Duration::from_secs(90);
    let ctl = Arc::new(Control::new(
        t0,
        hard_deadline,
        cfg.groups.len(),
        cfg.consumers_per_group,
    ));
    let producers: Vec<JoinHandle<Vec<journal::PushEvent>>> = (0..cfg.producers)
        .map(|i| {
            tokio::spawn(workload::producer(
                i,
                cfg.clone(),
                urls.clone(),
                ctl.clone(),
                rng.fork(100 + i as u64),
            ))
        })
        .collect();
    let mut consumers: Vec<JoinHandle<ConsumerLog>> = Vec::new();
    for g in 0..cfg.groups.len() {
        for c in 0..cfg.consumers_per_group {
            consumers.push(tokio::spawn(workload::consumer(
                g,
                c,
                cfg.clone(),
                urls.clone(),
                ctl.clone(),
                rng.fork(1000 + (g * 100 + c) as u64),
            )));
        }
    }

    // the fault schedule; `admin` is a direct connection for terminate-pg
    let admin = db.client().await?;
    let mut next_progress = traffic_start + Duration::from_secs(10);
    for step in &plan.steps {
        let at = traffic_start + step.at;
        while Instant::now() < at {
            let wake = at.min(next_progress);
            tokio::time::sleep_until(wake).await;
            if Instant::now() >= next_progress {
                progress(&ctl, t0);
                next_progress += Duration::from_secs(10);
            }
        }
        println!("[{:>7.2}s] {}", t0.elapsed().as_secs_f64(), step.action);
        let step_run = apply(cluster, &ctl, &admin, &db.name, pg, step.action);
        if tokio::time::timeout(STEP_LIMIT, step_run).await.is_err() {
            println!("  step abandoned after {STEP_LIMIT:?}");
        }
        cluster.poll();
    }
    while Instant::now() < traffic_end {
        tokio::time::sleep_until(traffic_end.min(next_progress)).await;
        if Instant::now() >= next_progress {
            progress(&ctl, t0);
            next_progress += Duration::from_secs(10);
        }
        cluster.poll();
    }

    // stop pushing, undo every fault, drain
    ctl.stop_producers.store(true, Ordering::Release);
    let mut journal = Journal::default();
    for p in producers {
        match tokio::time::timeout(Duration::from_secs(60), p).await {
            Ok(Ok(log)) => journal.pushes.push(log),
            Ok(Err(e)) => bail!("a producer task failed: {e}"),
            Err(_) => bail!("a producer did not stop within 60 s"),
        }
    }
    println!(
        "[{:>7.2}s] traffic over; healing every fault and draining",
        t0.elapsed().as_secs_f64()
    );
    cluster.poll();
    cluster.heal().await?;
    for i in 0..BROKERS {
        cluster.wait_healthy(i, Duration::from_secs(60)).await?;
    }
    ctl.drain_mode.store(true, Ordering::Release);
    let client = db.client().await?;
    let drain_deadline = Instant::now() + drain_timeout;
    let mut quiet_rounds = 0;
    let mut drain_timed_out = false;
    let mut last_progress = (i64::MIN, u64::MAX);
    let mut progress_at = Instant::now();
    loop {
        let spools = spool_states(&http, &urls).await;
        let pending: u64 = spools
            .iter()
            .map(|s| s.pending.unwrap_or(u64::MAX / 8))
            .sum();
        let (quiet, cursors) = dbstate::drain_state(&client, &cfg.queue, &cfg.groups).await?;
        let quiet = quiet && pending == 0;
        quiet_rounds = if quiet { quiet_rounds + 1 } else { 0 };
        // quiet twice, a second apart: no spool replay or redelivery still under way
        if quiet_rounds >= 2 {
            break;
        }
        if (cursors, pending) != last_progress {
            last_progress = (cursors, pending);
            progress_at = Instant::now();
        }
        if Instant::now() >= drain_deadline || progress_at.elapsed() >= DRAIN_STALL {
            drain_timed_out = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
    println!(
        "[{:>7.2}s] drain {}; stopping consumers",
        t0.elapsed().as_secs_f64(),
        if drain_timed_out {
            "stalled or deadline reached"
        } else {
            "done"
        }
    );
    ctl.stop_consumers.store(true, Ordering::Release);
    for c in consumers {
        match tokio::time::timeout(Duration::from_secs(60), c).await {
            Ok(Ok(log)) => {
                journal.pops.extend(log.pops);
                journal.acks.extend(log.acks);
                journal.extends.0 += log.extends.0;
                journal.extends.1 += log.extends.1;
            }
            Ok(Err(e)) => bail!("a consumer task failed: {e}"),
            Err(_) => bail!("a consumer did not stop within 60 s"),
        }
    }
    // a last look: spools, the DLQ through the API, exits, then the tables
    let spools = spool_states(&http, &urls).await;
    let mut dlq_api_totals = Vec::new();
    for g in &cfg.groups {
        dlq_api_totals.push(dlq_total(&http, &urls[0], &cfg.queue, g).await);
    }
    cluster.poll();
    let state = dbstate::snapshot(&client, &cfg.queue).await?;
    let extra = Extra {
        spools,
        unexpected_exits: cluster.unexpected_exits(),
        drain_timed_out,
        dlq_api_totals,
    };
    let mut report = check::check(&journal, &state, &cfg.groups, RETRY_LIMIT as i32, &extra);
    std::fs::write(
        cluster.work_dir().join("journal.tsv"),
        journal.dump(&cfg.groups),
    )?;
    report.lines.insert(
        0,
        format!(
            "== queen-chaos summary: seed {seed}, traffic {}, {} ==",
            schedule::format_duration(plan.duration),
            plan.describe()
        ),
    );
    Ok((report, plan.to_string()))
}

fn progress(ctl: &Control, t0: Instant) {
    println!(
        "[{:>7.2}s] progress: {} pushes vouched for, {} deliveries",
        t0.elapsed().as_secs_f64(),
        ctl.vouched.load(Ordering::Relaxed),
        ctl.delivered.load(Ordering::Relaxed)
    );
}

async fn apply(
    cluster: &mut Cluster,
    ctl: &Control,
    admin: &tokio_postgres::Client,
    db_name: &str,
    pg: Option<&PrivatePg>,
    action: Action,
) {
    match action {
        Action::RestartPg => match pg {
            Some(pg) => match pg.restart().await {
                Ok(()) => println!("  PostgreSQL crashed and back"),
                Err(e) => println!("  restart-pg failed: {e:#}"),
            },
            None => println!("  restart-pg needs --private-pg; skipped"),
        },
        Action::TamperSkip => tamper(admin, 1).await,
        Action::TamperRewind => tamper(admin, -2).await,
        Action::Maintenance { pop, on } => match cluster.maintenance(pop, on).await {
            Ok(i) => println!("  switched through broker {i}"),
            Err(e) => println!("  {e:#}"),
        },
        Action::TerminatePg => {
            let r = admin
                .query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                      WHERE datname = $1 AND pid <> pg_backend_pid()",
                    &[&db_name],
                )
                .await;
            match r {
                Ok(rows) => println!("  {} sessions terminated", rows.len()),
                Err(e) => println!("  terminate-pg failed: {e}"),
            }
        }
        Action::CutPg(t) => cluster.cut_pg(t),
        Action::RestorePg(t) => cluster.restore_pg(t),
        Action::CutMesh => cluster.cut_mesh(),
        Action::RestoreMesh => cluster.restore_mesh(),
        Action::Kill(i) => cluster.kill(i).await,
        Action::Restart(i) => {
            if let Err(e) = cluster.restart(i).await {
                let msg = format!("broker {i} could not be restarted: {e:#}");
                println!("  {msg}");
                cluster.nodes[i].unexpected_exits.push(msg);
            }
        }
        Action::PauseConsumer { group, consumer } => {
            if let Some(flag) = ctl.pause.get(group).and_then(|g| g.get(consumer)) {
                flag.store(true, Ordering::Release);
            }
        }
    }
}

/// Checker self-test: moves the cursor of one idle (partition, group) by
/// `delta` behind the brokers' backs. Tries for up to 2 s to find an idle one.
async fn tamper(admin: &tokio_postgres::Client, delta: i64) {
    for _ in 0..20 {
        let r = admin
            .query(
                "UPDATE queen.log_consumers lc SET committed_offset = lc.committed_offset + $1
                  WHERE (lc.partition_id, lc.consumer_group) IN (
                        SELECT c.partition_id, c.consumer_group
                          FROM queen.log_consumers c JOIN queen.partitions pt ON pt.id = c.partition_id
                         WHERE c.committed_offset + $1 BETWEEN 0 AND pt.next_offset - 1
                           AND (c.lease_expires_at IS NULL OR c.lease_expires_at < now())
                           AND c.last_consumed_at < now() - interval '300 milliseconds'
                         ORDER BY random() LIMIT 1 FOR UPDATE OF c SKIP LOCKED)
                  RETURNING lc.consumer_group, lc.committed_offset,
                            (SELECT name FROM queen.partitions WHERE id = lc.partition_id)",
                &[&delta],
            )
            .await;
        match r {
            Ok(rows) if rows.is_empty() => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(rows) => {
                for row in rows {
                    let (g, c, p): (String, i64, String) = (row.get(0), row.get(1), row.get(2));
                    println!("  cursor of {g} on {p} moved to {c}");
                }
                return;
            }
            Err(e) => {
                println!("  tamper failed: {e}");
                return;
            }
        }
    }
    println!("  tamper found no idle cursor");
}

/// `GET /api/v1/status/buffers` on every broker.
async fn spool_states(http: &reqwest::Client, urls: &[String]) -> Vec<SpoolState> {
    let mut out = Vec::new();
    for (i, u) in urls.iter().enumerate() {
        let v: Option<Value> = match http.get(format!("{u}/api/v1/status/buffers")).send().await {
            Ok(r) => r.json().await.ok(),
            Err(_) => None,
        };
        out.push(SpoolState {
            broker: i,
            pending: v.as_ref().and_then(|v| v["pending"].as_u64()),
            failed: v.as_ref().and_then(|v| v["failed"].as_u64()),
        });
    }
    out
}

/// The DLQ total of one group through the API.
async fn dlq_total(http: &reqwest::Client, url: &str, queue: &str, group: &str) -> Option<u64> {
    let r = http
        .get(format!(
            "{url}/api/v1/dlq?queue={queue}&consumerGroup={group}&limit=1"
        ))
        .send()
        .await
        .ok()?;
    let v: Value = r.json().await.ok()?;
    v["total"].as_u64()
}
