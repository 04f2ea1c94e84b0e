//! A run rendered for people: the terminal table, the markdown for docs, the side-by-side view.

use std::fmt::Write as _;

use super::{f, ScenarioResult, SuiteReport, PEERS};

impl SuiteReport {
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<38} {:>9} {:>9} {:>5} {:>8} {:>8} {:>8} {:>6} {:>7} {:>7} {:>8} {:>9} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6}",
            "scenario",
            "msgs",
            "msg/s",
            "lat",
            "p50 ms",
            "p99 ms",
            "p99.9",
            "brkCPU",
            "brkCPU%",
            "RSS MB",
            "commit/s",
            "rows/s",
            "srvµs/m",
            "xRows",
            "xCmt",
            "xRMQ",
            "xNATS",
            "other%"
        );
        for r in &self.results {
            if let Some(e) = &r.error {
                let _ = writeln!(out, "{:<38} FAILED: {e}", r.id);
                continue;
            }
            let res = r.resources.as_ref();
            let cpu = res.and_then(|x| x.broker_cpu_s);
            let cpu_pct = res.and_then(|x| x.broker_cpu_s.map(|c| 100.0 * c / x.seconds.max(1e-9)));
            let commits = r.commits_per_s.or_else(|| res.map(|x| x.pg_commits_per_s));
            let _ = writeln!(
                out,
                "{:<38} {:>9} {:>9.0} {:>5} {:>8} {:>8} {:>8} {:>6} {:>7} {:>7} {:>8} {:>9} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6}",
                r.id,
                r.messages,
                r.msg_per_s,
                short_latency(&r.latency_of),
                f(r.latency.p50_ms, 2),
                f(r.latency.p99_ms, 2),
                f(r.latency.p999_ms, 2),
                f(cpu, 1),
                f(cpu_pct, 0),
                f(res.and_then(|x| x.broker_rss_peak_mb), 1),
                f(commits, 0),
                f(res.map(|x| x.pg_rows_per_s), 0),
                f(r.server_cpu_us_per_msg(), 1),
                f(r.ratio_to_sql_rows, 2),
                f(r.ratio_to_sql_commits, 2),
                f(r.ratio_to_rabbitmq, 2),
                f(r.ratio_to_nats, 2),
                f(
                    res.map(|x| 100.0 * x.other_cpu_s / (x.seconds.max(1e-9) * cpus())),
                    0
                ),
            );
        }
        let _ = writeln!(
            out,
            "\nlat: what the percentiles measure (push/pop request, e2e push answered -> received, \
             wake, txn = one SQL transaction); brkCPU: broker CPU seconds; RSS: broker peak; \
             commit/s, rows/s: pg_stat_database deltas; srvµs/m: server CPU per message (broker + \
             PostgreSQL for Queen, the broker process for a peer); xRows/xCmt: msg/s over the \
             plain-SQL row rate / commit rate; xRMQ/xNATS: msg/s over the same case on RabbitMQ / \
             NATS JetStream; other%: machine CPU used by other processes"
        );
        if !self.targets.is_empty() {
            let _ = writeln!(out, "\ntargets:");
            for t in &self.targets {
                let mark = match t.met {
                    Some(true) => "MET ",
                    Some(false) => "MISS",
                    None => "n/a ",
                };
                let _ = writeln!(out, "  [{mark}] {}: {}", t.target, t.measured);
            }
        }
        if !self.comparison.is_empty() {
            let _ = writeln!(out, "\ncompared with the previous run:");
            for c in &self.comparison {
                let _ = writeln!(
                    out,
                    "  {:<30} {:>9.0} -> {:>9.0} msg/s ({:+.1}%), p99 {} -> {} ms{}",
                    c.id,
                    c.previous_msg_per_s,
                    c.msg_per_s,
                    c.change_pct,
                    f(c.previous_p99_ms, 2),
                    f(c.p99_ms, 2),
                    if c.regression {
                        format!("  REGRESSION: {}", c.note)
                    } else {
                        String::new()
                    }
                );
            }
        }
        out
    }

    /// The same numbers as [`SuiteReport::table`], as Markdown tables (for docs/benchmarks.md).
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| scenario | msgs | msg/s | latency of | p50 ms | p99 ms | p99.9 ms | broker CPU s | broker CPU % | broker RSS peak MB | PG commits/s | PG rows/s | PG rows/msg | server CPU µs/msg | x SQL rows | x SQL commits | x RabbitMQ | x NATS | other CPU % |"
        );
        let _ = writeln!(out, "|{}", "---|".repeat(19));
        for r in &self.results {
            if let Some(e) = &r.error {
                let _ = writeln!(out, "| {} | FAILED: {e} |{}", r.id, " |".repeat(17));
                continue;
            }
            let res = r.resources.as_ref();
            let commits = r.commits_per_s.or_else(|| res.map(|x| x.pg_commits_per_s));
            let rows_per_msg = r
                .details
                .get("pgRowsPerMessage")
                .and_then(serde_json::Value::as_f64);
            let _ = writeln!(
                out,
                "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.id,
                r.messages,
                r.msg_per_s,
                r.latency_of,
                f(r.latency.p50_ms, 2),
                f(r.latency.p99_ms, 2),
                f(r.latency.p999_ms, 2),
                f(res.and_then(|x| x.broker_cpu_s), 1),
                f(res.and_then(|x| x.broker_cpu_s.map(|c| 100.0 * c / x.seconds.max(1e-9))), 0),
                f(res.and_then(|x| x.broker_rss_peak_mb), 1),
                f(commits, 0),
                f(res.map(|x| x.pg_rows_per_s), 0),
                f(rows_per_msg, 2),
                f(r.server_cpu_us_per_msg(), 1),
                f(r.ratio_to_sql_rows, 2),
                f(r.ratio_to_sql_commits, 2),
                f(r.ratio_to_rabbitmq, 2),
                f(r.ratio_to_nats, 2),
                f(res.map(|x| 100.0 * x.other_cpu_s / (x.seconds.max(1e-9) * cpus())), 0),
            );
        }
        out.push_str(&self.side_by_side());
        if !self.targets.is_empty() {
            let _ = writeln!(out, "\n| target | measured | met |\n|---|---|---|");
            for t in &self.targets {
                let met = match t.met {
                    Some(true) => "yes",
                    Some(false) => "**no**",
                    None => "not measured",
                };
                let _ = writeln!(out, "| {} | {} | {met} |", t.target, t.measured);
            }
        }
        out
    }

    /// Queen's load cases next to the same cases on the peers (Markdown;
    /// empty when no peer ran): msg/s and server CPU µs per message of each.
    pub fn side_by_side(&self) -> String {
        let peer_ran =
            |r: &ScenarioResult| PEERS.iter().any(|p| r.id.starts_with(&format!("{p}/")));
        if !self.results.iter().any(peer_ran) {
            return String::new();
        }
        let mut out = String::from(
            "\n| case | Queen msg/s | Queen µs/msg | RabbitMQ msg/s | RabbitMQ µs/msg | NATS msg/s | NATS µs/msg | x RabbitMQ | x NATS |\n|---|---|---|---|---|---|---|---|---|\n",
        );
        let cell = |r: Option<&ScenarioResult>| match r {
            Some(r) => (
                format!("{:.0}", r.msg_per_s),
                f(r.server_cpu_us_per_msg(), 1),
            ),
            None => ("-".to_owned(), "-".to_owned()),
        };
        for r in self.results.iter().filter(|r| {
            r.error.is_none()
                && !peer_ran(r)
                && !r.kind.starts_with("sql")
                && !r.kind.starts_with("wake")
        }) {
            let (q, qc) = cell(Some(r));
            let (rb, rbc) = cell(self.find(&format!("{}/{}", PEERS[0], r.id)));
            let (n, nc) = cell(self.find(&format!("{}/{}", PEERS[1], r.id)));
            let _ = writeln!(
                out,
                "| {} | {q} | {qc} | {rb} | {rbc} | {n} | {nc} | {} | {} |",
                r.id,
                f(r.ratio_to_rabbitmq, 2),
                f(r.ratio_to_nats, 2)
            );
        }
        out
    }
}

fn cpus() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

fn short_latency(of: &str) -> &'static str {
    match of {
        "push request" => "push",
        "pop request" => "pop",
        "e2e" => "e2e",
        "wake" => "wake",
        "transaction" => "txn",
        _ => "-",
    }
}
