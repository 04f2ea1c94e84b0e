//! `queen tx -f FILE` (a transaction of acks and pushes, with the `kv` and
//! `timers` riders) and `queen lease extend`.

use std::io::Read as _;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use queen_client::Client;
use serde_json::{json, Value};

use crate::output::{self, cell, Failure, Format};

#[derive(Debug, Args)]
pub struct TxArgs {
    /// The transaction as JSON or YAML ("-" for standard input):
    /// `{"operations": [{"type": "ack", …}, {"type": "push", "items": […]}], "kv"?: […], "timers"?: […]}`,
    /// or just the list of operations.
    #[arg(long, short)]
    pub file: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum LeaseCommand {
    /// Extend a lease (every partition it covers) to now + SECONDS.
    Extend {
        lease_id: String,
        /// Seconds from now (1 to 86400).
        #[arg(long, default_value_t = 60)]
        seconds: u32,
    },
}

/// The keys a transaction body may have.
const TOP_LEVEL: &[&str] = &["operations", "kv", "timers"];

/// Reads a transaction body, refusing what the broker would not take.
pub fn parse(name: &str, text: &str) -> Result<Value, String> {
    let v: Value = serde_yaml_ng::from_str(text).map_err(|e| format!("{name}: {e}"))?;
    let body = match v {
        Value::Array(ops) => json!({ "operations": ops }),
        Value::Object(map) => {
            if let Some(k) = map.keys().find(|k| !TOP_LEVEL.contains(&k.as_str())) {
                return Err(format!(
                    "{name}: unknown key {k:?} (a transaction has operations, kv and timers)"
                ));
            }
            Value::Object(map)
        }
        _ => {
            return Err(format!(
                "{name}: a transaction is an object or a list of operations"
            ))
        }
    };
    for key in TOP_LEVEL {
        if !body.get(*key).is_none_or(Value::is_array) {
            return Err(format!("{name}: {key} must be a list"));
        }
    }
    let ops = body["operations"].as_array().map_or(&[][..], Vec::as_slice);
    for (i, op) in ops.iter().enumerate() {
        match op["type"].as_str() {
            Some("ack" | "push") => {}
            _ => {
                return Err(format!(
                    "{name}: operation {} has no type ack or push",
                    i + 1
                ))
            }
        }
    }
    let riders = ["kv", "timers"]
        .iter()
        .any(|k| body[*k].as_array().is_some_and(|a| !a.is_empty()));
    if ops.is_empty() && !riders {
        return Err(format!("{name} holds no operation"));
    }
    Ok(body)
}

fn read(path: &PathBuf) -> Result<(String, String), Failure> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Failure::Usage(format!("cannot read standard input: {e}")))?;
        return Ok(("standard input".into(), text));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
    Ok((path.display().to_string(), text))
}

pub async fn run(client: &Client, args: &TxArgs, out: Format) -> Result<(), Failure> {
    let (name, text) = read(&args.file)?;
    let body = parse(&name, &text).map_err(|e| Failure::Usage(format!("{e}; nothing was sent")))?;
    let v = client
        .admin()
        .post_json("/api/v1/transaction", &body)
        .await?;
    let ok = v["success"] == true;
    output::show(&v, out, "/results", |v, _| {
        if ok {
            crate::outln!(
                "transaction {} committed: {} operation(s)",
                cell(&v["transactionId"]),
                v["results"].as_array().map_or(0, Vec::len)
            );
        }
    })?;
    if ok {
        Ok(())
    } else {
        let reason = v
            .get("kvReason")
            .map(|r| format!(" ({})", cell(r)))
            .unwrap_or_default();
        Err(Failure::Error(format!(
            "the transaction was refused, nothing of it applied: {}{reason}",
            cell(&v["error"])
        )))
    }
}

pub async fn lease(client: &Client, cmd: LeaseCommand, out: Format) -> Result<(), Failure> {
    let LeaseCommand::Extend { lease_id, seconds } = cmd;
    if !(1..=86_400).contains(&seconds) {
        return Err(Failure::Usage(
            "--seconds must be between 1 and 86400".into(),
        ));
    }
    let r = client.renew(&lease_id, seconds).await?;
    if !out.is_human() {
        output::print(&r, out, "")?;
    } else if r.success {
        crate::outln!(
            "lease {lease_id} extended: now ends at {}",
            r.expires_at.as_deref().unwrap_or("-")
        );
    }
    if r.success {
        Ok(())
    } else {
        Err(Failure::Error(format!(
            "lease {lease_id} not extended: {}",
            r.error.as_deref().unwrap_or("refused")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_in_json_and_yaml() {
        let yaml =
            "operations:\n  - type: push\n    items:\n      - queue: q\n        payload: {a: 1}\n";
        let v = parse("t.yaml", yaml).unwrap();
        assert_eq!(v["operations"][0]["items"][0]["payload"], json!({"a": 1}));
        let v = parse(
            "t.json",
            r#"[{"type": "ack", "transactionId": "t", "partitionId": "p"}]"#,
        )
        .unwrap();
        assert_eq!(v["operations"][0]["type"], "ack");
        assert!(parse("t", "operations: []\nkv: []\n").is_err());
        assert!(parse("t", "operations: [{type: pop}]")
            .unwrap_err()
            .contains("operation 1"));
        assert!(parse("t", "operation: []")
            .unwrap_err()
            .contains("unknown key"));
        assert!(parse("t", "42").is_err());
    }
}
