//! The fault schedule: timed steps, as text (to save, replay and keep as a
//! regression) and as generated plans (a fixed short plan, random long ones).
//!
//! Text form, one step a line (`#` starts a comment):
//!
//! ```text
//! duration 60s
//! at 3.6s cut-pg 0          # cut broker 0's link to PostgreSQL
//! at 9s restore-pg 0
//! at 10.8s cut-pg all
//! at 11s kill 1             # SIGKILL broker 1
//! at 14s restart 1
//! at 16s cut-mesh           # cut every mesh link between the brokers
//! at 24s restore-mesh
//! at 18s pause-consumer 0 0 # consumer 0 of group 0 holds its next batch past the lease
//! at 20s terminate-pg       # pg_terminate_backend on every session of the database
//! at 22s maintenance push on # every push goes to the spools until `maintenance push off`
//! at 25s restart-pg         # crash and restart the private PostgreSQL (--private-pg)
//! at 30s kill-primary       # kill -9 the primary (--standby) ...
//! at 31s promote            # ... promote the standby, clone a new standby from it
//! at 40s freeze-primary     # SIGSTOP the primary, left frozen until the end
//! at 41s promote
//! at 8s switchover          # pg_autoctl perform switchover (--pg-auto-failover)
//! at 24s kill-primary-node  # kill -9 of the primary node's pg_autoctl and PostgreSQL ...
//! at 40s restart-node       # ... started again: it rejoins as a secondary
//! ```
//!
//! A `promote` follows each `kill-primary` or `freeze-primary`, and another
//! loss only comes after it: promoting a standby while the primary still
//! takes writes would leave two primaries.
//!
//! `tamper-skip` and `tamper-rewind` break the data behind the brokers' backs;
//! they exist to prove the checker catches a broken broker (see
//! `schedules/selftest.txt`).

use std::fmt;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};

/// Number of brokers the harness runs.
pub const BROKERS: usize = 3;

/// Which brokers a PostgreSQL link step applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    One(usize),
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    CutPg(Target),
    RestorePg(Target),
    /// SIGKILL the broker process (nothing of its shutdown code runs).
    Kill(usize),
    /// Start the killed broker again with the same ports and spool directory.
    Restart(usize),
    CutMesh,
    RestoreMesh,
    /// The consumer holds its next batch past the lease, then acks it.
    PauseConsumer {
        group: usize,
        consumer: usize,
    },
    /// Terminates every PostgreSQL session of the test database (as a
    /// PostgreSQL restart does: `57P01 admin_shutdown`, then the socket closes).
    TerminatePg,
    /// Crashes the private PostgreSQL server (immediate shutdown) and starts
    /// it again (`--private-pg` only).
    RestartPg,
    /// `kill -9` of the primary's postmaster and backends (`--standby` only).
    KillPrimary,
    /// `SIGSTOP` of the primary's postmaster and backends, never thawed:
    /// connections stay open and never answer (`--standby` only).
    FreezePrimary,
    /// `pg_ctl promote` of the standby after a lost primary, then a new
    /// synchronous standby cloned from the new primary.
    Promote,
    /// `pg_autoctl perform switchover`: the monitor demotes the primary and
    /// promotes the secondary (`--pg-auto-failover` only).
    Switchover,
    /// `kill -9` of the primary node's process group: its `pg_autoctl`,
    /// postmaster and backends, a dead host; the monitor fails over once
    /// its timeouts run out (`--pg-auto-failover` only).
    KillPrimaryNode,
    /// `pg_autoctl run` again for every killed node: it rejoins the
    /// formation as a secondary (`--pg-auto-failover` only).
    RestartNode,
    /// Push (spool every push) or pop (answer every pop empty) maintenance
    /// mode, switched through one broker; the others learn it by hint or by
    /// their reconcile loop.
    Maintenance {
        pop: bool,
        on: bool,
    },
    /// Checker self-test: moves one group's cursor one message forward behind
    /// the brokers' backs, as a broker that skips a message would.
    TamperSkip,
    /// Checker self-test: moves one group's cursor two messages back, as a
    /// broker that forgets acks would.
    TamperRewind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub at: Duration,
    pub action: Action,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Length of the traffic phase; every step lies inside it.
    pub duration: Duration,
    pub steps: Vec<Step>,
}

