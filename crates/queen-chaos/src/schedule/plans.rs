//! Generated plans: the fixed short plans (CI) and random long ones.

use std::time::Duration;

use anyhow::Result;

use super::{Action, Schedule, Step, Target, BROKERS};
use crate::rng::Rng;

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

/// The fixed short plan with a standby (`--standby`), written for 30 s: the
/// primary killed, then frozen, each promoted away from 1 s later, between
/// the broker faults of the other plan. A promotion clones a new standby
/// (a few seconds on a busy machine), so the steps after it may run late.
pub const SHORT_STANDBY_PLAN: &str = "\
duration 30s
at 1.5s cut-pg 0           # one broker spools
at 3.5s restore-pg 0
at 5s kill-primary         # kill -9 of the primary's postmaster and backends ...
at 6s promote              # ... the standby promoted 1 s later, a new standby cloned
at 10s kill 1              # a broker killed on the new primary
at 11.5s restart 1
at 12s pause-consumer 0 0
at 13s freeze-primary      # SIGSTOP of the new primary, never thawed ...
at 14s promote             # ... promoted away from 1 s later; the probe notices after 5 s
at 22s cut-pg 2            # spool on broker 2, SIGKILL it with records on disk
at 23s kill 2
at 24s restart 2
at 25s restore-pg 2
at 26s terminate-pg
at 26.5s cut-mesh
at 28s restore-mesh
";

/// The fixed plan of `--pg-auto-failover`, written for 60 s: a planned
/// switchover, then the primary node killed (its `pg_autoctl` and its
/// PostgreSQL) and started again 14 s later, so it rejoins as a secondary
/// and synchronous replication comes back. Only the formation fails: the
/// brokers stay up, so every push must be answered.
pub const SHORT_AUTO_FAILOVER_PLAN: &str = "\
duration 60s
at 8s switchover           # pg_autoctl perform switchover
at 24s kill-primary-node   # kill -9 of the primary node; the monitor fails over
at 40s restart-node        # the killed node rejoins as a secondary
";

/// Where the PostgreSQL of a run comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgMode {
    /// The shared server: no PostgreSQL restarts.
    Shared,
    /// A private server (`--private-pg`): `restart-pg` too.
    Private,
    /// A private primary and a synchronous standby (`--standby`): failovers too.
    Standby,
    /// A pg_auto_failover formation (`--pg-auto-failover`): a monitor, a
    /// primary and a secondary; switchovers and killed nodes.
    AutoFailover,
}

/// The short plan (with a standby: [`SHORT_STANDBY_PLAN`]) scaled to `duration`.
pub fn short(duration: Duration, pg: PgMode) -> Result<Schedule> {
    let text = match pg {
        PgMode::Standby => SHORT_STANDBY_PLAN,
        PgMode::AutoFailover => SHORT_AUTO_FAILOVER_PLAN,
        PgMode::Shared | PgMode::Private => SHORT_PLAN,
    };
    Ok(Schedule::parse(text)?.scaled(duration))
}

/// A random plan for long runs: fault episodes one after another with quiet
/// gaps, plus consumer pauses at random moments, all inside 92 % of `duration`.
pub fn random(
    duration: Duration,
    rng: &mut Rng,
    groups: usize,
    consumers: usize,
    pg: PgMode,
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
                if pg != PgMode::Shared && rng.chance(0.5) {
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
    if pg == PgMode::Standby {
        // failovers on a clock of their own, over whatever episode runs then:
        // the primary killed or frozen, the standby promoted 0.5 to 2 s later
        // (which blocks the schedule while the new standby is cloned)
        let mut f = rng.fork(7);
        let mut at = ms(f.between(5_000, 30_000));
        while at + ms(2_000) < end {
            let loss = if f.chance(0.5) {
                Action::KillPrimary
            } else {
                Action::FreezePrimary
            };
            steps.push(Step { at, action: loss });
            let promote = at + ms(f.between(500, 2_000));
            steps.push(Step {
                at: promote,
                action: Action::Promote,
            });
            at = promote + ms(f.between(30_000, 90_000));
        }
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
