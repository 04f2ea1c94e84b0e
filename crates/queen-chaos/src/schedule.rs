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
//! ```
//!
//! `tamper-skip` and `tamper-rewind` break the data behind the brokers' backs;
//! they exist to prove the checker catches a broken broker (see
//! `schedules/selftest.txt`).

use std::fmt;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};

use crate::rng::Rng;

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
        Ok(Self { duration, steps })
    }

    /// The same steps spread over `duration` (times scaled proportionally).
    pub fn scaled(&self, duration: Duration) -> Self {
        let k = duration.as_secs_f64() / self.duration.as_secs_f64().max(0.001);
        let steps = self
            .steps
            .iter()
            .map(|s| Step {
                at: Duration::from_millis((s.at.as_millis() as f64 * k).round() as u64),
                action: s.action,
            })
            .collect();
        Self { duration, steps }
    }

    /// Counts steps that start a fault, by kind, for the summary.
    pub fn describe(&self) -> String {
        let count =
            |f: &dyn Fn(&Action) -> bool| self.steps.iter().filter(|s| f(&s.action)).count();
        format!(
            "{} steps: {} broker kills, {} single PG cuts, {} all-PG cuts, {} PG session kills or restarts, {} mesh cuts, {} maintenance switches, {} consumer pauses",
            self.steps.len(),
            count(&|a| matches!(a, Action::Kill(_))),
            count(&|a| matches!(a, Action::CutPg(Target::One(_)))),
            count(&|a| matches!(a, Action::CutPg(Target::All))),
            count(&|a| matches!(a, Action::TerminatePg | Action::RestartPg)),
            count(&|a| matches!(a, Action::CutMesh)),
            count(&|a| matches!(a, Action::Maintenance { on: true, .. })),
            count(&|a| matches!(a, Action::PauseConsumer { .. })),
        )
    }
}

/// The fixed short plan (CI): every kind of fault once or twice, written for
/// 60 s and scaled to `duration`. The last few seconds are quiet.
pub const SHORT_PLAN: &str = "\
duration 60s
at 3.6s cut-pg 0            # one broker spools, the others write directly
at 9s restore-pg 0
at 10.8s kill 1             # SIGKILL mid-traffic, down for 3 s
at 13.8s restart 1
at 16.2s cut-mesh           # hints lost: long polls fall back to re-checks
at 18s pause-consumer 0 0   # a consumer holds a batch past its 2 s lease
at 19s maintenance push on  # every push spooled; the others learn it by reconcile (mesh cut)
at 21.5s maintenance push off
at 24s restore-mesh
at 25.8s cut-pg all         # every broker spools at once
at 30s restore-pg all
at 30.6s maintenance pop on # every pop answers empty for a second
at 31.4s maintenance pop off
at 31.8s cut-pg 2           # spool on broker 2, then SIGKILL it with records on disk
at 34.2s kill 2
at 36.6s restart 2          # starts without PostgreSQL, replays once the link is back
at 37.2s pause-consumer 1 1
at 39.6s restore-pg 2
at 42s kill 0               # SIGKILL and immediate restart
at 42.3s restart 0
at 44.4s cut-mesh           # mesh cut and a kill together
at 45s kill 1
at 47.4s restart 1
at 49.2s restore-mesh
at 50.4s terminate-pg       # every PostgreSQL session of the database killed at once
at 51.6s cut-pg 1           # spool on broker 1 ...
at 54s restore-pg 1
at 54.6s kill 1             # ... and SIGKILL it while it replays (its probe runs every 500 ms)
at 55.5s restart 1
";

/// The short plan scaled to `duration`.
pub fn short(duration: Duration) -> Result<Schedule> {
    Ok(Schedule::parse(SHORT_PLAN)?.scaled(duration))
}

