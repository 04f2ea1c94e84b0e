//! Client-side buffered pushes: a handle that queues items into a task which
//! sends them in batches on size, on time, on request and when the handle is
//! dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};
use crate::queue::Queue;
use crate::types::{PushItem, PushStatus};

/// When a [`BufferedProducer`] sends what it holds.
///
/// ```
/// use std::time::Duration;
/// let options = queen_client::BufferOptions {
///     max_messages: 1000,
///     max_delay: Duration::from_millis(250),
///     ..Default::default()
/// };
/// assert_eq!(options.capacity, 400);
/// ```
#[derive(Debug, Clone)]
pub struct BufferOptions {
    /// Send once this many messages wait (default 100, as the official clients).
    pub max_messages: usize,
    /// Send once the oldest waiting message has waited this long (default 1 s).
    pub max_delay: Duration,
    /// Messages that may wait beyond a batch in flight before `push` waits
    /// for room (default 400); bounds the memory a slow broker can cost.
    pub capacity: usize,
    /// Times a batch is sent again after a retryable failure (on top of the
    /// client's own retries) before its messages are counted as failed.
    pub flush_attempts: u32,
    /// Pause between those attempts.
    pub retry_delay: Duration,
}

impl Default for BufferOptions {
    fn default() -> Self {
        Self {
            max_messages: 100,
            max_delay: Duration::from_secs(1),
            capacity: 400,
            flush_attempts: 5,
            retry_delay: Duration::from_millis(250),
        }
    }
}

/// Totals of a buffered producer so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BufferStats {
    /// Messages stored (queued or already there as duplicates).
    pub stored: u64,
    /// Messages the broker put in its disk spool (database unreachable).
    pub buffered: u64,
    /// Messages given up on; see `last_error`.
    pub failed: u64,
    /// Requests sent.
    pub batches: u64,
    pub last_error: Option<String>,
}

#[derive(Debug, Default)]
struct Shared {
    stored: AtomicU64,
    buffered: AtomicU64,
    failed: AtomicU64,
    batches: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Shared {
    fn snapshot(&self) -> BufferStats {
        BufferStats {
            stored: self.stored.load(Ordering::Relaxed),
            buffered: self.buffered.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            last_error: self
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}

enum Command {
    Push(PushItem),
    Flush(oneshot::Sender<()>),
}

/// Gathers pushes client-side and sends them in batches; made by
/// [`Queue::buffer`]. Dropping it sends what it still holds from a
/// background task ([`crate::Client::wait_for_buffers`] waits for that);
/// [`BufferedProducer::close`] does the same and waits.
#[derive(Debug)]
pub struct BufferedProducer {
    tx: mpsc::Sender<Command>,
    shared: Arc<Shared>,
    done: Option<oneshot::Receiver<()>>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Push(_) => f.write_str("Push"),
            Self::Flush(_) => f.write_str("Flush"),
        }
    }
}

impl BufferedProducer {
    pub(crate) fn start(queue: Queue, options: BufferOptions) -> Self {
        let options = BufferOptions {
            max_messages: options.max_messages.max(1),
            capacity: options.capacity.max(1),
            flush_attempts: options.flush_attempts.max(1),
            ..options
        };
        let (tx, rx) = mpsc::channel(options.capacity);
        let (done_tx, done_rx) = oneshot::channel();
        let shared = Arc::new(Shared::default());
        let task = FlushTask {
            queue: queue.clone(),
            options,
            shared: shared.clone(),
        };
        queue.client.buffer_tasks().spawn(async move {
            task.run(rx).await;
            let _ = done_tx.send(());
        });
        Self {
            tx,
            shared,
            done: Some(done_rx),
        }
    }

    /// Queues one message (waits while the buffer is full). A transaction id
    /// is given to it now, so a batch sent twice is stored once.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let producer = client.queue("events").buffer(Default::default());
    /// producer.push(&serde_json::json!({"kind": "click"})).await?;
    /// # Ok(()) }
    /// ```
    pub async fn push(&self, payload: &impl Serialize) -> Result<()> {
        self.push_item(PushItem::new(payload)?).await
    }