/// Parses `500ms`, `1.5s`, `30m`, `1h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let v: f64 = num
        .trim()
        .parse()
        .with_context(|| format!("bad duration {s:?}"))?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => bail!("bad duration unit in {s:?} (use ms, s, m or h)"),
    };
    if !(secs.is_finite() && secs >= 0.0) {
        bail!("bad duration {s:?}");
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Formats a duration the way [`parse_duration`] reads it back exactly.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::One(i) => write!(f, "{i}"),
            Target::All => f.write_str("all"),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::CutPg(t) => write!(f, "cut-pg {t}"),
            Action::RestorePg(t) => write!(f, "restore-pg {t}"),
            Action::Kill(i) => write!(f, "kill {i}"),
            Action::Restart(i) => write!(f, "restart {i}"),
            Action::CutMesh => f.write_str("cut-mesh"),
            Action::RestoreMesh => f.write_str("restore-mesh"),
            Action::PauseConsumer { group, consumer } => {
                write!(f, "pause-consumer {group} {consumer}")
            }
            Action::TerminatePg => f.write_str("terminate-pg"),
            Action::RestartPg => f.write_str("restart-pg"),
            Action::KillPrimary => f.write_str("kill-primary"),
            Action::FreezePrimary => f.write_str("freeze-primary"),
            Action::Promote => f.write_str("promote"),
            Action::Switchover => f.write_str("switchover"),
            Action::KillPrimaryNode => f.write_str("kill-primary-node"),
            Action::RestartNode => f.write_str("restart-node"),
            Action::Maintenance { pop, on } => write!(
                f,
                "maintenance {} {}",
                if *pop { "pop" } else { "push" },
                if *on { "on" } else { "off" }
            ),
            Action::TamperSkip => f.write_str("tamper-skip"),
            Action::TamperRewind => f.write_str("tamper-rewind"),
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "duration {}", format_duration(self.duration))?;
        for s in &self.steps {
            writeln!(f, "at {} {}", format_duration(s.at), s.action)?;
        }
        Ok(())
    }
}

fn broker_index(s: &str) -> Result<usize> {
    let i: usize = s
        .parse()
        .with_context(|| format!("bad broker index {s:?}"))?;
    if i >= BROKERS {
        bail!("broker index {i} out of range (0..{BROKERS})");
    }
    Ok(i)
}

fn target(s: &str) -> Result<Target> {
    if s == "all" {
        Ok(Target::All)
    } else {
        broker_index(s).map(Target::One)
    }
}

fn parse_action(words: &[&str]) -> Result<Action> {
    Ok(match words {
        ["cut-pg", t] => Action::CutPg(target(t)?),
        ["restore-pg", t] => Action::RestorePg(target(t)?),
        ["kill", i] => Action::Kill(broker_index(i)?),
        ["restart", i] => Action::Restart(broker_index(i)?),
        ["cut-mesh"] => Action::CutMesh,
        ["restore-mesh"] => Action::RestoreMesh,
        ["terminate-pg"] => Action::TerminatePg,
        ["restart-pg"] => Action::RestartPg,
        ["kill-primary"] => Action::KillPrimary,
        ["freeze-primary"] => Action::FreezePrimary,
        ["promote"] => Action::Promote,
        ["switchover"] => Action::Switchover,
        ["kill-primary-node"] => Action::KillPrimaryNode,
        ["restart-node"] => Action::RestartNode,
        ["maintenance", kind, state] => Action::Maintenance {
            pop: match *kind {
                "push" => false,
                "pop" => true,
                _ => bail!("maintenance is `push` or `pop`, not {kind:?}"),
            },
            on: match *state {
                "on" => true,
                "off" => false,
                _ => bail!("maintenance is switched `on` or `off`, not {state:?}"),
            },
        },
        ["tamper-skip"] => Action::TamperSkip,
        ["tamper-rewind"] => Action::TamperRewind,
        ["pause-consumer", g, c] => Action::PauseConsumer {
            group: g.parse().context("bad group index")?,
            consumer: c.parse().context("bad consumer index")?,
        },
        _ => bail!("unknown step {:?}", words.join(" ")),
    })
}

