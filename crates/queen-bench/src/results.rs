//! Results of a suite run: one row per scenario, ratios to the plain-SQL
//! baselines, the targets, and the comparison with a previous run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

use crate::load::SeriesPoint;
use crate::meter::{ResourceSample, Resources};
use crate::stats::LatencySummary;

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioResult {
    /// Stable name, e.g. `push/b100/n16/p64`; what comparisons match on.
    pub id: String,
    /// `sql-rows`, `sql-commit`, `sql-segment`, `push`, `pop-ack`, `e2e`, `fanout`, `wake`, `wake-mesh`.
    pub kind: String,
    /// Messages moved: pushed (push, sql), received (pop-ack, e2e), deliveries summed over groups (fanout).
    pub messages: u64,
    pub seconds: f64,
    pub msg_per_s: f64,
    /// What `latency` measures: `push request`, `e2e`, `wake`, `transaction`, `pop request`.
    pub latency_of: String,
    pub latency: LatencySummary,
    /// Other latencies (push/pop/ack requests, wake from push sent).
    #[serde(default)]
    pub latencies: BTreeMap<String, LatencySummary>,
    /// Transactions per second of a SQL baseline.
    #[serde(default)]
    pub commits_per_s: Option<f64>,
    #[serde(default)]
    pub resources: Option<Resources>,
    /// RSS of the freshly started, idle broker of this scenario.
    #[serde(default)]
    pub broker_idle_rss_mb: Option<f64>,
    /// RSS two seconds after the load stopped.
    #[serde(default)]
    pub broker_rss_after_mb: Option<f64>,
    /// Scenario-specific facts (offered rate, redeliveries, completeness, ...).
    #[serde(default)]
    pub details: BTreeMap<String, serde_json::Value>,
    /// msg/s divided by the plain-SQL row rate, and by the plain-SQL commit rate.
    #[serde(default)]
    pub ratio_to_sql_rows: Option<f64>,
    #[serde(default)]
    pub ratio_to_sql_commits: Option<f64>,
    /// msg/s divided by the same case's on RabbitMQ and on NATS JetStream
    /// (Queen's scenarios only).
    #[serde(default)]
    pub ratio_to_rabbitmq: Option<f64>,
    #[serde(default)]
    pub ratio_to_nats: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<SeriesPoint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_series: Vec<ResourceSample>,
    #[serde(default)]
    pub error: Option<String>,
}

impl ScenarioResult {
    pub fn failed(id: String, kind: &str, error: String) -> Self {
        Self {
            id,
            kind: kind.to_owned(),
            error: Some(error),
            ..Self::default()
        }
    }

    pub fn detail(&mut self, key: &str, value: impl Into<serde_json::Value>) {
        self.details.insert(key.to_owned(), value.into());
    }

    /// Server CPU per message in µs: broker and PostgreSQL for Queen, the
    /// broker's process for a peer.
    pub fn server_cpu_us_per_msg(&self) -> Option<f64> {
        let res = self.resources.as_ref()?;
        if self.messages == 0 || self.kind.starts_with("sql") || self.kind.starts_with("wake") {
            return None;
        }
        Some(1e6 * (res.broker_cpu_s? + res.pg_cpu_s) / self.messages as f64)
    }
}

