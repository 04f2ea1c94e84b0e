//! Resource accounting of one scenario: broker CPU and peak RSS, PostgreSQL
//! CPU, the load generator's own CPU, machine busy time, and the
//! `pg_stat_database` deltas of the measured database.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::pg::{
    self, DbCounters, Monitor, PgArgs, StatementCounters, StatementSnapshot, TableCounters,
};
use crate::procstat;

/// One second of resource use (for the time series of a run).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSample {
    /// Seconds since the meter started, end of the interval.
    pub t: f64,
    pub broker_cpu_pct: f64,
    pub pg_cpu_pct: f64,
    pub machine_busy_pct: f64,
    pub broker_rss_mb: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    pub seconds: f64,
    /// Broker utime + stime over the interval (`None` without a broker pid).
    pub broker_cpu_s: Option<f64>,
    pub broker_rss_start_mb: Option<f64>,
    pub broker_rss_peak_mb: Option<f64>,
    /// PostgreSQL processes working for the measured database (its backends
    /// and autovacuum workers, plus the shared WAL writer, checkpointer, ...).
    pub pg_cpu_s: f64,
    /// This load generator.
    pub bench_cpu_s: f64,
    /// Both cores busy = 100 %.
    pub machine_busy_pct: f64,
    /// Machine CPU seconds used by anything but broker, PostgreSQL and this
    /// tool (other work on the box: noise in the measurement).
    #[serde(default)]
    pub other_cpu_s: f64,
    pub pg_commits: i64,
    pub pg_rollbacks: i64,
    pub pg_rows_written: i64,
    pub pg_commits_per_s: f64,
    pub pg_rows_per_s: f64,
    /// Rows written per table over the interval (`pg_stat_all_tables`).
    #[serde(default)]
    pub table_writes: TableCounters,
    /// The busiest statements of the measured database over the interval,
    /// statements inside functions included (`--pg-statements`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statements: Vec<StatementCounters>,
    /// Its PL/pgSQL functions over the interval (with `track_functions`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<StatementCounters>,
}

/// How many statements and functions a scenario's report keeps.
const TOP_STATEMENTS: usize = 40;

pub struct Meter {
    pid: Option<u32>,
    db: String,
    /// Connection to the measured database, for per-table counters.
    db_client: Option<tokio_postgres::Client>,
    tables0: TableCounters,
    statements0: StatementSnapshot,
    functions0: StatementSnapshot,
    started: Instant,
    broker_cpu0: Option<f64>,
    rss0: Option<u64>,
    bench_cpu0: f64,
    pg0: HashMap<u32, u64>,
    machine0: Option<(u64, u64)>,
    db0: DbCounters,
    peak_rss: Arc<Mutex<u64>>,
    series: Arc<Mutex<Vec<ResourceSample>>>,
    sampler: JoinHandle<()>,
}

/// Numbers captured at the end of the measured interval, before the
/// statistics settle (which takes another second or two).
pub struct Stopped {
    meter: Meter,
    seconds: f64,
    broker_cpu: Option<f64>,
    bench_cpu: f64,
    pg_cpu: f64,
    machine_busy_pct: f64,
    machine_busy_s: f64,
    series: Vec<ResourceSample>,
    peak_rss: u64,
}

impl Meter {
    /// `db` is the database whose `pg_stat_database` row and backends are
    /// measured; empty for none.
    pub async fn start(
        pid: Option<u32>,
        monitor: &Monitor,
        pg_args: &PgArgs,
        db: &str,
    ) -> Result<Self> {
        let db_client = if db.is_empty() {
            None
        } else {
            pg_args.connect(db).await.ok()
        };
        let tables0 = match &db_client {
            Some(c) => pg::table_counters(c).await.unwrap_or_default(),
            None => TableCounters::default(),
        };
        let functions0 = match &db_client {
            Some(c) => pg::function_counters(c).await.unwrap_or_default(),
            None => StatementSnapshot::new(),
        };
        let statements0 = monitor.statements(db).await?;
        let db0 = monitor.counters(db).await?;
        if let Some(pid) = pid {
            procstat::reset_peak_rss(pid);
        }
        let rss0 = pid.and_then(procstat::memory).map(|m| m.rss);
        let peak_rss = Arc::new(Mutex::new(rss0.unwrap_or(0)));
        let series = Arc::new(Mutex::new(Vec::new()));
        let started = Instant::now();
        let sampler = tokio::spawn(sample(
            pid,
            db.to_owned(),
            started,
            Arc::clone(&peak_rss),
            Arc::clone(&series),
        ));
        Ok(Self {
            pid,
            db: db.to_owned(),
            db_client,
            tables0,
            statements0,
            functions0,
            started,
            broker_cpu0: pid.and_then(procstat::cpu_seconds),
            rss0,
            bench_cpu0: procstat::cpu_seconds(std::process::id()).unwrap_or(0.0),
            pg0: postgres_ticks(db),
            machine0: procstat::machine_ticks(),
            db0,
            peak_rss,
            series,
            sampler,
        })
    }

