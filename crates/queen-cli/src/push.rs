//! `queen push`: one JSON message, or JSON lines from a file or standard
//! input, checked whole before the first request and sent in batches.

use std::io::{IsTerminal as _, Read as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queen_client::{Client, PushItem, PushResult, PushStatus, Queue};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::cli::PushArgs;
use crate::output::{self, Failure, Format};

/// Inputs with at least this many lines get a progress bar on a terminal unasked.
const PROGRESS_FROM_LINES: usize = 10_000;

#[derive(Debug, Default, Serialize)]
struct Summary {
    queue: String,
    partition: String,
    messages: u64,
    queued: u64,
    duplicate: u64,
    buffered: u64,
    failed: u64,
    seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    results: Option<Vec<PushResult>>,
}

impl Summary {
    fn count(&mut self, results: &[PushResult]) {
        for r in results {
            match r.status {
                PushStatus::Queued { .. } => self.queued += 1,
                PushStatus::Duplicate { .. } => self.duplicate += 1,
                PushStatus::Buffered => self.buffered += 1,
                _ => self.failed += 1,
            }
        }
    }
}

pub async fn run(client: &Client, args: PushArgs, out: Format) -> Result<(), Failure> {
    if args.batch == 0 || args.in_flight == 0 {
        return Err(Failure::Usage(
            "--batch and --in-flight must be at least 1".into(),
        ));
    }
    let single = args.message.is_some();
    let items = read_items(&args)?;
    let mut queue = client.queue(args.queue.as_str());
    if let Some(p) = &args.partition {
        queue = queue.partition(p.as_str());
    }
    let mut summary = Summary {
        queue: args.queue.clone(),
        partition: args.partition.clone().unwrap_or_else(|| "Default".into()),
        messages: items.len() as u64,
        ..Summary::default()
    };
    let show_progress = !args.no_progress && (args.progress || items.len() >= PROGRESS_FROM_LINES);
    let progress = show_progress.then(|| Progress::start(items.len() as u64));
    let started = Instant::now();
    let outcome = send(
        &queue,
        items,
        args.batch,
        args.in_flight,
        &mut summary,
        single,
        progress.as_ref(),
    )
    .await;
    summary.seconds = started.elapsed().as_secs_f64();
    if let Some(p) = progress {
        p.finish();
    }
    if let Err(e) = outcome {
        let sent = summary.queued + summary.duplicate + summary.buffered;
        if sent == 0 && summary.failed == 0 {
            return Err(e.into());
        }
        let text = format!(
            "{} of {} messages accepted before the push failed: {}",
            sent,
            summary.messages,
            output::one_line(&e)
        );
        return Err(Failure::like(&e, text));
    }
    if !out.is_human() {
        output::print(&summary, out, "/results")?;
    } else {
        print_summary(&summary);
    }
    if summary.failed > 0 {
        return Err(Failure::Error(format!(
            "{} of {} messages were refused",
            summary.failed, summary.messages
        )));
    }
    Ok(())
}

/// Reads and checks every message before anything is sent.
fn read_items(args: &PushArgs) -> Result<Vec<PushItem>, Failure> {
    if let Some(message) = &args.message {
        let raw = parse_json(message.trim().as_bytes())
            .map_err(|e| Failure::Usage(format!("the message is not valid JSON: {e}")))?;
        let mut item = PushItem::from_raw(raw);
        if let Some(id) = &args.transaction_id {
            item = item.transaction_id(id.as_str());
        }
        if let Some(id) = &args.trace_id {
            item = item.trace_id(id.as_str());
        }
        return Ok(vec![item]);
    }
    let (name, bytes) = match args.file.as_deref() {
        Some(path) if path.as_os_str() != "-" => {
            let bytes = std::fs::read(path)
                .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
            (path.display().to_string(), bytes)
        }
        _ => {
            let mut stdin = std::io::stdin();
            if args.file.is_none() && stdin.is_terminal() {
                return Err(Failure::Usage(
                    "give a JSON message, --file FILE, or JSON lines on standard input".into(),
                ));
            }
            let mut bytes = Vec::new();
            stdin
                .read_to_end(&mut bytes)
                .map_err(|e| Failure::Usage(format!("cannot read standard input: {e}")))?;
            ("standard input".to_owned(), bytes)
        }
    };
    let items = parse_lines(&bytes).map_err(|(line, e)| {
        Failure::Usage(format!(
            "{name}, line {line}: not valid JSON ({e}); nothing was pushed"
        ))
    })?;
    if items.is_empty() {
        return Err(Failure::Usage(format!("{name} holds no message")));
    }
    Ok(items)
}

fn parse_json(bytes: &[u8]) -> Result<Box<RawValue>, serde_json::Error> {
    serde_json::from_slice(bytes)
}

/// One item per non-blank line; the first bad line's number (from 1) and error.
fn parse_lines(bytes: &[u8]) -> Result<Vec<PushItem>, (usize, serde_json::Error)> {
    let mut items = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let raw = parse_json(line).map_err(|e| (i + 1, e))?;
        items.push(PushItem::from_raw(raw));
    }
    Ok(items)
}

