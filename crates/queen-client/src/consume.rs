//! `queue.consume(handler)`: workers that long-poll, run a handler, renew
//! the lease while it runs, and ack or nack by its outcome.

use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::queue::Queue;
use crate::types::{AckStatus, Message};

/// Default interval between lease renewals while a handler runs.
const DEFAULT_RENEW_EVERY: Duration = Duration::from_secs(10);
/// Seconds each renewal extends the lease to from now (the broker's default).
const RENEW_SECONDS: u32 = 60;
/// First pause after a failed pop; doubles up to [`MAX_POP_BACKOFF`].
const FIRST_POP_BACKOFF: Duration = Duration::from_millis(100);
/// Longest pause between failed pops, so a consumer resumes soon after an outage.
const MAX_POP_BACKOFF: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub(crate) struct ConsumeOptions {
    concurrency: usize,
    limit: Option<u64>,
    idle_timeout: Option<Duration>,
    auto_ack: bool,
    renew_every: Option<Duration>,
    stop: Option<CancellationToken>,
}

impl Default for ConsumeOptions {
    fn default() -> Self {
        Self {
            concurrency: 1,
            limit: None,
            idle_timeout: None,
            auto_ack: true,
            renew_every: Some(DEFAULT_RENEW_EVERY),
            stop: None,
        }
    }
}

/// What a consumer did before it stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumeStats {
    /// Messages handed to the handler.
    pub processed: u64,
    /// Messages whose handler failed (nacked with `failed` when auto-ack is on).
    pub failed: u64,
    /// Acks the broker refused or that could not be sent.
    pub ack_errors: u64,
}

#[derive(Debug, Default)]
struct Counters {
    taken: AtomicU64,
    processed: AtomicU64,
    failed: AtomicU64,
    ack_errors: AtomicU64,
}

