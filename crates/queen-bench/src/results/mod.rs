//! Results of a suite run: one row per scenario, ratios to the plain-SQL
//! baselines, the targets, and the comparison with a previous run.

use std::collections::BTreeMap;
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

mod render;
mod targets;

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
