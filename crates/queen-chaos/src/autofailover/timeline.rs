//! What the formation did, as the clients' journal sees it: a poller that
//! records the monitor's view of the nodes and the server taking writes with
//! its `synchronous_standby_names`, and the report made from that record.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use tokio::time::Instant;

use crate::check::Report;
use crate::journal::{Journal, Told};
use crate::pgserver::{measure, Failover};

/// The poller's period.
const POLL: Duration = Duration::from_millis(100);

/// What the poller saw at one moment (only changes are kept).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Observation {
    at: Duration,
    /// `(name, reported state, goal state)` per node, from the monitor.
    nodes: Vec<(String, String, String)>,
    /// The port of the server taking writes and its `synchronous_standby_names`.
    primary: Option<(u16, String)>,
}

/// Per failover: when the old primary stopped taking writes, when another
/// node did and when synchronous replication came back (lines from
/// [`measure`]); each window without synchronous replication with the
/// pushes acknowledged in it; and violations for a failover after which no
/// other node took writes and for pushes that got no answer (no broker is
/// killed in these runs, so every push must be answered). `failovers_seen`
/// pairs each failover with the node that was primary before it; `ports`
/// names each node's port.
pub(super) fn report(
    failovers_seen: &[(Failover, String)],
    ports: &[(&str, u16)],
    timeline: &[Observation],
    journal: &Journal,
    groups: usize,
    report: &mut Report,
) {
    let port_of = |name: &str| ports.iter().find(|(n, _)| *n == name).map(|(_, p)| *p);
    let mut failovers = Vec::new();
    let ends: Vec<Duration> = failovers_seen
        .iter()
        .skip(1)
        .map(|(f, _)| f.lost_at)
        .chain(std::iter::once(Duration::MAX))
        .collect();
    for ((f, old), until) in failovers_seen.iter().zip(ends) {
        let old_port = port_of(old);
        let mut f = f.clone();
        let step = f.lost_at;
        let timeline: Vec<&Observation> = timeline
            .iter()
            .filter(|o| o.at >= step && o.at < until)
            .collect();
        // the clients lose the primary when it stops taking writes (a
        // switchover drains it first; a kill lands a moment after the step)
        let stopped = timeline
            .iter()
            .find(|o| o.primary.as_ref().is_none_or(|p| Some(p.0) != old_port));
        if let Some(o) = stopped {
            report.lines.push(format!(
                "{} at {:.2}s: {old} stopped taking writes {:.2}s later (the failover line counts from then)",
                f.loss,
                step.as_secs_f64(),
                (o.at - step).as_secs_f64()
            ));
            f.lost_at = o.at;
        }
        let promoted = timeline
            .iter()
            .find(|o| o.primary.as_ref().is_some_and(|p| Some(p.0) != old_port));
        f.promoted_at = promoted.map(|o| o.at);
        if let Some(new_port) = promoted.and_then(|o| o.primary.as_ref()).map(|p| p.0) {
            f.standby_at = timeline
                .iter()
                .find(|o| {
                    o.at >= f.promoted_at.unwrap_or_default()
                        && o.primary
                            .as_ref()
                            .is_some_and(|(port, names)| *port == new_port && !names.is_empty())
                })
                .map(|o| o.at);
        } else {
            report.violation(
                "failover not completed",
                format!(
                    "{} at {:.2}s away from {old}: no other node ever took writes",
                    f.loss,
                    step.as_secs_f64()
                ),
            );
        }
        failovers.push(f);
    }
    report.lines.extend(measure(&failovers, journal, groups));
    report.lines.extend(sync_off_windows(timeline, journal));
    for p in journal.pushes.iter().flatten() {
        if let Told::NoAnswer(why) = &p.told {
            report.violation(
                "push without an answer",
                format!(
                    "{} {} sent at {:.2}s to broker {}: {why}",
                    p.partition,
                    p.txid,
                    p.t_sent as f64 / 1e6,
                    p.broker
                ),
            );
        }
    }
}