impl Queue {
    /// Runs this many workers, each popping and handling on its own (default 1).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.consume.concurrency = n.max(1);
        self
    }

    /// Stops after this many messages in all (default: never).
    pub fn limit(mut self, n: u64) -> Self {
        self.consume.limit = Some(n);
        self
    }

    /// Stops a worker after this long without a message (default: never).
    pub fn idle_timeout(mut self, d: Duration) -> Self {
        self.consume.idle_timeout = Some(d);
        self
    }

    /// Acks after the handler: `completed` on `Ok`, `failed` with the error
    /// text on `Err` (default true). Off, the handler acks by itself.
    pub fn auto_ack(mut self, on: bool) -> Self {
        self.consume.auto_ack = on;
        self
    }

    /// Renews the lease at this interval while a handler runs (default every
    /// 10 s, each renewal to 60 s from now); `None` turns renewal off. Keep it
    /// under the queue's `leaseTime`.
    pub fn renew_lease(mut self, every: Option<Duration>) -> Self {
        self.consume.renew_every = every;
        self
    }

    /// Stops the consumer when `token` is cancelled: workers finish the
    /// message in hand and return.
    pub fn until(mut self, token: CancellationToken) -> Self {
        self.consume.stop = Some(token);
        self
    }

    /// Consumes one message at a time: `handler(message)`; `Ok` acks it as
    /// completed, `Err` nacks it (and the rest of its partition in this batch
    /// is left for redelivery, to keep order). Returns when the limit, the
    /// idle timeout or the stop token says so, or on an error that retrying
    /// cannot fix (a 4xx from the broker).
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let stats = client
    ///     .queue("orders")
    ///     .group("billing")
    ///     .concurrency(4)
    ///     .batch(10)
    ///     .limit(1000)
    ///     .consume(|msg| async move {
    ///         println!("{}", msg.data);
    ///         Ok::<_, std::io::Error>(())
    ///     })
    ///     .await?;
    /// println!("{} processed", stats.processed);
    /// # Ok(()) }
    /// ```
    pub async fn consume<H, F, E>(&self, handler: H) -> Result<ConsumeStats>
    where
        H: Fn(Message) -> F + Send + Sync + 'static,
        F: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        let handler = Arc::new(handler);
        self.run_workers(move |queue, batch| {
            let handler = handler.clone();
            async move { queue.handle_each(batch, &*handler).await }
        })
        .await
    }

    /// Consumes a batch at a time: `handler(messages)`; `Ok` acks the whole
    /// batch as completed, `Err` nacks it.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// client
    ///     .queue("events")
    ///     .batch(100)
    ///     .consume_batch(|batch| async move {
    ///         println!("{} events", batch.len());
    ///         Ok::<_, String>(())
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn consume_batch<H, F, E>(&self, handler: H) -> Result<ConsumeStats>
    where
        H: Fn(Vec<Message>) -> F + Send + Sync + 'static,
        F: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        let handler = Arc::new(handler);
        self.run_workers(move |queue, batch| {
            let handler = handler.clone();
            async move {
                let n = batch.len() as u64;
                let outcome = queue
                    .with_renewal(&batch, handler(batch.clone()))
                    .await;
                let (status, error) = match &outcome {
                    Ok(()) => (AckStatus::Completed, None),
                    Err(e) => (AckStatus::Failed, Some(e.to_string())),
                };
                let mut tally = Tally {
                    processed: n,
                    failed: if outcome.is_err() { n } else { 0 },
                    ack_errors: 0,
                };
                if queue.consume.auto_ack {
                    match queue
                        .client
                        .ack_batch(&batch, status, error.as_deref())
                        .await
                    {
                        Ok(results) => {
                            tally.ack_errors +=
                                results.iter().filter(|r| !r.success).count() as u64;
                        }
                        Err(e) => {
                            tracing::warn!(queue.name = %queue.name, error = %e, "batch ack failed");
                            tally.ack_errors += n;
                        }
                    }
                }
                tally
            }
        })
        .await
    }

    /// Runs `concurrency` workers that pop and pass each batch to `process`.
    async fn run_workers<P, PF>(&self, process: P) -> Result<ConsumeStats>
    where
        P: Fn(Queue, Vec<Message>) -> PF + Send + Sync + 'static,
        PF: Future<Output = Tally> + Send + 'static,
    {
        let counters = Arc::new(Counters::default());
        let process = Arc::new(process);
        let stop = self.consume.stop.clone().unwrap_or_default();
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..self.consume.concurrency {
            let queue = self.clone();
            let counters = counters.clone();
            let process = process.clone();
            let stop = stop.clone();
            workers.spawn(async move { queue.worker(&counters, &*process, &stop).await });
        }
        let mut first_error = None;
        while let Some(joined) = workers.join_next().await {
            let outcome = joined
                .unwrap_or_else(|e| Err(Error::Config(format!("consumer worker panicked: {e}"))));
            if let Err(e) = outcome {
                // one worker's fatal error stops the others
                stop.cancel();
                first_error.get_or_insert(e);
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        Ok(ConsumeStats {
            processed: counters.processed.load(Ordering::Relaxed),
            failed: counters.failed.load(Ordering::Relaxed),
            ack_errors: counters.ack_errors.load(Ordering::Relaxed),
        })
    }

    async fn worker<P, PF>(
        &self,
        counters: &Counters,
        process: &P,
        stop: &CancellationToken,
    ) -> Result<()>
    where
        P: Fn(Queue, Vec<Message>) -> PF,
        PF: Future<Output = Tally>,
    {
        let mut last_message = Instant::now();
        let mut backoff = FIRST_POP_BACKOFF;
        loop {
            if stop.is_cancelled() {
                return Ok(());
            }
            if self
                .consume
                .idle_timeout
                .is_some_and(|idle| last_message.elapsed() >= idle)
            {
                return Ok(());
            }
            // claim a share of the limit before popping, so workers never overshoot it
            let want = match self.consume.limit {
                Some(limit) => {
                    let batch = u64::from(self.batch.unwrap_or(1));
                    let taken = counters.taken.fetch_add(batch, Ordering::Relaxed);
                    if taken >= limit {
                        // the rest is claimed; a worker whose pop comes back short takes it up
                        counters.taken.fetch_sub(batch, Ordering::Relaxed);
                        return Ok(());
                    }
                    let granted = batch.min(limit - taken);
                    counters.taken.fetch_sub(batch - granted, Ordering::Relaxed);
                    Some(u32::try_from(granted).unwrap_or(u32::MAX))
                }
                None => None,
            };
            let popped = tokio::select! {
                () = stop.cancelled() => {
                    return Ok(());
                }
                r = self.pop_with(want) => r,
            };
            let granted = u64::from(want.unwrap_or(0));
            let batch = match popped {
                Ok(batch) => {
                    backoff = FIRST_POP_BACKOFF;
                    batch
                }
                Err(e) if e.is_retryable() => {
                    tracing::warn!(queue.name = %self.name, error = %e, "pop failed; retrying");
                    counters.taken.fetch_sub(granted, Ordering::Relaxed);
                    tokio::select! {
                        () = stop.cancelled() => return Ok(()),
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_POP_BACKOFF);
                    continue;
                }
                Err(e) => return Err(e),
            };
            if self.consume.limit.is_some() {
                // give back what the pop did not fill
                let got = batch.len() as u64;
                counters
                    .taken
                    .fetch_sub(granted.saturating_sub(got), Ordering::Relaxed);
            }
            if batch.is_empty() {
                if !self.wait {
                    tokio::time::sleep(FIRST_POP_BACKOFF).await;
                }
                continue;
            }
            last_message = Instant::now();
            let tally = process(self.clone(), batch).await;
            counters
                .processed
                .fetch_add(tally.processed, Ordering::Relaxed);
            counters.failed.fetch_add(tally.failed, Ordering::Relaxed);
            counters
                .ack_errors
                .fetch_add(tally.ack_errors, Ordering::Relaxed);
        }
    }

    /// Handles a batch one message at a time (see [`Queue::consume`]).
    async fn handle_each<H, F, E>(&self, batch: Vec<Message>, handler: &H) -> Tally
    where
        H: Fn(Message) -> F,
        F: Future<Output = std::result::Result<(), E>>,
        E: Display,
    {
        let mut tally = Tally::default();
        let mut nacked: Vec<String> = Vec::new();
        for msg in &batch {
            if nacked.contains(&msg.partition_id) {
                continue;
            }
            tally.processed += 1;
            let outcome = self.with_renewal(&batch, handler(msg.clone())).await;
            if outcome.is_err() {
                tally.failed += 1;
            }
            if !self.consume.auto_ack {
                continue;
            }
            let ack = match &outcome {
                Ok(()) => self.client.ack(msg).await,
                Err(e) => {
                    // the nack releases the partition: its later messages come again
                    nacked.push(msg.partition_id.clone());
                    self.client
                        .ack_with(msg, AckStatus::Failed, Some(&e.to_string()))
                        .await
                }
            };
            match ack {
                Ok(r) if r.success => {}
                Ok(r) => {
                    tracing::warn!(queue.name = %self.name, message.id = %msg.id, error = ?r.error, "ack refused");
                    tally.ack_errors += 1;
                }
                Err(e) => {
                    tracing::warn!(queue.name = %self.name, message.id = %msg.id, error = %e, "ack failed");
                    tally.ack_errors += 1;
                }
            }
        }
        tally
    }

    /// Awaits `work`, renewing the leases of `batch` on the configured
    /// interval meanwhile (from a task of its own, so the work never stalls on it).
    async fn with_renewal<T>(&self, batch: &[Message], work: impl Future<Output = T>) -> T {
        let Some(every) = self.consume.renew_every else {
            return work.await;
        };
        let mut leases: Vec<String> = batch
            .iter()
            .map(|m| m.lease_id.clone())
            .filter(|l| !l.is_empty())
            .collect();
        leases.dedup();
        if leases.is_empty() {
            return work.await;
        }
        let client = self.client.clone();
        let queue = self.name.clone();
        let renewer = tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tick.tick().await;
                for lease in &leases {
                    match client.renew(lease, RENEW_SECONDS).await {
                        Ok(r) if r.success => {}
                        Ok(r) => {
                            tracing::warn!(queue.name = %queue, lease.id = %lease, error = ?r.error, "lease not renewed")
                        }
                        Err(e) => {
                            tracing::warn!(queue.name = %queue, lease.id = %lease, error = %e, "lease renewal failed")
                        }
                    }
                }
            }
        });
        let _stop_renewing = AbortOnDrop(renewer);
        work.await
    }
}

/// Aborts a task when dropped (also when the future holding it is cancelled).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What one processed batch adds to the counters.
#[derive(Debug, Default)]
struct Tally {
    processed: u64,
    failed: u64,
    ack_errors: u64,
}