/// A random plan for long runs: fault episodes one after another with quiet
/// gaps, plus consumer pauses at random moments, all inside 92 % of `duration`.
pub fn random(
    duration: Duration,
    rng: &mut Rng,
    groups: usize,
    consumers: usize,
    private_pg: bool,
) -> Schedule {
    let end = duration.mul_f64(0.92);
    let ms = Duration::from_millis;
    let mut steps = Vec::new();
    let mut push = |at: Duration, action: Action| steps.push(Step { at, action });
    let mut t = ms(2_000);
    while t < end {
        let b = rng.index(BROKERS);
        let start = t;
        t = match rng.below(100) {
            // SIGKILL and restart after 0 to 4 s
            0..=19 => {
                push(t, Action::Kill(b));
                let back = t + ms(rng.between(0, 4_000));
                push(back, Action::Restart(b));
                back
            }
            // one broker loses PostgreSQL for 1 to 8 s
            20..=39 => {
                push(t, Action::CutPg(Target::One(b)));
                let back = t + ms(rng.between(1_000, 8_000));
                push(back, Action::RestorePg(Target::One(b)));
                back
            }
            // every broker loses PostgreSQL for 1 to 5 s
            40..=51 => {
                push(t, Action::CutPg(Target::All));
                let back = t + ms(rng.between(1_000, 5_000));
                push(back, Action::RestorePg(Target::All));
                back
            }
            // the mesh is cut for 2 to 10 s
            52..=63 => {
                push(t, Action::CutMesh);
                let back = t + ms(rng.between(2_000, 10_000));
                push(back, Action::RestoreMesh);
                back
            }
            // SIGKILL while spooling: records on disk survive the crash
            64..=79 => {
                push(t, Action::CutPg(Target::One(b)));
                let kill = t + ms(rng.between(1_000, 3_000));
                push(kill, Action::Kill(b));
                let restart = kill + ms(rng.between(300, 2_000));
                push(restart, Action::Restart(b));
                let back = restart + ms(rng.between(0, 4_000));
                push(back, Action::RestorePg(Target::One(b)));
                back.max(restart)
            }
            // mesh cut with a broker killed under it
            80..=87 => {
                push(t, Action::CutMesh);
                let kill = t + ms(rng.between(500, 2_000));
                push(kill, Action::Kill(b));
                let restart = kill + ms(rng.between(500, 3_000));
                push(restart, Action::Restart(b));
                let back = restart + ms(rng.between(500, 3_000));
                push(back, Action::RestoreMesh);
                back
            }
            // push maintenance: every broker spools, then replays
            88..=89 => {
                push(
                    t,
                    Action::Maintenance {
                        pop: false,
                        on: true,
                    },
                );
                let back = t + ms(rng.between(1_000, 5_000));
                push(
                    back,
                    Action::Maintenance {
                        pop: false,
                        on: false,
                    },
                );
                back
            }
            // PostgreSQL drops every session, as on a restart; with a private
            // server, half the time it really crashes and restarts
            90..=92 => {
                if private_pg && rng.chance(0.5) {
                    push(t, Action::RestartPg);
                    t + ms(3_000)
                } else {
                    push(t, Action::TerminatePg);
                    t + ms(500)
                }
            }
            // a flapping link: short cuts in quick succession
            93..=95 => {
                let mut at = t;
                for _ in 0..rng.between(2, 5) {
                    push(at, Action::CutPg(Target::One(b)));
                    at += ms(rng.between(50, 400));
                    push(at, Action::RestorePg(Target::One(b)));
                    at += ms(rng.between(50, 600));
                }
                at
            }
            // spool, restore, and SIGKILL while the spool replays
            96..=97 => {
                push(t, Action::CutPg(Target::One(b)));
                let back = t + ms(rng.between(1_000, 4_000));
                push(back, Action::RestorePg(Target::One(b)));
                let kill = back + ms(rng.between(300, 1_200));
                push(kill, Action::Kill(b));
                let restart = kill + ms(rng.between(100, 1_500));
                push(restart, Action::Restart(b));
                restart
            }
            // every broker killed at once, restarted one by one
            _ => {
                for i in 0..BROKERS {
                    push(t, Action::Kill(i));
                }
                let mut at = t + ms(rng.between(500, 3_000));
                for i in 0..BROKERS {
                    push(at, Action::Restart(i));
                    at += ms(rng.between(0, 1_000));
                }
                at
            }
        };
        t = t.max(start) + ms(rng.between(1_000, 6_000));
    }
    if groups > 0 && consumers > 0 {
        let mut p = ms(rng.between(3_000, 15_000));
        while p < end {
            steps.push(Step {
                at: p,
                action: Action::PauseConsumer {
                    group: rng.index(groups),
                    consumer: rng.index(consumers),
                },
            });
            p += ms(rng.between(5_000, 20_000));
        }
    }
    steps.retain(|s| s.at <= duration);
    steps.sort_by_key(|s| s.at);
    Schedule { duration, steps }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_format_back() {
        assert_eq!(parse_duration("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("7").unwrap(), Duration::from_secs(7));
        assert!(parse_duration("7y").is_err());
        for d in ["3s", "1500ms", "0s"] {
            assert_eq!(format_duration(parse_duration(d).unwrap()), d);
        }
    }

    #[test]
    fn short_plan_round_trips() {
        let s = short(Duration::from_secs(60)).unwrap();
        assert!(s.steps.len() > 10);
        assert_eq!(Schedule::parse(&s.to_string()).unwrap(), s);
        let half = short(Duration::from_secs(30)).unwrap();
        assert_eq!(half.steps[0].at, Duration::from_millis(1800));
    }

    #[test]
    fn random_plan_stays_inside_and_round_trips() {
        let d = Duration::from_secs(600);
        let s = random(d, &mut Rng::new(3), 2, 3, true);
        assert!(s.steps.iter().all(|st| st.at <= d));
        assert!(s.steps.windows(2).all(|w| w[0].at <= w[1].at));
        assert_eq!(Schedule::parse(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn bad_lines_name_their_line() {
        let e = Schedule::parse("at 1s kill 7").unwrap_err();
        assert!(format!("{e:#}").contains("line 1"), "{e:#}");
    }
}