/// Id prefixes of the peer brokers' scenarios.
pub const PEERS: [&str; 2] = ["rabbitmq", "nats"];

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetCheck {
    pub target: String,
    pub measured: String,
    /// `None` when the scenarios it needs did not run.
    pub met: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub id: String,
    pub previous_msg_per_s: f64,
    pub msg_per_s: f64,
    pub change_pct: f64,
    pub previous_p99_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub regression: bool,
    pub note: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct SuiteReport {
    pub tool: String,
    pub started_unix: u64,
    pub git_commit: String,
    /// Files under crates/queen-server with uncommitted changes when the run started.
    pub git_dirty_server: bool,
    pub broker_bin: Option<String>,
    #[serde(default)]
    pub build_note: Option<String>,
    pub machine: BTreeMap<String, String>,
    pub settings: serde_json::Value,
    pub results: Vec<ScenarioResult>,
    #[serde(default)]
    pub targets: Vec<TargetCheck>,
    #[serde(default)]
    pub comparison: Vec<Comparison>,
    /// Systems left out of the run, and why (a peer that did not answer).
    #[serde(default)]
    pub skipped: Vec<String>,
}

fn f(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

impl SuiteReport {
    pub fn find(&self, id: &str) -> Option<&ScenarioResult> {
        self.results
            .iter()
            .find(|r| r.id == id && r.error.is_none())
    }

    fn first_of_kind(&self, kind: &str) -> Option<&ScenarioResult> {
        self.results
            .iter()
            .find(|r| r.kind == kind && r.error.is_none())
    }

    /// Fills in the ratios of every broker scenario to the SQL baselines.
    pub fn compute_ratios(&mut self) {
        let rows = self.first_of_kind("sql-rows").map(|r| r.msg_per_s);
        let commits = self
            .first_of_kind("sql-commit")
            .and_then(|r| r.commits_per_s);
        let peer_rate = |peer: &str, id: &str| {
            self.find(&format!("{peer}/{id}"))
                .map(|p| p.msg_per_s)
                .filter(|v| *v > 0.0)
        };
        let peer_rates: Vec<(Option<f64>, Option<f64>)> = self
            .results
            .iter()
            .map(|r| (peer_rate(PEERS[0], &r.id), peer_rate(PEERS[1], &r.id)))
            .collect();
        for (r, (rabbit, nats)) in self.results.iter_mut().zip(peer_rates) {
            if r.error.is_some() || r.kind.starts_with("sql") || r.kind.starts_with("wake") {
                continue;
            }
            r.ratio_to_sql_rows = rows.filter(|v| *v > 0.0).map(|v| r.msg_per_s / v);
            r.ratio_to_sql_commits = commits.filter(|v| *v > 0.0).map(|v| r.msg_per_s / v);
            r.ratio_to_rabbitmq = rabbit.map(|v| r.msg_per_s / v);
            r.ratio_to_nats = nats.map(|v| r.msg_per_s / v);
        }
    }

    /// The targets, evaluated on the scenarios of this run.
    pub fn compute_targets(&mut self) {
        let mut out = Vec::new();
        let rows = self.first_of_kind("sql-rows").map(|r| r.msg_per_s);
        let commits = self
            .first_of_kind("sql-commit")
            .and_then(|r| r.commits_per_s);
        let push64 = self.find("push/b100/n16/p64").map(|r| r.msg_per_s);
        let push10k = self.find("push/b100/n16/p10000").map(|r| r.msg_per_s);
        let push1 = self.find("push/b1/n64/p64").map(|r| r.msg_per_s);

        let ratio_check =
            |name: &str, num: Option<f64>, den: Option<f64>, want: f64| match (num, den) {
                (Some(n), Some(d)) if d > 0.0 => TargetCheck {
                    target: format!("{name} >= {want:.1}x"),
                    measured: format!("{n:.0} / {d:.0} = {:.2}x", n / d),
                    met: Some(n / d >= want),
                },
                _ => TargetCheck {
                    target: format!("{name} >= {want:.1}x"),
                    measured: "not measured".into(),
                    met: None,
                },
            };
        out.push(ratio_check(
            "push b100/16 producers/64 partitions vs plain-SQL rows/s",
            push64,
            rows,
            1.0,
        ));
        out.push(ratio_check(
            "push b1/64 producers vs plain-SQL commits/s (64 clients)",
            push1,
            commits,
            2.5,
        ));

        let e2e_max = self.find("e2e/b100/n16/c16/p64/rmax");
        out.push(match e2e_max {
            Some(r) => TargetCheck {
                target: "e2e push+pop+ack b100 flat out >= 100000 msg/s".into(),
                measured: format!("{:.0} msg/s", r.msg_per_s),
                met: Some(r.msg_per_s >= 100_000.0),
            },
            None => TargetCheck {
                target: "e2e push+pop+ack b100 flat out >= 100000 msg/s".into(),
                measured: "not measured".into(),
                met: None,
            },
        });
        let half = self.find("e2e/b100/n16/c16/p64/r50000");
        out.push(match half {
            Some(r) => {
                let offered = r
                    .details
                    .get("offeredMsgPerS")
                    .and_then(serde_json::Value::as_f64)
                    .unwrap_or(50_000.0);
                let kept_up = r.msg_per_s >= 0.95 * offered;
                let p99 = r.latency.p99_ms;
                TargetCheck {
                    target: "e2e at 50000 msg/s offered (half of 100k): p99 < 100 ms".into(),
                    measured: format!(
                        "p99 {} ms at {:.0} msg/s achieved{}",
                        f(p99, 1),
                        r.msg_per_s,
                        if kept_up { "" } else { " (did not keep up)" }
                    ),
                    met: Some(kept_up && p99.is_some_and(|p| p < 100.0)),
                }
            }
            None => TargetCheck {
                target: "e2e at 50000 msg/s offered: p99 < 100 ms".into(),
                measured: "not measured".into(),
                met: None,
            },
        });
        out.push(ratio_check(
            "push 10000 partitions vs 64 partitions",
            push10k,
            push64,
            0.8,
        ));
        out.push(ratio_check(
            "e2e 10000 partitions vs 64 partitions",
            self.find("e2e/b100/n16/c16/p10000/rmax")
                .map(|r| r.msg_per_s),
            e2e_max.map(|r| r.msg_per_s),
            0.8,
        ));
        for (kind, limit) in [("wake", 2.0), ("wake-mesh", 5.0)] {
            let r = self.first_of_kind(kind);
            let p50 = r.and_then(|r| r.latency.p50_ms);
            out.push(TargetCheck {
                target: format!("long-poll wake p50 ({kind}) < {limit} ms"),
                measured: p50.map_or_else(
                    || "not measured".into(),
                    |p| {
                        format!(
                            "p50 {p:.2} ms, p99 {} ms",
                            f(r.and_then(|r| r.latency.p99_ms), 2)
                        )
                    },
                ),
                met: p50.map(|p| p < limit),
            });
        }
        let idle = self
            .results
            .iter()
            .filter_map(|r| r.broker_idle_rss_mb)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        out.push(TargetCheck {
            target: "broker RSS idle < 20 MB".into(),
            measured: idle.map_or_else(
                || "not measured".into(),
                |v| format!("{v:.1} MB (largest idle RSS of a fresh broker)"),
            ),
            met: idle.map(|v| v < 20.0),
        });
        let peak = e2e_max
            .and_then(|r| r.resources.as_ref())
            .and_then(|r| r.broker_rss_peak_mb);
        out.push(TargetCheck {
            target: "broker RSS under e2e load < 64 MB".into(),
            measured: peak.map_or_else(|| "not measured".into(), |v| format!("{v:.1} MB peak")),
            met: peak.map(|v| v < 64.0),
        });
        let _ = commits;
        out.extend(self.peer_targets());
        self.targets = out;
    }

    /// Issue 19's targets against the peers, on the comparison cases (16
    /// requests in flight, 16 partitions); "not measured" when a case or its
    /// peer run is missing.
    fn peer_targets(&self) -> Vec<TargetCheck> {
        let check = |target: String, measured: Option<(String, bool)>| TargetCheck {
            target,
            met: measured.as_ref().map(|m| m.1),
            measured: measured.map_or_else(|| "not measured".into(), |m| m.0),
        };
        let vs_rabbit = |id: &str, want: f64| {
            let r = self.find(id)?;
            let x = r.ratio_to_rabbitmq?;
            Some((
                format!("{:.0} msg/s, {x:.2}x RabbitMQ", r.msg_per_s),
                x >= want,
            ))
        };
        let cpu = |id: &str, max: f64| {
            let us = self.find(id)?.server_cpu_us_per_msg()?;
            Some((format!("{us:.1} µs"), us <= max))
        };
        let mut out = Vec::new();
        for (id, want) in [
            ("pop-ack/b100/c16/p16", 1.0),
            ("pop-ack/b1/c16/p16", 1.0),
            ("e2e/b100/n16/c16/p16/rmax", 1.0),
            ("push/b100/n16/p16", 1.5),
            ("push/b1/n16/p16", 1.0),
            ("push/b1/n64/p16", 1.0),
        ] {
            out.push(check(
                format!("{id} vs RabbitMQ >= {want:.1}x"),
                vs_rabbit(id, want),
            ));
        }
        out.push(check(
            "pop-ack/b100/c16/p16 server CPU <= 12 µs per message".into(),
            cpu("pop-ack/b100/c16/p16", 12.0),
        ));
        out.push(check(
            "e2e/b100/n16/c16/p16/rmax server CPU <= 30 µs per message".into(),
            cpu("e2e/b100/n16/c16/p16/rmax", 30.0),
        ));
        let per_request = self.find("pop-ack/b1/c16/p16").and_then(|r| {
            let res = r.resources.as_ref()?;
            let pops = r.details.get("popRequests")?.as_f64()?;
            let empty = r
                .details
                .get("emptyPops")
                .and_then(serde_json::Value::as_f64);
            let full = pops - empty.unwrap_or(0.0);
            (full > 0.0).then(|| {
                let us = 1e6 * res.pg_cpu_s / full;
                (format!("{us:.0} µs"), us < 150.0)
            })
        });
        out.push(check(
            "pop-ack/b1/c16/p16 PostgreSQL CPU per pop+ack request < 150 µs".into(),
            per_request,
        ));
        out.push(check(
            "e2e/b100/n16/c16/p16/r50% p99 < 50 ms".into(),
            self.find("e2e/b100/n16/c16/p16/r50%").and_then(|r| {
                let p99 = r.latency.p99_ms?;
                Some((format!("p99 {p99:.1} ms"), p99 < 50.0))
            }),
        ));
        let nats: Vec<(&str, f64)> = self
            .results
            .iter()
            .filter_map(|r| Some((r.id.as_str(), r.ratio_to_nats?)))
            .collect();
        out.push(check(
            "stretch: every case within 2x of NATS JetStream (>= 0.5x)".into(),
            nats.iter()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(id, x)| (format!("lowest {x:.2}x ({id})"), *x >= 0.5)),
        ));
        out
    }

    /// Compares with a previous run: a throughput drop beyond `pct` percent, or a
    /// p99 latency rise beyond `latency_pct` percent, is a regression.
    pub fn compare(&mut self, previous: &SuiteReport, pct: f64, latency_pct: f64) {
        let mut out = Vec::new();
        for r in &self.results {
            if r.error.is_some() {
                continue;
            }
            let Some(p) = previous.find(&r.id) else {
                continue;
            };
            let change = if p.msg_per_s > 0.0 {
                100.0 * (r.msg_per_s - p.msg_per_s) / p.msg_per_s
            } else {
                0.0
            };
            let mut notes = Vec::new();
            // Wake scenarios are latency-only; a run at an offered rate that
            // differs from the previous run's (`r50%` of a different maximum)
            // cannot be compared on throughput either.
            let offered = |x: &ScenarioResult| {
                x.details
                    .get("offeredMsgPerS")
                    .and_then(serde_json::Value::as_f64)
            };
            let other_offer = match (offered(r), offered(p)) {
                (Some(a), Some(b)) => (a - b).abs() > 0.01 * b,
                _ => false,
            };
            let latency_only = r.kind.starts_with("wake") || other_offer;
            if !latency_only && change < -pct {
                notes.push(format!("throughput {change:+.1}%"));
            }
            if let (Some(a), Some(b)) = (p.latency.p99_ms, r.latency.p99_ms) {
                if a > 0.0 && 100.0 * (b - a) / a > latency_pct && b - a > 1.0 {
                    notes.push(format!("p99 {a:.2} -> {b:.2} ms"));
                }
            }
            out.push(Comparison {
                id: r.id.clone(),
                previous_msg_per_s: p.msg_per_s,
                msg_per_s: r.msg_per_s,
                change_pct: change,
                previous_p99_ms: p.latency.p99_ms,
                p99_ms: r.latency.p99_ms,
                regression: !notes.is_empty(),
                note: notes.join(", "),
            });
        }
        self.comparison = out;
    }

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

    pub fn write_json(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut json = serde_json::to_string_pretty(self).context("serializing report")?;
        json.push('\n');
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))
    }

    pub fn read_json(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }
}