impl Schedule {
    /// Reads the text form; steps are sorted by time (stable for equal times).
    pub fn parse(text: &str) -> Result<Self> {
        let mut duration = None;
        let mut steps = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let parsed = match words.as_slice() {
                ["duration", d] => parse_duration(d).map(|d| duration = Some(d)),
                ["at", at, rest @ ..] => parse_duration(at).and_then(|at| {
                    steps.push(Step {
                        at,
                        action: parse_action(rest)?,
                    });
                    Ok(())
                }),
                _ => Err(anyhow::anyhow!("expected `duration D` or `at T ACTION`")),
            };
            parsed.with_context(|| format!("schedule line {}: {raw:?}", n + 1))?;
        }
        let last = steps.iter().map(|s| s.at).max().unwrap_or_default();
        let duration = duration.unwrap_or(last + Duration::from_secs(5));
        if last > duration {
            bail!("a step at {last:?} lies past the duration {duration:?}");
        }
        steps.sort_by_key(|s| s.at);
        let plan = Self { duration, steps };
        plan.check_failovers()?;
        Ok(plan)
    }

    /// True for the steps that lose the primary.
    pub fn loses_primary(a: Action) -> bool {
        matches!(a, Action::KillPrimary | Action::FreezePrimary)
    }

    /// True when a step needs a standby (`--standby`).
    pub fn needs_standby(&self) -> bool {
        self.steps
            .iter()
            .any(|s| Self::loses_primary(s.action) || s.action == Action::Promote)
    }

    /// True when a step needs a pg_auto_failover formation (`--pg-auto-failover`).
    pub fn needs_auto_failover(&self) -> bool {
        self.steps.iter().any(|s| {
            matches!(
                s.action,
                Action::Switchover | Action::KillPrimaryNode | Action::RestartNode
            )
        })
    }

    /// True when a step acts on the harness's own PostgreSQL servers or
    /// proxies (cuts, restarts, the `--standby` failovers), which a
    /// pg_auto_failover formation does not have.
    pub fn touches_private_servers(&self) -> bool {
        self.needs_standby()
            || self.steps.iter().any(|s| {
                matches!(
                    s.action,
                    Action::CutPg(_) | Action::RestorePg(_) | Action::RestartPg
                )
            })
    }

    /// Every loss of the primary is followed by one `promote` before the
    /// next loss, and nothing is promoted with the primary still there.
    fn check_failovers(&self) -> Result<()> {
        let mut lost: Option<Duration> = None;
        for s in &self.steps {
            match (s.action, lost) {
                (a, Some(at)) if Self::loses_primary(a) => {
                    bail!(
                        "{a} at {at:?} and again at {:?} without a promote between",
                        s.at
                    )
                }
                (a, None) if Self::loses_primary(a) => lost = Some(s.at),
                (Action::Promote, None) => bail!(
                    "promote at {:?} with the primary still there (two primaries)",
                    s.at
                ),
                (Action::Promote, Some(_)) => lost = None,
                _ => {}
            }
        }
        if let Some(at) = lost {
            bail!("the primary lost at {at:?} is never replaced: a `promote` must follow");
        }
        Ok(())
    }

    /// The same steps spread over `duration` (times scaled proportionally),
    /// except that a `promote` keeps its distance to the loss before it (the
    /// time a failover tool takes does not scale with the run).
    pub fn scaled(&self, duration: Duration) -> Self {
        let k = duration.as_secs_f64() / self.duration.as_secs_f64().max(0.001);
        let mut loss: Option<(Duration, Duration)> = None;
        let mut steps = self
            .steps
            .iter()
            .map(|s| {
                let mut at = Duration::from_millis((s.at.as_millis() as f64 * k).round() as u64);
                if Self::loses_primary(s.action) {
                    loss = Some((s.at, at));
                } else if let (Action::Promote, Some((orig, scaled))) = (s.action, loss) {
                    at = (scaled + s.at.saturating_sub(orig)).min(duration);
                }
                Step {
                    at,
                    action: s.action,
                }
            })
            .collect::<Vec<_>>();
        steps.sort_by_key(|s| s.at);
        Self { duration, steps }
    }

    /// Counts steps that start a fault, by kind, for the summary.
    pub fn describe(&self) -> String {
        let count =
            |f: &dyn Fn(&Action) -> bool| self.steps.iter().filter(|s| f(&s.action)).count();
        format!(
            "{} steps: {} broker kills, {} single PG cuts, {} all-PG cuts, {} PG session kills or restarts, {} primaries killed and {} frozen (then promoted), {} switchovers and {} primary nodes killed (pg_auto_failover), {} mesh cuts, {} maintenance switches, {} consumer pauses",
            self.steps.len(),
            count(&|a| matches!(a, Action::Kill(_))),
            count(&|a| matches!(a, Action::CutPg(Target::One(_)))),
            count(&|a| matches!(a, Action::CutPg(Target::All))),
            count(&|a| matches!(a, Action::TerminatePg | Action::RestartPg)),
            count(&|a| matches!(a, Action::KillPrimary)),
            count(&|a| matches!(a, Action::FreezePrimary)),
            count(&|a| matches!(a, Action::Switchover)),
            count(&|a| matches!(a, Action::KillPrimaryNode)),
            count(&|a| matches!(a, Action::CutMesh)),
            count(&|a| matches!(a, Action::Maintenance { on: true, .. })),
            count(&|a| matches!(a, Action::PauseConsumer { .. })),
        )
    }
}

mod plans;
#[cfg(test)]
mod tests;

pub use plans::{random, short, PgMode};
