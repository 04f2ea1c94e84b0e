//! Golden outputs of representative read commands in every format, and the
//! exit status of each class of outcome.
//!
//! The goldens are in `tests/integration/golden/`, with ids and times
//! replaced by `<id>` and `<time>`; `UPDATE_GOLDEN=1` rewrites them.

use std::path::PathBuf;

use crate::common::*;

const FORMATS: &[&str] = &["table", "wide", "json", "ndjson", "yaml"];

/// `text` with UUIDs and timestamps replaced, and table columns joined by
/// two spaces (their widths follow the replaced values).
fn normalise(text: &str, table: bool) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut l = String::new();
        let mut words = line.split(' ').peekable();
        // replace token by token: a UUID is 36 characters of hex and dashes,
        // a time starts with a date and a T
        while let Some(w) = words.next() {
            l.push_str(&replace_in(w));
            if words.peek().is_some() {
                l.push(' ');
            }
        }
        if table {
            let cols: Vec<&str> = l
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect();
            l = cols.join("  ");
        }
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// Replaces UUIDs with `<id>` and RFC 3339 times with `<time>` inside one word.
fn replace_in(word: &str) -> String {
    let chars: Vec<char> = word.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let rest: String = chars[i..].iter().collect();
        if let Some(n) = uuid_len(&rest) {
            out.push_str("<id>");
            i += n;
        } else if let Some(n) = time_len(&rest) {
            out.push_str("<time>");
            i += n;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

fn uuid_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if b.len() < 36 {
        return None;
    }
    let ok = (0..36).all(|i| match i {
        8 | 13 | 18 | 23 => b[i] == b'-',
        _ => b[i].is_ascii_hexdigit(),
    });
    ok.then_some(36)
}

fn time_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let date = b.len() >= 19
        && (0..10).all(|i| {
            if i == 4 || i == 7 {
                b[i] == b'-'
            } else {
                b[i].is_ascii_digit()
            }
        })
        && (b[10] == b'T' || b[10] == b' ')
        && b[13] == b':';
    if !date {
        return None;
    }
    let mut n = 19;
    while n < b.len() && (b[n].is_ascii_digit() || matches!(b[n], b'.' | b'Z' | b'+' | b':')) {
        n += 1;
    }
    Some(n)
}

fn check(name: &str, format: &str, text: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/integration/golden");
    let path = dir.join(format!("{name}.{format}"));
    let got = normalise(text, matches!(format, "table" | "wide"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(
        got,
        want,
        "{name} -o {format} differs from {}",
        path.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_commands_in_every_format() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    queen(
        &b,
        &[
            "queues",
            "configure",
            "orders",
            "--namespace",
            "shop",
            "--task",
            "sell",
        ],
    )
    .await
    .ok();
    queen(
        &b,
        &[
            "push",
            "orders",
            "-p",
            "a",
            "--transaction-id",
            "t-1",
            r#"{"n": 1}"#,
        ],
    )
    .await
    .ok();
    queen(
        &b,
        &[
            "push",
            "orders",
            "-p",
            "a",
            "--transaction-id",
            "t-2",
            r#"{"n": 2, "s": "two"}"#,
        ],
    )
    .await
    .ok();
    queen(&b, &["kv", "put", "app", "cfg/a", r#"{"v": 1}"#])
        .await
        .ok();
    queen(&b, &["kv", "put", "app", "cfg/b", "[1, 2]"])
        .await
        .ok();
    for format in FORMATS {
        let q = queen(&b, &["queues", "-o", format]).await;
        check("queues", format, q.ok());
        let d = queen(&b, &["queues", "describe", "orders", "-o", format]).await;
        check("queues-describe", format, d.ok());
        let k = queen(&b, &["kv", "list", "app", "cfg/", "-o", format]).await;
        check("kv-list", format, k.ok());
    }
    // --json is -o json
    let j = queen(&b, &["queues", "--json"]).await;
    check("queues", "json", j.ok());
    for format in FORMATS {
        // a group per format: each sees both messages
        let group = format!("g-{format}");
        let p = queen(
            &b,
            &[
                "pop", "orders", "-g", &group, "-b", "2", "--no-ack", "-o", format,
            ],
        )
        .await;
        check("pop", format, p.ok());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_status_per_class() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    // 0: done
    assert_eq!(queen(&b, &["queues"]).await.code, 0);
    // 1: bad flags, bad input, a 4xx
    assert_eq!(queen(&b, &["queues", "--bogus"]).await.code, USER);
    assert_eq!(queen(&b, &["-o", "xml", "queues"]).await.code, USER);
    assert_eq!(queen(&b, &["push", "q", "{"]).await.code, USER);
    assert!(queen(&b, &["queues", "describe", "nope"])
        .await
        .fails(USER)
        .contains("404"));
    // 2: nothing listens
    let dead = format!("http://127.0.0.1:{}", queen_testkit::free_port().unwrap());
    assert_eq!(
        queen_at(&dead, &["queues"], None, &[]).await.code,
        UNREACHABLE
    );
    assert_eq!(
        queen_at(&dead, &["status"], None, &[]).await.code,
        UNREACHABLE
    );
    // 4: found nothing
    assert_eq!(queen(&b, &["pop", "empty-q"]).await.code, EMPTY);
    assert_eq!(queen(&b, &["kv", "get", "app", "none"]).await.code, EMPTY);
    assert_eq!(
        queen(&b, &["timers", "peek", "q", "none"]).await.code,
        EMPTY
    );
    assert_eq!(queen(&b, &["ephemeral", "pop", "e"]).await.code, EMPTY);
    // 3 (401/403) and 2 for a 5xx: failures.rs (JWT on, PostgreSQL cut)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_times_and_tail_documents() {
    let (_db, b) = fresh_broker(&[]).await.unwrap();
    queen(&b, &["push", "orders", "--transaction-id", "t-1", "1"])
        .await
        .ok();
    let recent = [
        "messages", "list", "-q", "orders", "--from", "10m ago", "--to", "now", "-o", "json",
    ];
    let m = queen(&b, &recent).await.json();
    assert_eq!(m["messages"][0]["transactionId"], "t-1", "{m}");
    let later = [
        "messages", "list", "-q", "orders", "--from", "in 10m", "-o", "json",
    ];
    let none = queen(&b, &later).await.json();
    assert_eq!(none["messages"], serde_json::json!([]), "{none}");
    queen(
        &b,
        &["dlq", "list", "--from", "1d ago", "--to", "2026-01-01"],
    )
    .await
    .ok();
    // tail -o yaml: one YAML document per message
    queen(&b, &["push", "orders", "2"]).await.ok();
    let run = queen(&b, &["tail", "orders", "-g", "y", "-o", "yaml"]).await;
    let docs: Vec<&str> = run.ok().split("---\n").filter(|d| !d.is_empty()).collect();
    assert_eq!(docs.len(), 2, "{run:?}");
    assert!(
        docs[0].contains("transactionId: t-1") && docs[1].contains("data: 2"),
        "{run:?}"
    );
    // seek back an hour, then the group reads both again
    queen(&b, &["groups", "seek", "y", "orders", "--to", "1h ago"])
        .await
        .ok();
    let again = queen(&b, &["pop", "orders", "-g", "y", "-b", "5", "-o", "ndjson"]).await;
    assert_eq!(again.ok().lines().count(), 2, "{again:?}");
}
