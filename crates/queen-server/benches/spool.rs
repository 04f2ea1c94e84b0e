//! Disk spool throughput: durable appends (fsync on) and replay into PostgreSQL.
//!
//! ```text
//! cargo bench -p queen-server --bench spool -- [--records N] [--writers W]
//!     [--batch B] [--payload-bytes P] [--drain-records N] [--no-drain]
//! ```
//!
//! Append: W concurrent tasks each append batches of B records (one push
//! request each) until N records are durable; every append waits for its
//! fsync, so the number reflects group commit. Drain: a broker on a fresh test
//! database (`QUEEN_TEST_PG`) spools N records under push maintenance mode, then
//! maintenance is turned off and the time until the spool is empty is measured.

use std::sync::Arc;
use std::time::{Duration, Instant};

use queen_proto::spool::Record;
use queen_server::config::SpoolConfig;
use queen_server::spool::Spool;
use queen_testkit::{TestBroker, TestDb};
use serde_json::{json, Value};

struct Args {
    records: usize,
    writers: usize,
    batch: usize,
    payload_bytes: usize,
    drain_records: usize,
    drain: bool,
}

fn args() -> Args {
    let mut a = Args {
        records: 200_000,
        writers: 32,
        batch: 10,
        payload_bytes: 256,
        drain_records: 50_000,
        drain: true,
    };
    let argv: Vec<String> = std::env::args().collect();
    let num = |i: usize| argv.get(i + 1).and_then(|v| v.parse().ok());
    for (i, arg) in argv.iter().enumerate() {
        match arg.as_str() {
            "--records" => a.records = num(i).unwrap_or(a.records),
            "--writers" => a.writers = num(i).unwrap_or(a.writers),
            "--batch" => a.batch = num(i).unwrap_or(a.batch),
            "--payload-bytes" => a.payload_bytes = num(i).unwrap_or(a.payload_bytes),
            "--drain-records" => a.drain_records = num(i).unwrap_or(a.drain_records),
            "--no-drain" => a.drain = false,
            _ => {}
        }
    }
    a
}

fn payload(bytes: usize) -> String {
    format!("{{\"data\":\"{}\"}}", "x".repeat(bytes.saturating_sub(11)))
}

async fn bench_append(a: &Args) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("queen-spool-bench-")
        .tempdir()?;
    let config = SpoolConfig {
        dir: dir.path().to_owned(),
        flush_interval: Duration::from_millis(100),
        max_batch: 100,
        events_per_file: 10_000,
        max_bytes: u64::MAX / 2,
    };
    let spool = Arc::new(Spool::open(&config)?);
    let body = payload(a.payload_bytes);
    let per_writer = a.records / a.writers / a.batch;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..a.writers {
        let spool = spool.clone();
        let body = body.clone();
        let batch = a.batch;
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_writer);
            for n in 0..per_writer {
                let records: Vec<Record> = (0..batch)
                    .map(|i| Record {
                        queue: "bench".into(),
                        partition: format!("p{}", w % 16),
                        transaction_id: format!("{w}-{n}-{i}"),
                        trace_id: None,
                        message_id: None,
                        payload: body.clone(),
                        producer_sub: None,
                        spooled_at_ms: 0,
                    })
                    .collect();
                let t = Instant::now();
                spool.append(&records).await?;
                latencies.push(t.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e3;
    let records = latencies.len() * a.batch;
    let stats = spool.stats();
    println!(
        "append (fsync on): {records} records in {} appends of {} from {} writers, {} B payload: \
         {:.0} records/s, {:.0} appends/s, {:.1} MB/s; latency p50 {:.2} ms p99 {:.2} ms; \
         {} bytes in {} segments",
        latencies.len(),
        a.batch,
        a.writers,
        a.payload_bytes,
        records as f64 / elapsed,
        latencies.len() as f64 / elapsed,
        stats.bytes as f64 / elapsed / 1e6,
        pct(0.5),
        pct(0.99),
        stats.bytes,
        stats.segments,
    );
    Ok(())
}

async fn bench_drain(a: &Args) -> anyhow::Result<()> {
    let db = TestDb::new().await?;
    let dir = tempfile::Builder::new()
        .prefix("queen-spool-bench-")
        .tempdir()?;
    let dir_s = dir.path().display().to_string();
    let b = TestBroker::start_with(
        &db,
        &[
            ("FILE_BUFFER_DIR", dir_s.as_str()),
            ("FILE_BUFFER_FLUSH_MS", "10"),
            ("DB_POOL_SIZE", "4"),
        ],
    )
    .await?;
    b.post("/api/v1/system/maintenance", &json!({"enabled": true}))
        .await;
    let body = payload(a.payload_bytes);
    let chunk = 500;
    for start in (0..a.drain_records).step_by(chunk) {
        let items: Vec<Value> = (start..(start + chunk).min(a.drain_records))
            .map(|i| {
                json!({"queue": "drain-bench", "partition": format!("p{}", i % 16),
                            "payload": {"data": body}, "transactionId": format!("t{i}")})
            })
            .collect();
        let (status, resp) = b.post("/api/v1/push", &json!({ "items": items })).await;
        anyhow::ensure!(status.as_u16() == 201, "push answered {status} {resp}");
    }
    let started = Instant::now();
    b.post("/api/v1/system/maintenance", &json!({"enabled": false}))
        .await;
    loop {
        let (_, state) = b.get("/api/v1/system/maintenance").await;
        if state["bufferedMessages"] == 0 {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "drain too slow: {state}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "drain: {} records over 16 partitions replayed into PostgreSQL in {elapsed:.2} s: \
         {:.0} records/s (FILE_BUFFER_MAX_BATCH=100)",
        a.drain_records,
        a.drain_records as f64 / elapsed
    );
    b.stop().await;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args();
    bench_append(&a).await?;
    if a.drain {
        bench_drain(&a).await?;
    }
    Ok(())
}
