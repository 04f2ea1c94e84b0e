//! `queen timers`: schedule (once, every interval, or on a cron), list,
//! peek and cancel (`/api/v1/timers`).

use base64::Engine as _;
use clap::{Subcommand, ValueEnum};
use queen_client::{segment, Client};
use serde_json::{json, Value};

use crate::admin::{items, table_wide};
use crate::output::{self, cell, Failure, Format};
use crate::when;

#[derive(Debug, Subcommand)]
pub enum TimersCommand {
    /// Schedule (or replace) the timer KEY of QUEUE: PAYLOAD is pushed to
    /// the queue when it fires, once, every --interval, or on --cron.
    Schedule(ScheduleArgs),
    /// The pending timers of a queue, in key order.
    List {
        queue: String,
        /// Start after this key (the NEXT AFTER of a truncated page).
        #[arg(long)]
        after: Option<String>,
        /// Most timers (1 to 1000).
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// One timer; status 4 when there is none (or it fired).
    Peek { queue: String, key: String },
    /// Cancel a timer; status 1 when there is none (or it fired).
    Cancel { queue: String, key: String },
}

#[derive(Debug, clap::Args)]
pub struct ScheduleArgs {
    pub queue: String,
    pub key: String,
    /// The message pushed when the timer fires, one JSON value.
    pub payload: String,
    /// Fire after this long (30s, 15m, 2h); default: at once, or at the first tick.
    #[arg(long, value_parser = when::millis_arg, value_name = "DURATION", conflicts_with = "at")]
    pub delay: Option<u64>,
    /// Fire at this time (RFC 3339, or relative: 'in 10m').
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
    /// Fire again every DURATION (100ms to 90d), counted from the schedule.
    #[arg(long, value_parser = when::millis_arg, value_name = "DURATION", conflicts_with = "cron")]
    pub interval: Option<u64>,
    /// Fire on this five-field cron expression ('30 7 * * MON-FRI', '@hourly').
    #[arg(long, value_name = "EXPR")]
    pub cron: Option<String>,
    /// IANA time zone of --cron (default UTC).
    #[arg(long, requires = "cron", value_name = "ZONE")]
    pub timezone: Option<String>,
    /// What a recurring timer does when several ticks passed unfired.
    #[arg(long, value_enum)]
    pub catch_up: Option<CatchUp>,
    /// Transaction id of the fired message (a recurring timer's get `@<tick>`).
    #[arg(long)]
    pub txn: Option<String>,
    /// Partition the message goes to (default: Default).
    #[arg(long, short)]
    pub partition: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CatchUp {
    /// Fire once, as the latest passed tick.
    One,
    /// Fire none of them.
    None,
}

fn schedule_op(a: &ScheduleArgs) -> Result<Value, Failure> {
    let payload: Value = serde_json::from_str(a.payload.trim())
        .map_err(|e| Failure::Usage(format!("the payload is not valid JSON: {e}")))?;
    let text = serde_json::to_vec(&payload).map_err(|e| Failure::Usage(e.to_string()))?;
    let mut op = json!({
        "op": "schedule",
        "queue": a.queue,
        "timerKey": a.key,
        "payload": base64::engine::general_purpose::STANDARD.encode(text),
    });
    let recurring = a.interval.is_some() || a.cron.is_some();
    let delay = match (&a.at, a.delay) {
        (Some(at), _) => {
            let at = when::parse_at(at, chrono::Utc::now()).map_err(Failure::Usage)?;
            Some((at - chrono::Utc::now()).num_milliseconds().max(0))
        }
        (None, Some(ms)) => Some(i64::try_from(ms).unwrap_or(i64::MAX)),
        (None, None) if recurring => None,
        (None, None) => Some(0),
    };
    if let Some(ms) = delay {
        op["delayMs"] = json!(ms);
    }
    if let Some(ms) = a.interval {
        op["intervalMs"] = json!(ms);
    }
    if let Some(c) = &a.cron {
        op["cron"] = json!(c);
    }
    if let Some(z) = &a.timezone {
        op["timezone"] = json!(z);
    }
    if let Some(c) = a.catch_up {
        if !recurring {
            return Err(Failure::Usage(
                "--catch-up is for recurring timers (--interval or --cron)".into(),
            ));
        }
        op["catchUp"] = json!(match c {
            CatchUp::One => "one",
            CatchUp::None => "none",
        });
    }
    if let Some(t) = &a.txn {
        op["txn"] = json!(t);
    }
    if let Some(p) = &a.partition {
        op["partition"] = json!(p);
    }
    Ok(op)
}

/// A timer's schedule in one cell: `once`, `every 3600000 ms` or the cron.
fn schedule_of(t: &Value) -> String {
    if let Some(ms) = t["intervalMs"].as_u64() {
        format!("every {ms} ms")
    } else if let Some(c) = t["cron"].as_str() {
        match t["timezone"].as_str() {
            Some(z) => format!("cron {c} ({z})"),
            None => format!("cron {c}"),
        }
    } else {
        "once".to_owned()
    }
}

/// `v` with a `schedule` field per timer of `rows`, for the table.
fn with_schedule(mut rows: Vec<Value>) -> Vec<Value> {
    for t in &mut rows {
        t["schedule"] = json!(schedule_of(t));
    }
    rows
}

const TIMER_COLUMNS: &[(&str, &str)] = &[
    ("KEY", "/timerKey"),
    ("DELIVER AT", "/deliverAt"),
    ("SCHEDULE", "/schedule"),
    ("PARTITION", "/partition"),
    ("TXN", "/txn"),
];
const TIMER_WIDE: &[(&str, &str)] = &[
    ("FIRES", "/fires"),
    ("ATTEMPTS", "/attempts"),
    ("LAST ERROR", "/lastError"),
    ("MESSAGE ID", "/messageId"),
];

pub async fn run(client: &Client, cmd: TimersCommand, out: Format) -> Result<(), Failure> {
    let admin = client.admin();
    match cmd {
        TimersCommand::Schedule(a) => {
            let op = schedule_op(&a)?;
            let v = admin
                .post_json("/api/v1/timers", &json!({ "operations": [op] }))
                .await?;
            let r = v["results"][0].clone();
            output::show(&r, out, "", |r, _| {
                crate::outln!(
                    "{} timer {} of {}: fires at {} ({})",
                    cell(&r["status"]),
                    a.key,
                    a.queue,
                    cell(&r["deliverAt"]),
                    schedule_of(r)
                );
            })?;
            if r["ok"] == true {
                Ok(())
            } else {
                Err(Failure::Error(format!(
                    "not scheduled: {}",
                    cell(&r["status"])
                )))
            }
        }
        TimersCommand::List {
            queue,
            after,
            limit,
        } => {
            let mut path = format!("/api/v1/timers/{}?limit={limit}", segment(&queue));
            if let Some(a) = after {
                path.push_str(&format!("&after={}", segment(&a)));
            }
            let v = admin.get_json(&path).await?;
            output::show(&v, out, "/rows", |v, wide| {
                let rows = with_schedule(items(v, "rows").to_vec());
                table_wide(&rows, TIMER_COLUMNS, TIMER_WIDE, wide).print_or("no timer");
                if v["truncated"] == true {
                    crate::outln!("more: --after {}", cell(&v["nextAfter"]));
                }
            })
        }
        TimersCommand::Peek { queue, key } => {
            let path = format!("/api/v1/timers/{}/{}", segment(&queue), segment(&key));
            let v = admin.get_json(&path).await?;
            let found = v["found"] == true;
            output::show(&v, out, "", |v, wide| {
                if found {
                    let rows = with_schedule(vec![v.clone()]);
                    let t = table_wide(&rows, TIMER_COLUMNS, TIMER_WIDE, wide);
                    crate::outln!("{}", t.render());
                    crate::outln!("payload {}", cell(&v["payload"]));
                }
            })?;
            if found {
                Ok(())
            } else {
                if out.is_human() {
                    eprintln!("queen: no timer {key} in {queue}");
                }
                Err(Failure::Empty)
            }
        }
        TimersCommand::Cancel { queue, key } => {
            let path = format!("/api/v1/timers/{}/{}", segment(&queue), segment(&key));
            let v = admin.delete_json(&path).await?;
            let r = v.get("results").map_or(v.clone(), |r| r[0].clone());
            let ok = r["ok"] == true;
            output::show(&r, out, "", |_, _| {
                if ok {
                    crate::outln!("cancelled timer {key} of {queue}");
                }
            })?;
            if ok {
                Ok(())
            } else {
                Err(Failure::Error(format!(
                    "no pending timer {key} in {queue} (it may have fired)"
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct T {
        #[command(flatten)]
        a: ScheduleArgs,
    }

    fn op(args: &[&str]) -> Value {
        let t = T::try_parse_from(std::iter::once("t").chain(args.iter().copied())).unwrap();
        schedule_op(&t.a).unwrap()
    }

    #[test]
    fn schedules_once_every_interval_and_on_a_cron() {
        let o = op(&["q", "k", r#"{"a": 1}"#, "--delay", "90s"]);
        assert_eq!(o["delayMs"], 90_000);
        assert_eq!(o["payload"], "eyJhIjoxfQ==");
        let o = op(&["q", "k", "1", "--interval", "1h", "--catch-up", "none"]);
        assert_eq!(
            (o["intervalMs"].as_u64(), o.get("delayMs")),
            (Some(3_600_000), None)
        );
        assert_eq!(o["catchUp"], "none");
        let o = op(&[
            "q",
            "k",
            "1",
            "--cron",
            "30 7 * * MON-FRI",
            "--timezone",
            "Europe/Berlin",
        ]);
        assert_eq!(o["cron"], "30 7 * * MON-FRI");
        assert_eq!(schedule_of(&o), "cron 30 7 * * MON-FRI (Europe/Berlin)");
        assert_eq!(op(&["q", "k", "1"])["delayMs"], 0);
    }
}
