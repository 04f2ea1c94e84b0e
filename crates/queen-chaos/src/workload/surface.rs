//! The timer, recurring-timer, lock and retry-delay workloads run beside the
//! queue workload through the whole fault schedule: started with it, drained
//! (or cancelled) after it, checked by the rules in `check::timers`,
//! `check::recurring`, `check::locks` and `check::retry_delay`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::locks::{self, LockJournal, LOCK_QUEUE};
use super::recurring::{self, RecurringTimer};
use super::retry_delay::{self, RetryRun};
use super::timers::{self, TimerDelivery, TimerJournal, TimerOp, TIMER_QUEUE};
use super::Control;
use crate::check::Report;
use crate::rng::Rng;

/// Timer schedulers, consumers of the timer queue, lock workers.
const SCHEDULERS: usize = 3;
const TIMER_CONSUMERS: usize = 2;
const LOCK_WORKERS: usize = 4;
/// The longest the timer drain waits after the queue workload's drain.
const TIMER_DRAIN: Duration = Duration::from_secs(60);

pub struct Surface {
    schedulers: Vec<JoinHandle<Vec<TimerOp>>>,
    consumers: Vec<JoinHandle<Vec<TimerDelivery>>>,
    lockers: Vec<JoinHandle<LockJournal>>,
    recurring: Vec<RecurringTimer>,
    retry: RetryRun,
    urls: Arc<Vec<String>>,
    ctl: Arc<Control>,
    stop_consumers: Arc<AtomicBool>,
}

/// Creates the two queues and starts every worker.
pub async fn start(
    http: &reqwest::Client,
    urls: &Arc<Vec<String>>,
    ctl: &Arc<Control>,
    traffic_end: Instant,
    rng: &mut Rng,
) -> Result<Surface> {
    for q in [TIMER_QUEUE, LOCK_QUEUE] {
        let resp = http
            .post(format!("{}/api/v1/configure", urls[0]))
            .json(&json!({"queue": q, "options": {"leaseTime": 5, "retryLimit": 100}}))
            .send()
            .await?;
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        if v["configured"] != true {
            bail!("configure {q} answered {v}");
        }
    }
    let stop_consumers = Arc::new(AtomicBool::new(false));
    let recurring = recurring::start(http, urls, &mut rng.fork(8000), || ctl.micros()).await;
    let retry = retry_delay::start(http, urls, ctl, traffic_end, &mut rng.fork(9000)).await?;
    Ok(Surface {
        schedulers: (0..SCHEDULERS)
            .map(|i| {
                tokio::spawn(timers::scheduler(
                    i,
                    urls.clone(),
                    ctl.clone(),
                    traffic_end,
                    rng.fork(5000 + i as u64),
                ))
            })
            .collect(),
        consumers: (0..TIMER_CONSUMERS)
            .map(|i| {
                tokio::spawn(timers::consumer(
                    urls.clone(),
                    ctl.clone(),
                    stop_consumers.clone(),
                    rng.fork(6000 + i as u64),
                ))
            })
            .collect(),
        lockers: (0..LOCK_WORKERS)
            .map(|i| {
                tokio::spawn(locks::worker(
                    i,
                    urls.clone(),
                    ctl.clone(),
                    traffic_end,
                    rng.fork(7000 + i as u64),
                ))
            })
            .collect(),
        recurring,
        retry,
        urls: urls.clone(),
        ctl: ctl.clone(),
        stop_consumers,
    })
}

impl Surface {
    /// After the traffic (every fault healed): joins the schedulers and lock
    /// workers, waits until every timer fired and was consumed, stops the
    /// consumers, reads the tables and runs the timer and lock rules.
    pub async fn finish(
        self,
        db: &tokio_postgres::Client,
        t0: Instant,
        work_dir: &std::path::Path,
        report: &mut Report,
    ) -> Result<()> {
        let http = super::http_client()?;
        let ctl = self.ctl.clone();
        let rj = recurring::finish(&http, &self.urls, db, self.recurring, || ctl.micros()).await?;
        crate::check::recurring::check(report, &rj);
        let retried = self.retry.finish(db).await?;
        crate::check::retry_delay::check(report, &retried);
        let mut tj = TimerJournal::default();
        for h in self.schedulers {
            match tokio::time::timeout(Duration::from_secs(60), h).await {
                Ok(Ok(ops)) => tj.ops.extend(ops),
                _ => bail!("a timer scheduler did not stop within 60 s"),
            }
        }
        let mut lj = LockJournal::default();
        for h in self.lockers {
            match tokio::time::timeout(Duration::from_secs(60), h).await {
                Ok(Ok(l)) => {
                    lj.grants.extend(l.grants);
                    lj.commits.extend(l.commits);
                }
                _ => bail!("a lock worker did not stop within 60 s"),
            }
        }
        let deadline = Instant::now() + TIMER_DRAIN;
        let mut quiet = 0;
        while Instant::now() < deadline {
            quiet = if timers::drained(db).await? {
                quiet + 1
            } else {
                0
            };
            if quiet >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        println!(
            "[{:>7.2}s] timers {}; stopping the timer consumers",
            t0.elapsed().as_secs_f64(),
            if quiet >= 2 {
                "drained"
            } else {
                "not drained in time"
            }
        );
        self.stop_consumers.store(true, Ordering::Release);
        for h in self.consumers {
            match tokio::time::timeout(Duration::from_secs(30), h).await {
                Ok(Ok(d)) => tj.deliveries.extend(d),
                _ => bail!("a timer consumer did not stop within 30 s"),
            }
        }
        timers::snapshot(db, &mut tj).await?;
        locks::snapshot(db, &mut lj).await?;
        std::fs::write(work_dir.join("surface.tsv"), dump(&tj, &lj))?;
        crate::check::timers::check(report, &tj);
        crate::check::locks::check(report, &lj);
        Ok(())
    }
}

/// Every timer op, timer delivery, grant and guarded commit, one per line.
fn dump(tj: &TimerJournal, lj: &LockJournal) -> String {
    use std::fmt::Write as _;
    let t = |us: u64| format!("{:.6}", us as f64 / 1e6);
    let mut s = String::new();
    for o in &tj.ops {
        let _ = writeln!(
            s,
            "timer\t{}\t{}\tbroker={}\tsent={}\tdone={}\t{:?}\t{:?}",
            o.key,
            o.partition,
            o.broker,
            t(o.t_sent),
            t(o.t_done),
            o.ask,
            o.answer
        );
    }
    for d in &tj.deliveries {
        let _ = writeln!(
            s,
            "fired\t{}\t{}\t{}\tpopped={}",
            d.partition,
            d.txn,
            d.message_id,
            t(d.t_end)
        );
    }
    for g in &lj.grants {
        let _ = writeln!(
            s,
            "grant\t{}\t{}\ttoken={}\talready={}\trenew={}\tbroker={}\tsent={}\tdone={}",
            g.lock,
            g.owner,
            g.token,
            g.already,
            g.renew,
            g.broker,
            t(g.t_sent),
            t(g.t_done)
        );
    }
    for c in &lj.commits {
        let _ = writeln!(
            s,
            "commit\t{}\tw{}\ttoken={}\t{}\tstale={}\tbroker={}\tsent={}\tdone={}\t{:?}",
            c.lock,
            c.worker,
            c.token,
            c.txid,
            c.stale,
            c.broker,
            t(c.t_sent),
            t(c.t_done),
            c.outcome
        );
    }
    s
}