/// A connection to the monitor's database through its private socket.
pub(super) async fn monitor_client(dir: &Path, port: u16) -> Result<tokio_postgres::Client> {
    let mut config = tokio_postgres::Config::new();
    config
        .host_path(dir)
        .port(port)
        .user("postgres")
        .dbname("pg_auto_failover")
        .connect_timeout(Duration::from_secs(2));
    let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// `(name, reported state, goal state)` of every node, by node id.
pub(super) async fn node_states(
    monitor: &tokio_postgres::Client,
) -> Result<Vec<(String, String, String)>> {
    let rows = monitor
        .query(
            "SELECT nodename, reportedstate::text, goalstate::text
               FROM pgautofailover.node WHERE formationid = 'default' ORDER BY nodeid",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect())
}

/// The poller: every [`POLL`], the monitor's view and the server taking
/// writes (through the brokers' URI), kept and printed when they change.
pub(super) async fn poll(
    dir: PathBuf,
    monitor_port: u16,
    uri: String,
    t0: Instant,
    timeline: Arc<Mutex<Vec<Observation>>>,
) {
    let limit = Duration::from_secs(1);
    let mut monitor: Option<tokio_postgres::Client> = None;
    let mut primary: Option<tokio_postgres::Client> = None;
    let mut last_nodes = Vec::new();
    let uri = format!("{uri}&connect_timeout=1");
    loop {
        if monitor.is_none() {
            monitor = tokio::time::timeout(limit, monitor_client(&dir, monitor_port))
                .await
                .ok()
                .and_then(Result::ok);
        }
        if let Some(m) = &monitor {
            match tokio::time::timeout(limit, node_states(m)).await {
                Ok(Ok(n)) => last_nodes = n,
                _ => monitor = None,
            }
        }
        if primary.is_none() {
            primary = tokio::time::timeout(limit, async {
                let (c, conn) = tokio_postgres::connect(&uri, tokio_postgres::NoTls).await?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                Ok::<_, tokio_postgres::Error>(c)
            })
            .await
            .ok()
            .and_then(Result::ok);
        }
        let mut writes = None;
        if let Some(p) = &primary {
            let q = p.query_one(
                "SELECT inet_server_port(), current_setting('synchronous_standby_names'), \
                        pg_is_in_recovery()",
                &[],
            );
            match tokio::time::timeout(limit, q).await {
                Ok(Ok(row)) if !row.get::<_, bool>(2) => {
                    writes = Some((row.get::<_, i32>(0) as u16, row.get::<_, String>(1)));
                }
                _ => primary = None,
            }
        }
        let obs = Observation {
            at: t0.elapsed(),
            nodes: last_nodes.clone(),
            primary: writes,
        };
        {
            let mut tl = timeline.lock().unwrap_or_else(|e| e.into_inner());
            let changed = tl
                .last()
                .is_none_or(|l| l.nodes != obs.nodes || l.primary != obs.primary);
            if changed {
                println!(
                    "[{:>7.2}s] formation: {}",
                    obs.at.as_secs_f64(),
                    describe(&obs)
                );
                tl.push(obs);
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

fn describe(o: &Observation) -> String {
    let nodes: Vec<String> = o
        .nodes
        .iter()
        .map(|(n, r, g)| format!("{n} {r}/{g}"))
        .collect();
    let writes = match &o.primary {
        Some((port, names)) => {
            format!("writes on port {port}, synchronous_standby_names '{names}'")
        }
        None => "no server takes writes".to_owned(),
    };
    format!("{}; {writes}", nodes.join(", "))
}

/// The windows in which a server took writes with synchronous replication
/// off (`synchronous_standby_names` empty), with the pushes answered
/// `queued` in each: acknowledged from a single copy.
fn sync_off_windows(timeline: &[Observation], journal: &Journal) -> Vec<String> {
    let mut windows = Vec::new();
    let mut open: Option<Duration> = None;
    for o in timeline {
        match (&o.primary, open) {
            (Some((_, names)), None) if names.is_empty() => open = Some(o.at),
            (Some((_, names)), Some(start)) if !names.is_empty() => {
                windows.push((start, Some(o.at)));
                open = None;
            }
            _ => {}
        }
    }
    if let Some(start) = open {
        windows.push((start, None));
    }
    let us = |d: Duration| d.as_micros() as u64;
    windows
        .iter()
        .map(|(start, end)| {
            let (from, to) = (us(*start), end.map_or(u64::MAX, us));
            let single = journal
                .pushes
                .iter()
                .flatten()
                .filter(|p| matches!(p.told, Told::Queued { .. }))
                .filter(|p| p.t_done >= from && p.t_done <= to)
                .count();
            format!(
                "synchronous replication off (synchronous_standby_names '') from {:.2}s {}: \
                 {single} pushes answered queued from a single copy",
                start.as_secs_f64(),
                match end {
                    Some(e) => format!("for {:.2}s", (*e - *start).as_secs_f64()),
                    None => "until the end of the run".to_owned(),
                }
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_without_synchronous_replication_are_found() {
        let obs = |at: u64, names: Option<&str>| Observation {
            at: Duration::from_secs(at),
            nodes: Vec::new(),
            primary: names.map(|n| (5001, n.to_owned())),
        };
        let timeline = [
            obs(1, Some("ANY 1 (s)")),
            obs(2, None),
            obs(3, Some("")),
            obs(5, Some("ANY 1 (s)")),
            obs(7, Some("")),
        ];
        let lines = sync_off_windows(&timeline, &Journal::default());
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("from 3.00s for 2.00s"), "{lines:?}");
        assert!(lines[1].contains("until the end"), "{lines:?}");
    }
}
