//! The plain-SQL baseline cases.

use anyhow::{bail, Result};

use super::{parse_case, Suite};
use crate::baseline;
use crate::meter::Meter;
use crate::results::ScenarioResult;

pub(super) async fn sql_case(suite: &mut Suite, text: &str) -> Result<ScenarioResult> {
    let case = parse_case(text)?;
    let (kind, kind_name) = match case.head.as_deref() {
        Some("rows") => (baseline::Kind::Rows, "sql-rows"),
        Some("commit") => (baseline::Kind::Commit, "sql-commit"),
        Some("segment") => (baseline::Kind::Segment, "sql-segment"),
        other => bail!("SQL case must start with rows, commit or segment, got {other:?}"),
    };
    let spec = baseline::Spec {
        kind,
        clients: case.c.unwrap_or(16),
        batch: if kind == baseline::Kind::Commit {
            1
        } else {
            case.b.unwrap_or(100)
        },
        partitions: case.p.unwrap_or(64),
        messages: case.m.unwrap_or(suite.cfg.messages),
        seconds: suite.seconds(&case),
        payload_bytes: suite.cfg.payload_bytes,
    };
    let id = match kind {
        baseline::Kind::Commit => format!("sql-commit/c{}/p{}", spec.clients, spec.partitions),
        _ => format!(
            "{kind_name}/b{}/c{}/p{}",
            spec.batch, spec.clients, spec.partitions
        ),
    };
    let (db, owned) = match &suite.cfg.db {
        Some(db) if suite.spec.is_none() => (db.clone(), false),
        _ => (suite.scratch_db("sql").await?, true),
    };
    eprintln!(
        "-- {id}: {} clients, {} msgs per transaction, no broker",
        spec.clients, spec.batch
    );
    let result = async {
        let meter = Meter::start(None, &suite.monitor, &suite.cfg.pg, &db).await?;
        let (out, connections) = baseline::run(&suite.cfg.pg, &db, &spec, &id).await?;
        let stopped = meter.stop();
        drop(connections);
        let res = stopped
            .finish(&suite.monitor, &db, suite.settle(), Some(out.seconds))
            .await?;
        let secs = out.seconds.max(1e-9);
        let mut r = ScenarioResult {
            id: id.clone(),
            kind: kind_name.into(),
            messages: out.messages,
            seconds: out.seconds,
            msg_per_s: out.messages as f64 / secs,
            latency_of: "transaction".into(),
            latency: out.latency,
            commits_per_s: Some(out.transactions as f64 / secs),
            resources: Some(res),
            ..ScenarioResult::default()
        };
        r.detail("clients", spec.clients);
        r.detail("messagesPerTransaction", spec.batch);
        r.detail("transactions", out.transactions);
        anyhow::Ok(r)
    }
    .await;
    if owned && !suite.cfg.keep_dbs {
        let _ = suite.monitor.drop_database(&db).await;
    } else if !owned {
        // Leave nothing behind in a database we do not own.
        if let Ok(c) = suite.cfg.pg.connect(&db).await {
            let _ = c
                .batch_execute("DROP TABLE IF EXISTS bench_rows, bench_segments")
                .await;
        }
    }
    result
}
