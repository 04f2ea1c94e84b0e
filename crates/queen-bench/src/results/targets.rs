//! The targets checked against a run: the plain-SQL ratios and the peers.

use super::{f, SuiteReport, TargetCheck};

impl SuiteReport {
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
}
