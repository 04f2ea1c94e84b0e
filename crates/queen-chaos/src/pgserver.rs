//! The private PostgreSQL of `--private-pg` (a [`PrivatePg`] of the testkit,
//! so schedules can crash and restart it: `restart-pg`) and, with
//! `--standby`, a synchronous streaming standby next to it, so schedules can
//! lose the primary (`kill-primary`, `freeze-primary`) and `promote` the
//! standby. After a promotion a fresh synchronous standby is cloned from the
//! new primary, so a later step can fail over again.
//!
//! The brokers reach the servers through two address slots (one fault proxy
//! per broker and slot): slot 0 starts on the primary, slot 1 on the standby.
//! When a new standby is built, the slot of the lost primary is pointed at it,
//! like a host name that now resolves to the rebuilt machine; connections
//! still open to the lost primary stay with it (a frozen one never answers).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use std::collections::HashMap;

use anyhow::{bail, Context as _, Result};
use queen_testkit::PrivatePg;
use tokio::time::Instant;

use crate::journal::{Journal, Told};

/// A database to point the brokers and the checker at.
#[derive(Debug, Clone)]
pub struct DbTarget {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub name: String,
    /// A URI that wins over the fields above (a pg_auto_failover formation's,
    /// with every node and `target_session_attrs=read-write`); the brokers
    /// get it as `DATABASE_URL`, without fault proxies.
    pub url: Option<String>,
}

impl DbTarget {
    pub async fn client(&self) -> Result<tokio_postgres::Client> {
        let conn = match &self.url {
            Some(url) => format!("{url}&connect_timeout=10"),
            None => format!(
                "host={} port={} user={} dbname={} connect_timeout=10",
                self.host, self.port, self.user, self.name
            ),
        };
        let (client, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls)
            .await
            .with_context(|| format!("connect to {conn}"))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }
}

/// How the primary was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    Killed,
    Frozen,
    /// `pg_autoctl perform switchover` (pg_auto_failover).
    Switchover,
    /// The primary node killed whole: `pg_autoctl` and PostgreSQL (pg_auto_failover).
    NodeKilled,
}

impl std::fmt::Display for Loss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Loss::Killed => "primary killed",
            Loss::Frozen => "primary frozen",
            Loss::Switchover => "switchover",
            Loss::NodeKilled => "primary node killed",
        })
    }
}

/// One failover as it happened, times since the run started.
#[derive(Debug, Clone)]
pub struct Failover {
    pub loss: Loss,
    pub lost_at: Duration,
    pub promoted_at: Option<Duration>,
    /// The new standby streamed in sync (the next failover is safe from then on).
    pub standby_at: Option<Duration>,
}

/// The private server(s) of a run.
#[derive(Debug)]
pub struct PgServers {
    /// The server behind each address slot (slot 1 only with a standby).
    slots: Vec<PrivatePg>,
    /// Slot of the current primary.
    primary: usize,
    /// The primary is lost and the standby not promoted yet.
    lost: Option<Loss>,
    /// Lost primaries, kept (dead or frozen) until the end of the run.
    retired: Vec<PrivatePg>,
    db_name: String,
    t0: Instant,
    pub failovers: Vec<Failover>,
}

fn addr(pg: &PrivatePg) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], pg.port))
}

impl PgServers {
    /// Starts a primary with database `db_name` and, with `standby`, a
    /// synchronous standby cloned from it.
    pub async fn start(db_name: &str, standby: bool, t0: Instant) -> Result<Self> {
        let primary = PrivatePg::primary().await.context("start the primary")?;
        primary.create_db(db_name).await?;
        let mut slots = vec![primary];
        if standby {
            let s = slots[0]
                .sync_standby()
                .await
                .context("clone a synchronous standby")?;
            slots.push(s);
        }
        Ok(Self {
            slots,
            primary: 0,
            lost: None,
            retired: Vec::new(),
            db_name: db_name.to_owned(),
            t0,
            failovers: Vec::new(),
        })
    }