/// Logical CPUs of this machine (the denominator of the `other%` column).
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

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, kind: &str, rate: f64, p99: f64) -> ScenarioResult {
        ScenarioResult {
            id: id.into(),
            kind: kind.into(),
            msg_per_s: rate,
            latency: LatencySummary {
                count: 1,
                p50_ms: Some(p99 / 2.0),
                p99_ms: Some(p99),
                p999_ms: Some(p99),
                max_ms: Some(p99),
            },
            ..ScenarioResult::default()
        }
    }

    #[test]
    fn ratios_and_targets() {
        let mut rows = result("sql-rows/b100/c16/p64", "sql-rows", 400_000.0, 5.0);
        rows.commits_per_s = Some(4_000.0);
        let mut commit = result("sql-commit/c64/p64", "sql-commit", 25_000.0, 3.0);
        commit.commits_per_s = Some(25_000.0);
        let mut rep = SuiteReport {
            results: vec![
                rows,
                commit,
                result("push/b100/n16/p64", "push", 200_000.0, 10.0),
                result("push/b100/n16/p10000", "push", 180_000.0, 10.0),
                result("push/b1/n64/p64", "push", 70_000.0, 10.0),
                result("wake/same", "wake", 0.0, 3.0),
                result("rabbitmq/push/b100/n16/p64", "push", 100_000.0, 10.0),
                result("nats/push/b100/n16/p64", "push", 400_000.0, 10.0),
                result("push/b1/n16/p16", "push", 8_000.0, 10.0),
                result("rabbitmq/push/b1/n16/p16", "push", 10_000.0, 10.0),
            ],
            ..SuiteReport::default()
        };
        rep.compute_ratios();
        assert_eq!(rep.results[2].ratio_to_rabbitmq, Some(2.0));
        assert_eq!(rep.results[2].ratio_to_nats, Some(0.5));
        assert_eq!(
            rep.results[3].ratio_to_rabbitmq, None,
            "no peer run of that case"
        );
        assert_eq!(
            rep.results[6].ratio_to_rabbitmq, None,
            "a peer is not compared with itself"
        );
        assert_eq!(rep.results[2].ratio_to_sql_rows, Some(0.5));
        assert_eq!(rep.results[4].ratio_to_sql_commits, Some(2.8));
        assert_eq!(rep.results[5].ratio_to_sql_rows, None);
        rep.compute_targets();
        let met = |prefix: &str| {
            rep.targets
                .iter()
                .find(|t| t.target.starts_with(prefix))
                .unwrap()
                .met
        };
        assert_eq!(met("push b100"), Some(false));
        assert_eq!(met("push b1/"), Some(true));
        assert_eq!(met("push 10000"), Some(true));
        assert_eq!(met("long-poll wake p50 (wake)"), Some(true));
        assert_eq!(met("long-poll wake p50 (wake-mesh)"), None);
        assert_eq!(met("push/b1/n16/p16 vs RabbitMQ"), Some(false));
        assert_eq!(met("push/b100/n16/p16 vs RabbitMQ"), None);
        assert_eq!(met("stretch"), Some(true), "the one case run on NATS: 0.5x");
        assert!(rep.table().contains("MISS"));
        let sbs = rep.side_by_side();
        assert!(
            sbs.contains(
                "| push/b100/n16/p64 | 200000 | - | 100000 | - | 400000 | - | 2.00 | 0.50 |"
            ),
            "{sbs}"
        );
        assert!(
            !sbs.contains("| rabbitmq/"),
            "peers' rows are columns: {sbs}"
        );
        assert_eq!(SuiteReport::default().side_by_side(), "");
    }

    #[test]
    fn comparison_flags_drops_and_latency_rises() {
        let prev = SuiteReport {
            results: vec![
                result("a", "push", 100.0, 10.0),
                result("b", "push", 100.0, 10.0),
                result("c", "wake", 0.0, 1.0),
            ],
            ..SuiteReport::default()
        };
        let mut now = SuiteReport {
            results: vec![
                result("a", "push", 85.0, 10.0),
                result("b", "push", 95.0, 30.0),
                result("c", "wake", 0.0, 1.2),
                result("new", "push", 1.0, 1.0),
            ],
            ..SuiteReport::default()
        };
        now.compare(&prev, 10.0, 50.0);
        assert_eq!(now.comparison.len(), 3);
        assert!(now.comparison[0].regression, "15% slower");
        assert!(now.comparison[1].regression, "p99 tripled");
        assert!(
            !now.comparison[2].regression,
            "small absolute latency change"
        );
        let json = serde_json::to_string(&now).unwrap();
        let back: SuiteReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back.results.len(), 4);
    }
}
