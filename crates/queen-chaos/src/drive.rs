//! One run driven: the workload started, the fault schedule applied step by step, the
//! drain and the checks.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::autofailover::Formation;
use crate::check::Extra;
use crate::cluster::Cluster;
use crate::faults::{apply, dlq_total, spool_states};
use crate::journal::Journal;
use crate::pgserver::{DbTarget, PgServers};
use crate::rng::Rng;
use crate::schedule::{Schedule, BROKERS};
use crate::workload::stream::{self, StreamLog};
use crate::workload::{ConsumerLog, Control, WorkloadConfig};
use crate::{check, dbstate, journal, schedule, workload};
use crate::{group_names, Cli, DRAIN_STALL, LEASE_SECS, MAX_BATCH, RETRY_LIMIT, STEP_LIMIT};

#[expect(
    clippy::too_many_arguments,
    reason = "the run's settings, resolved once in run()"
)]
pub(crate) async fn drive(
    cli: &Cli,
    seed: u64,
    rng: &mut Rng,
    plan: &Schedule,
    cluster: &mut Cluster,
    db: &DbTarget,
    mut pg: Option<&mut PgServers>,
    mut formation: Option<&mut Formation>,
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
    let surface =
        workload::surface::start(&http, &urls, &ctl, traffic_end, &mut rng.fork(3)).await?;
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

    let streams: Vec<JoinHandle<StreamLog>> = (0..cli.stream_workers)
        .map(|w| {
            tokio::spawn(stream::stream_worker(
                w,
                cfg.queue.clone(),
                cfg.lease_secs,
                urls.clone(),
                ctl.clone(),
                rng.fork(5000 + w as u64),
            ))
        })
        .collect();
    // groups the drain waits for: the consumers' and the stream query's
    let mut drain_groups = cfg.groups.clone();
    if cli.stream_workers > 0 {
        drain_groups.push(stream::group());
    }

    // the fault schedule; `admin` is a direct connection for terminate-pg
    let mut admin = db.client().await?;
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
        let step_run = apply(
            cluster,
            &ctl,
            &mut admin,
            &db.name,
            pg.as_deref_mut(),
            formation.as_deref_mut(),
            step.action,
        );
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
    // after a failover the tables are on another server
    let current = pg.as_deref().map_or_else(|| db.clone(), PgServers::target);
    let client = current.client().await?;
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
        let (quiet, cursors) = dbstate::drain_state(&client, &cfg.queue, &drain_groups).await?;
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
    let mut stream_log = StreamLog::default();
    for s in streams {
        match tokio::time::timeout(Duration::from_secs(60), s).await {
            Ok(Ok(log)) => stream_log.absorb(log),
            Ok(Err(e)) => bail!("a stream worker task failed: {e}"),
            Err(_) => bail!("a stream worker did not stop within 60 s"),
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
    if let Some(pg) = pg.as_deref() {
        report.lines.extend(crate::pgserver::measure(
            &pg.failovers,
            &journal,
            cfg.groups.len(),
        ));
    }
    if let Some(f) = formation {
        f.finish(&journal, cfg.groups.len(), &mut report);
    }
    if cli.stream_workers > 0 {
        let fin = check::streams::StreamFinal {
            state: stream::read_state(&client).await?,
            sink: dbstate::snapshot(&client, stream::SINK).await?,
        };
        check::streams::check_streams(&mut report, &stream_log.cycles, &state, &fin);
        report.lines.push(stream_log.describe(cli.stream_workers));
        std::fs::write(cluster.work_dir().join("streams.tsv"), stream_log.dump())?;
    }
    surface
        .finish(&client, t0, cluster.work_dir(), &mut report)
        .await?;
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