    /// The address of each slot, primary first at the start.
    pub fn upstreams(&self) -> Vec<SocketAddr> {
        self.slots.iter().map(addr).collect()
    }

    pub fn describe(&self) -> String {
        let mut s = format!("private PostgreSQL primary on port {}", self.slots[0].port);
        if let Some(st) = self.slots.get(1) {
            s.push_str(&format!(", synchronous standby on port {}", st.port));
        }
        s
    }

    /// The current primary's database, for the checker's own connections.
    pub fn target(&self) -> DbTarget {
        DbTarget {
            host: "127.0.0.1".into(),
            port: self.slots[self.primary].port,
            user: "postgres".into(),
            name: self.db_name.clone(),
            url: None,
        }
    }

    /// Crashes and restarts the current primary (`restart-pg`).
    pub async fn restart(&self) -> Result<()> {
        if self.lost.is_some() {
            bail!("the primary is lost and not replaced yet");
        }
        self.slots[self.primary].restart().await
    }

    /// `kill -9` or `SIGSTOP` of the primary's postmaster and backends.
    pub fn lose_primary(&mut self, loss: Loss) -> Result<()> {
        if self.slots.len() < 2 {
            bail!("losing the primary needs --standby");
        }
        if self.lost.is_some() {
            bail!("the primary is already lost");
        }
        let pg = &self.slots[self.primary];
        match loss {
            Loss::Killed => pg.kill()?,
            Loss::Frozen => pg.freeze()?,
            Loss::Switchover | Loss::NodeKilled => bail!("{loss} is a pg_auto_failover step"),
        }
        self.lost = Some(loss);
        self.failovers.push(Failover {
            loss,
            lost_at: self.t0.elapsed(),
            promoted_at: None,
            standby_at: None,
        });
        Ok(())
    }

    /// Promotes the standby, then clones a new synchronous standby from it.
    /// `retarget(slot, addr)` points the brokers' slot at the new standby.
    /// Returns how long the promotion and the new standby took.
    pub async fn promote(
        &mut self,
        retarget: impl FnOnce(usize, SocketAddr),
    ) -> Result<(Duration, Duration)> {
        if self.lost.take().is_none() {
            bail!("promote without a lost primary would leave two primaries");
        }
        let old = self.primary;
        let new = 1 - old;
        let started = Instant::now();
        self.slots[new].promote().await.context("promote")?;
        let promoted = started.elapsed();
        self.primary = new;
        if let Some(f) = self.failovers.last_mut() {
            f.promoted_at = Some(self.t0.elapsed());
        }
        let standby = self.slots[new]
            .sync_standby()
            .await
            .context("clone a new synchronous standby from the new primary")?;
        retarget(old, addr(&standby));
        let lost = std::mem::replace(&mut self.slots[old], standby);
        self.retired.push(lost);
        if let Some(f) = self.failovers.last_mut() {
            f.standby_at = Some(self.t0.elapsed());
        }
        Ok((promoted, started.elapsed()))
    }

    /// Writes every server's log into `dir` (`pg-<port>.log`).
    pub fn save_logs(&self, dir: &Path) {
        for pg in self.slots.iter().chain(&self.retired) {
            let _ = std::fs::write(dir.join(format!("pg-{}.log", pg.port)), pg.log());
        }
    }
}

