//! `queen apply -f FILE`: queue manifests (YAML, one queue per document)
//! checked whole, then configured one by one.

use std::io::Read as _;
use std::path::PathBuf;

use clap::Args;
use queen_client::Client;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::output::{self, cell, Failure, Format, Table};

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The manifest file ("-" for standard input); several queues as
    /// several YAML documents separated by `---`.
    #[arg(long, short)]
    pub file: PathBuf,
    /// Check the manifests and print what would be configured; send nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// One queue: its name, namespace, task and the whole option set (an option
/// left out takes its default: configure replaces every option).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Manifest {
    pub queue: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(default)]
    pub options: QueueOptions,
}

/// Every option `POST /api/v1/configure` takes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct QueueOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_time: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_delay: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_backoff: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_delay_max: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_queue: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dlq_after_max_retries: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delayed_processing: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_buffer: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_retention_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption_enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait_time_seconds: Option<u32>,
}

/// Reads every manifest of `text`; the first bad one refuses the whole file,
/// naming the file, the line and what is wrong there.
pub fn parse(name: &str, text: &str) -> Result<Vec<Manifest>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<Manifest> = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let manifest = match Option::<Manifest>::deserialize(doc) {
            Ok(Some(m)) => m,
            Ok(None) => continue,
            Err(e) => {
                let at = e.location().map(|l| l.line()).filter(|l| *l > 0);
                return Err(match at {
                    Some(line) => {
                        let src = lines.get(line - 1).map_or("", |l| l.trim());
                        format!("{name}, line {line} ({src}): {}", strip_location(&e))
                    }
                    None => format!("{name}: {e}"),
                });
            }
        };
        if manifest.queue.trim().is_empty() {
            return Err(format!("{name}: a manifest has an empty queue name"));
        }
        if let Some(f) = manifest.options.retry_backoff {
            if !f.is_finite() || f < 1.0 {
                return Err(format!(
                    "{name}: queue {}: retryBackoff must be a number of at least 1",
                    manifest.queue
                ));
            }
        }
        if out.iter().any(|m| m.queue == manifest.queue) {
            return Err(format!(
                "{name}: queue {} is in the file twice",
                manifest.queue
            ));
        }
        out.push(manifest);
    }
    if out.is_empty() {
        return Err(format!("{name} holds no manifest"));
    }
    Ok(out)
}

/// The error text without serde_yaml's own " at line N column M" (the caller names the line).
fn strip_location(e: &serde_yaml_ng::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

fn load(args: &ApplyArgs) -> Result<Vec<Manifest>, Failure> {
    let (name, text) = if args.file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Failure::Usage(format!("cannot read standard input: {e}")))?;
        ("standard input".to_owned(), text)
    } else {
        let text = std::fs::read_to_string(&args.file)
            .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", args.file.display())))?;
        (args.file.display().to_string(), text)
    };
    parse(&name, &text).map_err(|e| Failure::Usage(format!("{e}; nothing was applied")))
}

fn options_json(m: &Manifest) -> Value {
    serde_json::to_value(&m.options).unwrap_or_else(|_| json!({}))
}

/// `--dry-run`: the manifests as they would be sent.
pub fn dry_run(args: &ApplyArgs, out: Format) -> Result<(), Failure> {
    let manifests = load(args)?;
    let list = json!(manifests
        .iter()
        .map(|m| json!({"queue": m.queue, "namespace": m.namespace, "task": m.task, "options": options_json(m)}))
        .collect::<Vec<_>>());
    output::show(&list, out, "", |_, _| {
        for m in &manifests {
            crate::outln!(
                "would configure queue {} with {} (options not named take their defaults)",
                m.queue,
                options_json(m)
            );
        }
    })
}

pub async fn run(client: &Client, args: &ApplyArgs, out: Format) -> Result<(), Failure> {
    let manifests = load(args)?;
    let mut results = Vec::new();
    for m in &manifests {
        let mut queue = client.queue(m.queue.as_str());
        if let Some(ns) = &m.namespace {
            queue = queue.namespace(ns.as_str());
        }
        if let Some(t) = &m.task {
            queue = queue.task(t.as_str());
        }
        match queue.configure_json(&options_json(m)).await {
            Ok(r) => results.push(serde_json::to_value(&r).unwrap_or(Value::Null)),
            Err(e) => {
                let done: Vec<&str> = manifests
                    .iter()
                    .take(results.len())
                    .map(|m| m.queue.as_str())
                    .collect();
                let text = format!(
                    "queue {}: {} (configured before it: {})",
                    m.queue,
                    output::one_line(&e),
                    if done.is_empty() {
                        "none".to_owned()
                    } else {
                        done.join(", ")
                    }
                );
                return Err(Failure::like(&e, text));
            }
        }
    }
    output::show(&json!(results), out, "", |v, wide| {
        let mut t = Table::new(&["QUEUE", "NAMESPACE", "TASK", "OPTIONS"]).wide(wide);
        for r in v.as_array().into_iter().flatten() {
            t.row(vec![
                cell(&r["queue"]),
                cell(&r["namespace"]),
                cell(&r["task"]),
                cell(&r["options"]),
            ]);
        }
        crate::outln!("configured {} queue(s)", results.len());
        crate::outln!("{}", t.render());
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_documents_with_every_option() {
        let text = "queue: a\noptions:\n  leaseTime: 60\n  retryBackoff: 2.5\n  maxSize: 10\n---\nqueue: b\nnamespace: ns\ntask: t\n---\n";
        let m = parse("f.yaml", text).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].options.lease_time, Some(60));
        assert_eq!(
            options_json(&m[0]),
            json!({"leaseTime": 60, "retryBackoff": 2.5, "maxSize": 10})
        );
        assert_eq!(m[1].namespace.as_deref(), Some("ns"));
    }

    #[test]
    fn unknown_keys_and_wrong_types_name_the_line() {
        let text = "queue: a\n---\nqueue: b\noptions:\n  leaseTime: 60\n  leseTime: 5\n";
        let e = parse("f.yaml", text).unwrap_err();
        assert!(e.starts_with("f.yaml, line 6 (leseTime: 5)"), "{e}");
        assert!(e.contains("unknown field `leseTime`"), "{e}");
        let e = parse("f.yaml", "queue: a\noptions:\n  ttl: soon\n").unwrap_err();
        assert!(e.starts_with("f.yaml, line 3 (ttl: soon)"), "{e}");
        let e = parse("f.yaml", "queue: a\nkind: Queue\n").unwrap_err();
        assert!(e.contains("unknown field `kind`"), "{e}");
        assert!(parse("f.yaml", "queue: a\n---\nqueue: a\n").is_err());
        assert!(parse("f.yaml", "").is_err());
        assert!(parse("f.yaml", "queue: a\noptions:\n  retryBackoff: 0.5\n").is_err());
    }
}