    /// Ends the measured interval.
    pub fn stop(self) -> Stopped {
        self.sampler.abort();
        let seconds = self.started.elapsed().as_secs_f64();
        let broker_cpu = self
            .pid
            .and_then(procstat::cpu_seconds)
            .zip(self.broker_cpu0)
            .map(|(b, a)| b - a);
        let bench_cpu = procstat::cpu_seconds(std::process::id()).unwrap_or(0.0) - self.bench_cpu0;
        let pg_cpu = procstat::postgres_cpu_between(&self.pg0, &postgres_ticks(&self.db));
        let machine1 = procstat::machine_ticks();
        let machine_busy_pct = busy_pct(self.machine0, machine1);
        let machine_busy_s = match (self.machine0, machine1) {
            (Some((b0, _)), Some((b1, _))) => b1.saturating_sub(b0) as f64 / procstat::clk_tck(),
            _ => 0.0,
        };
        let mut peak_rss = *self.peak_rss.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(m) = self.pid.and_then(procstat::memory) {
            // VmHWM was reset at start, so it is this interval's true peak.
            peak_rss = peak_rss.max(m.hwm).max(m.rss);
        }
        let series = self
            .series
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Stopped {
            meter: self,
            seconds,
            broker_cpu,
            bench_cpu,
            pg_cpu,
            machine_busy_pct,
            machine_busy_s,
            series,
            peak_rss,
        }
    }
}

impl Stopped {
    pub fn series(&self) -> &[ResourceSample] {
        &self.series
    }

    /// Waits for PostgreSQL's statistics to settle and builds the summary.
    /// `seconds` overrides the interval the rates are computed over.
    pub async fn finish(
        self,
        monitor: &Monitor,
        db: &str,
        settle: Duration,
        seconds: Option<f64>,
    ) -> Result<Resources> {
        let db1 = monitor.settle(db, settle).await?;
        let d = db1.delta(self.meter.db0);
        let table_writes = match &self.meter.db_client {
            Some(c) => pg::table_delta(
                &self.meter.tables0,
                &pg::table_counters(c).await.unwrap_or_default(),
            ),
            None => TableCounters::default(),
        };
        let functions = match &self.meter.db_client {
            Some(c) => pg::statement_delta(
                &self.meter.functions0,
                &pg::function_counters(c).await.unwrap_or_default(),
                TOP_STATEMENTS,
            ),
            None => Vec::new(),
        };
        let statements = pg::statement_delta(
            &self.meter.statements0,
            &monitor.statements(db).await?,
            TOP_STATEMENTS,
        );
        let secs = seconds.unwrap_or(self.seconds).max(1e-9);
        let mb = |b: u64| b as f64 / (1024.0 * 1024.0);
        Ok(Resources {
            seconds: self.seconds,
            broker_cpu_s: self.broker_cpu,
            broker_rss_start_mb: self.meter.rss0.map(mb),
            broker_rss_peak_mb: self.meter.pid.map(|_| mb(self.peak_rss)),
            pg_cpu_s: self.pg_cpu,
            bench_cpu_s: self.bench_cpu,
            machine_busy_pct: self.machine_busy_pct,
            other_cpu_s: (self.machine_busy_s
                - self.broker_cpu.unwrap_or(0.0)
                - self.pg_cpu
                - self.bench_cpu)
                .max(0.0),
            pg_commits: d.xact_commit,
            pg_rollbacks: d.xact_rollback,
            pg_rows_written: d.rows_written,
            pg_commits_per_s: d.xact_commit as f64 / secs,
            pg_rows_per_s: d.rows_written as f64 / secs,
            table_writes,
            statements,
            functions,
        })
    }
}

/// PostgreSQL's processes working for `db`; none without a database (a
/// peer broker's scenario, where PostgreSQL is not part of the system).
fn postgres_ticks(db: &str) -> HashMap<u32, u64> {
    if db.is_empty() {
        HashMap::new()
    } else {
        procstat::postgres_ticks(Some(db))
    }
}

fn busy_pct(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> f64 {
    match (before, after) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
            100.0 * (b1.saturating_sub(b0)) as f64 / (t1 - t0) as f64
        }
        _ => 0.0,
    }
}

/// Every 100 ms: broker RSS (for the peak); every second: a [`ResourceSample`].
async fn sample(
    pid: Option<u32>,
    db: String,
    started: Instant,
    peak: Arc<Mutex<u64>>,
    series: Arc<Mutex<Vec<ResourceSample>>>,
) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut last_at = Instant::now();
    let mut last_cpu = pid.and_then(procstat::cpu_seconds);
    let mut last_pg = postgres_ticks(&db);
    let mut last_machine = procstat::machine_ticks();
    let mut n: u64 = 0;
    loop {
        tick.tick().await;
        n += 1;
        let rss = pid.and_then(procstat::memory).map_or(0, |m| m.rss);
        {
            let mut p = peak.lock().unwrap_or_else(PoisonError::into_inner);
            *p = (*p).max(rss);
        }
        if !n.is_multiple_of(10) {
            continue;
        }
        let now = Instant::now();
        let dt = now.duration_since(last_at).as_secs_f64().max(1e-9);
        let cpu = pid.and_then(procstat::cpu_seconds);
        let pg = postgres_ticks(&db);
        let machine = procstat::machine_ticks();
        let s = ResourceSample {
            t: now.duration_since(started).as_secs_f64(),
            broker_cpu_pct: cpu.zip(last_cpu).map_or(0.0, |(b, a)| 100.0 * (b - a) / dt),
            pg_cpu_pct: 100.0 * procstat::postgres_cpu_between(&last_pg, &pg) / dt,
            machine_busy_pct: busy_pct(last_machine, machine),
            broker_rss_mb: rss as f64 / (1024.0 * 1024.0),
        };
        series
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(s);
        (last_at, last_cpu, last_pg, last_machine) = (now, cpu, pg, machine);
    }
}