/// What the clients saw around each failover, from the journal (times in µs
/// since the run started): from the loss until the first push sent after it
/// was stored directly (`queued`), how many pushes were answered `buffered`
/// or not at all, the slowest answer, and when the last buffered one reached
/// every group.
pub fn measure(failovers: &[Failover], journal: &Journal, groups: usize) -> Vec<String> {
    let pushes: Vec<_> = journal.pushes.iter().flatten().collect();
    // first delivery of each (partition, txid) per group
    let mut first: HashMap<(&str, &str, usize), u64> = HashMap::new();
    for p in &journal.pops {
        for m in &p.messages {
            let e = first
                .entry((m.partition.as_str(), m.txid.as_str(), p.group))
                .or_insert(p.t_end);
            *e = (*e).min(p.t_end);
        }
    }
    let all_groups = |partition: &str, txid: &str| {
        (0..groups)
            .map(|g| {
                first
                    .get(&(partition, txid, g))
                    .copied()
                    .unwrap_or(u64::MAX)
            })
            .max()
            .unwrap_or(0)
    };
    let us = |d: Duration| d.as_micros() as u64;
    let secs = |us: u64| us as f64 / 1e6;
    let mut lines = Vec::new();
    for (n, f) in failovers.iter().enumerate() {
        let lost = us(f.lost_at);
        let until = failovers.get(n + 1).map_or(u64::MAX, |g| us(g.lost_at));
        let back = pushes
            .iter()
            .filter(|p| matches!(p.told, Told::Queued { .. }) && p.t_sent >= lost)
            .map(|p| p.t_done)
            .filter(|t| *t < until)
            .min();
        let end = back.unwrap_or(until);
        let window: Vec<_> = pushes
            .iter()
            .filter(|p| p.t_done >= lost && p.t_done <= end)
            .collect();
        let buffered: Vec<_> = window.iter().filter(|p| p.told == Told::Buffered).collect();
        let unanswered = window
            .iter()
            .filter(|p| matches!(p.told, Told::NoAnswer(_)))
            .count();
        let slowest = window
            .iter()
            .map(|p| p.t_done.saturating_sub(p.t_sent))
            .max()
            .unwrap_or(0);
        // when each buffered push had reached every group, sorted
        let mut reached: Vec<u64> = buffered
            .iter()
            .map(|p| all_groups(&p.partition, &p.txid))
            .collect();
        reached.sort_unstable();
        // and how long after its own `buffered` answer (to compare with any push)
        let mut own: Vec<u64> = buffered
            .iter()
            .map(|p| all_groups(&p.partition, &p.txid).saturating_sub(p.t_done))
            .collect();
        own.sort_unstable();
        let promoted = f.promoted_at.map(us);
        let after = |t: Option<u64>, from: Option<u64>| match (t, from) {
            (Some(t), Some(from)) if t != u64::MAX => format!("{:.2}s", secs(t) - secs(from)),
            _ => "never".to_owned(),
        };
        lines.push(format!(
            "failover {}: primary {:?} at {:.2}s, promoted {} later, new standby in sync {} after the loss; \
             {} pushes buffered and {} unanswered until the first direct push {} after the loss; \
             slowest push answer {:.2}s; the buffered pushes reached every group, half {} and all {} after the promotion \
             (half {} after their own answer)",
            n + 1,
            f.loss,
            secs(lost),
            after(promoted, Some(lost)),
            after(f.standby_at.map(us), Some(lost)),
            buffered.len(),
            unanswered,
            after(back, Some(lost)),
            secs(slowest),
            after(reached.get(reached.len() / 2).copied(), promoted),
            after(reached.last().copied(), promoted),
            own.get(own.len() / 2)
                .filter(|l| **l < u64::MAX / 2)
                .map_or_else(|| "never".to_owned(), |l| format!("{:.2}s", secs(*l))),
        ));
    }
    // for comparison: how long any push took from its answer to every group
    let mut lag: Vec<u64> = pushes
        .iter()
        .filter(|p| p.told == Told::Buffered || matches!(p.told, Told::Queued { .. }))
        .map(|p| all_groups(&p.partition, &p.txid).saturating_sub(p.t_done))
        .filter(|l| *l < u64::MAX / 2)
        .collect();
    lag.sort_unstable();
    if !failovers.is_empty() && !lag.is_empty() {
        lines.push(format!(
            "for comparison, any push answered queued or buffered in this run reached every group half {:.2}s and 99 % {:.2}s after its answer",
            secs(lag[lag.len() / 2]),
            secs(lag[lag.len() * 99 / 100]),
        ));
    }
    lines
}
