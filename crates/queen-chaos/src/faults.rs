//! The faults of a schedule step applied to the cluster, the checker self-test, and the
//! brokers' answers the checks read (spool states, DLQ totals).

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;

use crate::autofailover::Formation;
use crate::check::SpoolState;
use crate::cluster::Cluster;
use crate::pgserver::{Loss, PgServers};
use crate::schedule::Action;
use crate::workload::Control;

pub(crate) async fn apply(
    cluster: &mut Cluster,
    ctl: &Control,
    admin: &mut tokio_postgres::Client,
    db_name: &str,
    pg: Option<&mut PgServers>,
    formation: Option<&mut Formation>,
    action: Action,
) {
    match action {
        Action::Switchover | Action::KillPrimaryNode | Action::RestartNode => match formation {
            Some(f) => f.apply(action).await,
            None => println!("  {action} needs --pg-auto-failover; skipped"),
        },
        Action::RestartPg => match pg {
            Some(pg) => match pg.restart().await {
                Ok(()) => println!("  PostgreSQL crashed and back"),
                Err(e) => println!("  restart-pg failed: {e:#}"),
            },
            None => println!("  restart-pg needs --private-pg; skipped"),
        },
        Action::KillPrimary | Action::FreezePrimary => {
            let loss = if action == Action::KillPrimary {
                Loss::Killed
            } else {
                Loss::Frozen
            };
            match pg.map(|pg| pg.lose_primary(loss)) {
                Some(Ok(())) => println!("  primary {loss:?}"),
                Some(Err(e)) => println!("  {action} failed: {e:#}"),
                None => println!("  {action} needs --standby; skipped"),
            }
        }
        Action::Promote => match pg {
            Some(pg) => match pg.promote(|slot, a| cluster.retarget_pg(slot, a)).await {
                Ok((promoted, standby)) => {
                    println!(
                        "  standby promoted in {:.2}s; a new synchronous standby streams {:.2}s after the promote began",
                        promoted.as_secs_f64(),
                        standby.as_secs_f64()
                    );
                    match pg.target().client().await {
                        Ok(c) => *admin = c,
                        Err(e) => println!("  no admin connection to the new primary: {e:#}"),
                    }
                }
                Err(e) => println!("  promote failed: {e:#}"),
            },
            None => println!("  promote needs --standby; skipped"),
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
pub(crate) async fn tamper(admin: &tokio_postgres::Client, delta: i64) {
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
pub(crate) async fn spool_states(http: &reqwest::Client, urls: &[String]) -> Vec<SpoolState> {
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
pub(crate) async fn dlq_total(
    http: &reqwest::Client,
    url: &str,
    queue: &str,
    group: &str,
) -> Option<u64> {
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