/// Sends `items` in batches with at most `in_flight` requests at once.
async fn send(
    queue: &Queue,
    items: Vec<PushItem>,
    batch: usize,
    in_flight: usize,
    summary: &mut Summary,
    keep_results: bool,
    progress: Option<&Progress>,
) -> Result<(), queen_client::Error> {
    let mut pending = tokio::task::JoinSet::new();
    let mut items = items.into_iter();
    let mut first_error = None;
    let mut results = Vec::new();
    loop {
        while first_error.is_none() && pending.len() < in_flight {
            let chunk: Vec<PushItem> = items.by_ref().take(batch).collect();
            if chunk.is_empty() {
                break;
            }
            let queue = queue.clone();
            pending.spawn(async move { queue.push_items(chunk).await });
        }
        let Some(joined) = pending.join_next().await else {
            break;
        };
        match joined {
            Ok(Ok(chunk_results)) => {
                summary.count(&chunk_results);
                if let Some(p) = progress {
                    p.add(chunk_results.len() as u64);
                }
                if keep_results {
                    results.extend(chunk_results);
                }
            }
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                first_error.get_or_insert(queen_client::Error::Config(format!(
                    "push task failed: {e}"
                )));
            }
        }
    }
    if keep_results {
        summary.results = Some(results);
    }
    first_error.map_or(Ok(()), Err)
}

fn print_summary(s: &Summary) {
    if let Some([r]) = s.results.as_deref() {
        match &r.status {
            PushStatus::Queued { message_id, .. } => crate::outln!(
                "queued in {}/{}: message {message_id}, transaction {}",
                s.queue, s.partition, r.transaction_id
            ),
            PushStatus::Duplicate { message_id } => crate::outln!(
                "duplicate: transaction {} is already stored in {}/{} as message {message_id}",
                r.transaction_id, s.queue, s.partition
            ),
            PushStatus::Buffered => crate::outln!(
                "buffered: the broker cannot reach its database (or push maintenance is on); \
                 the message (transaction {}) waits in its disk spool and is stored when the database is back",
                r.transaction_id
            ),
            PushStatus::Failed { error } => crate::outln!("refused: {error}"),
            other => crate::outln!("unexpected status: {other:?}"),
        }
        return;
    }
    let rate = if s.seconds > 0.0 {
        s.messages as f64 / s.seconds
    } else {
        0.0
    };
    crate::outln!(
        "pushed {} messages to {}/{} in {:.1} s ({:.0} msg/s): {} queued, {} duplicate, {} buffered, {} refused",
        s.messages, s.queue, s.partition, s.seconds, rate, s.queued, s.duplicate, s.buffered, s.failed
    );
    if s.buffered > 0 {
        crate::outln!(
            "{} messages are buffered: the broker cannot reach its database (or push maintenance is on); \
             they wait in its disk spool and are stored when the database is back",
            s.buffered
        );
    }
}

/// Progress of a large push: a bar on a terminal, else a line a second on standard error.
struct Progress {
    bar: indicatif::ProgressBar,
    done: Arc<AtomicU64>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

/// How often the plain progress line is written when standard error is no terminal.
const PLAIN_PROGRESS_EVERY: Duration = Duration::from_secs(1);

impl Progress {
    fn start(total: u64) -> Self {
        let done = Arc::new(AtomicU64::new(0));
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(total);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:40} {pos}/{len} messages  {per_sec}  eta {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            return Self {
                bar,
                done,
                ticker: None,
            };
        }
        let ticker = {
            let done = done.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let mut tick = tokio::time::interval(PLAIN_PROGRESS_EVERY);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    let n = done.load(Ordering::Relaxed);
                    let rate = n as f64 / started.elapsed().as_secs_f64().max(1e-9);
                    eprintln!("pushed {n}/{total} messages ({rate:.0} msg/s)");
                }
            })
        };
        Self {
            bar: indicatif::ProgressBar::hidden(),
            done,
            ticker: Some(ticker),
        }
    }

    fn add(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
        self.bar.inc(n);
    }

    fn finish(self) {
        if let Some(t) = self.ticker {
            t.abort();
        }
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_checked_and_blank_lines_skipped() {
        let items = parse_lines(b"{\"a\":1}\n\n  \n[1,2]\r\n\"x\"").unwrap();
        let payloads: Vec<&str> = items.iter().map(|i| i.payload()).collect();
        assert_eq!(payloads, [r#"{"a":1}"#, "[1,2]", r#""x""#]);
        let (line, _) = parse_lines(b"1\n2\n{oops\n4").unwrap_err();
        assert_eq!(line, 3);
        // two values on one line are not one message
        assert_eq!(parse_lines(b"1 2").unwrap_err().0, 1);
    }
}
