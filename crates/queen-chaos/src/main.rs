//! `queen-chaos`: runs three real brokers on loopback against one fresh
//! database, drives producers and consumers through a fault schedule (SIGKILL
//! and restart, PostgreSQL links cut, the mesh cut, consumers paused past their
//! lease), drains, and checks that nothing was lost, doubled or reordered.
//!
//! Exit status: 0 when the checker found no violation, 1 when it found some,
//! 2 when the harness itself could not run (setup failed, interrupted).

mod autofailover;
mod check;
mod cluster;
mod dbstate;
mod drive;
mod faults;
mod journal;
mod pgserver;
mod rng;
mod schedule;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use clap::Parser;
use queen_testkit::TestDb;
use tokio::time::Instant;

use crate::autofailover::Formation;
use crate::cluster::{BrokerSpec, Cluster};
use crate::pgserver::{DbTarget, PgServers};
use crate::rng::Rng;
use crate::schedule::{PgMode, Schedule};

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
    /// Stream workers of the keyed-count query over the queue (0: none).
    #[arg(long, default_value_t = 3)]
    stream_workers: usize,
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
    /// With --private-pg (implied): a synchronous streaming standby too, the
    /// brokers given both in one DATABASE_URL, so schedules can kill or
    /// freeze the primary and promote the standby.
    #[arg(long)]
    standby: bool,
    /// The brokers on a pg_auto_failover formation (a monitor, a primary and
    /// a secondary, run with `pg_autoctl` as user `postgres` in the work
    /// directory) given the URI `pg_autoctl show uri` prints, with a user;
    /// the fixed plan switches over, kills the primary node and starts it
    /// again. Needs Debian's `postgresql-<v>-auto-failover` and
    /// `pg-auto-failover-cli`.
    #[arg(long, conflicts_with_all = ["private_pg", "standby", "random"])]
    pg_auto_failover: bool,
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
    let pg_mode = if cli.pg_auto_failover {
        PgMode::AutoFailover
    } else if cli.standby {
        PgMode::Standby
    } else if cli.private_pg {
        PgMode::Private
    } else {
        PgMode::Shared
    };
    let duration = schedule::parse_duration(&cli.duration)?;
    let drain_timeout = schedule::parse_duration(&cli.drain_timeout)?;
    let plan = match &cli.schedule {
        Some(path) => Schedule::parse(
            &std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?,
        )
        .with_context(|| format!("schedule {}", path.display()))?,
        None if duration <= Duration::from_secs(120) && !cli.random => {
            schedule::short(duration, pg_mode)?
        }
        None => schedule::random(
            duration,
            &mut rng.fork(1),
            cli.groups,
            cli.consumers,
            pg_mode,
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

    if pg_mode == PgMode::Shared
        && plan
            .steps
            .iter()
            .any(|s| s.action == schedule::Action::RestartPg)
    {
        bail!("the schedule restarts PostgreSQL: that needs --private-pg");
    }
    if pg_mode != PgMode::Standby && plan.needs_standby() {
        bail!("the schedule fails over to a standby: that needs --standby");
    }
    if (pg_mode == PgMode::AutoFailover) != plan.needs_auto_failover() {
        bail!("pg_auto_failover steps (switchover, kill-primary-node, restart-node) and --pg-auto-failover go together");
    }
    if pg_mode == PgMode::AutoFailover && plan.touches_private_servers() {
        bail!("with --pg-auto-failover the brokers reach the formation directly: no PostgreSQL cuts, restarts or promotes");
    }
    let mut formation = None;
    let (test_db, mut private, db) = if pg_mode == PgMode::AutoFailover {
        let f = Formation::start(&work_dir, "queen_chaos", t0)
            .await
            .context("start a pg_auto_failover formation")?;
        println!("queen-chaos: {}", f.describe());
        let target = f.target();
        formation = Some(f);
        (None, None, target)
    } else if pg_mode != PgMode::Shared {
        let pg = PgServers::start("queen_chaos", pg_mode == PgMode::Standby, t0)
            .await
            .context("start a private PostgreSQL")?;
        println!("queen-chaos: {}", pg.describe());
        let target = pg.target();
        (None, Some(pg), target)
    } else {
        let t = TestDb::new().await.context("create the test database")?;
        let target = DbTarget {
            host: t.host.clone(),
            port: t.port,
            user: t.user.clone(),
            name: t.name.clone(),
            url: None,
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
        private.as_mut(),
        formation.as_mut(),
        drain_timeout,
        t0,
    )
    .await;
    if let Some(pg) = &private {
        pg.save_logs(&work_dir);
    }
    drop(private);
    if let Some(f) = formation.as_mut() {
        f.shutdown().await;
        println!(
            "queen-chaos: pg_auto_failover logs in {}",
            f.log_dir().display()
        );
    }
    drop(formation);
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
    pg: Option<&mut PgServers>,
    formation: Option<&mut Formation>,
    drain_timeout: Duration,
    t0: Instant,
) -> Result<bool> {
    let spec = BrokerSpec {
        bin: bin.to_path_buf(),
        work_dir: work_dir.to_path_buf(),
        pool_size: cli.pool_size,
        log_level: cli.broker_log_level.clone(),
    };
    let upstreams = match &pg {
        Some(pg) => pg.upstreams(),
        // the formation's URI goes to the brokers as it is
        None if db.url.is_some() => Vec::new(),
        None => vec![std::net::SocketAddr::new(
            db.host
                .parse()
                .with_context(|| format!("PostgreSQL host {:?} must be an IP address", db.host))?,
            db.port,
        )],
    };
    let mut cluster = Cluster::start(spec, db, &upstreams, t0).await?;
    println!(
        "queen-chaos: 3 brokers up and meshed after {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    let result = drive::drive(
        cli,
        seed,
        &mut rng,
        plan,
        &mut cluster,
        db,
        pg,
        formation,
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