    /// Queues one prepared item.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// use queen_client::PushItem;
    /// let producer = client.queue("events").buffer(Default::default());
    /// producer.push_item(PushItem::raw(r#"{"kind":"view"}"#)?.transaction_id("view-1")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn push_item(&self, mut item: PushItem) -> Result<()> {
        if item.transaction_id.is_none() {
            item.transaction_id = Some(uuid::Uuid::now_v7().to_string());
        }
        self.tx
            .send(Command::Push(item))
            .await
            .map_err(|_| Error::Config("buffered producer stopped".into()))
    }

    /// Sends everything queued so far and waits for the answer.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let producer = client.queue("events").buffer(Default::default());
    /// producer.push(&1).await?;
    /// producer.flush().await;
    /// assert_eq!(producer.stats().stored, 1);
    /// # Ok(()) }
    /// ```
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Command::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Totals so far.
    ///
    /// ```no_run
    /// # fn run(producer: &queen_client::BufferedProducer) {
    /// println!("{:?}", producer.stats());
    /// # }
    /// ```
    pub fn stats(&self) -> BufferStats {
        self.shared.snapshot()
    }

    /// Sends what is left, stops the producer and returns its totals.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let producer = client.queue("events").buffer(Default::default());
    /// producer.push(&"hello").await?;
    /// let stats = producer.close().await;
    /// assert_eq!(stats.stored + stats.buffered, 1);
    /// # Ok(()) }
    /// ```
    pub async fn close(mut self) -> BufferStats {
        let done = self.done.take();
        let shared = self.shared.clone();
        drop(self);
        if let Some(done) = done {
            let _ = done.await;
        }
        shared.snapshot()
    }
}

struct FlushTask {
    queue: Queue,
    options: BufferOptions,
    shared: Arc<Shared>,
}

impl FlushTask {
    async fn run(self, mut rx: mpsc::Receiver<Command>) {
        let mut batch: Vec<PushItem> = Vec::with_capacity(self.options.max_messages);
        let mut deadline: Option<tokio::time::Instant> = None;
        loop {
            let timer = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                cmd = rx.recv() => match cmd {
                    Some(Command::Push(item)) => {
                        if batch.is_empty() {
                            deadline = Some(tokio::time::Instant::now() + self.options.max_delay);
                        }
                        batch.push(item);
                        if batch.len() >= self.options.max_messages {
                            self.send(&mut batch).await;
                            deadline = None;
                        }
                    }
                    Some(Command::Flush(reply)) => {
                        self.send(&mut batch).await;
                        deadline = None;
                        let _ = reply.send(());
                    }
                    None => {
                        // every handle is gone: send the rest and stop
                        self.send(&mut batch).await;
                        return;
                    }
                },
                () = timer => {
                    self.send(&mut batch).await;
                    deadline = None;
                }
            }
        }
    }

    /// Sends `batch` (emptying it), retrying retryable failures.
    async fn send(&self, batch: &mut Vec<PushItem>) {
        if batch.is_empty() {
            return;
        }
        let items = std::mem::take(batch);
        let n = items.len() as u64;
        let mut attempt = 1;
        loop {
            self.shared.batches.fetch_add(1, Ordering::Relaxed);
            match self.queue.push_items(items.clone()).await {
                Ok(results) => {
                    for r in results {
                        let counter = match r.status {
                            PushStatus::Queued { .. } | PushStatus::Duplicate { .. } => {
                                &self.shared.stored
                            }
                            PushStatus::Buffered => &self.shared.buffered,
                            PushStatus::Failed { error } => {
                                self.record_error(error);
                                &self.shared.failed
                            }
                            PushStatus::Unknown { reported } => {
                                self.record_error(format!("unknown push status {reported}"));
                                &self.shared.failed
                            }
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    return;
                }
                Err(e) if e.is_retryable() && attempt < self.options.flush_attempts => {
                    tracing::warn!(queue.name = %self.queue.name, error = %e, attempt, "buffered push failed; retrying");
                    attempt += 1;
                    tokio::time::sleep(self.options.retry_delay).await;
                }
                Err(e) => {
                    tracing::warn!(queue.name = %self.queue.name, error = %e, messages = n, "buffered push given up");
                    self.record_error(e.to_string());
                    self.shared.failed.fetch_add(n, Ordering::Relaxed);
                    return;
                }
            }
        }
    }

    fn record_error(&self, error: String) {
        *self
            .shared
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(error);
    }
}
