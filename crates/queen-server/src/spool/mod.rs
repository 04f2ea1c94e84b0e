//! The disk spool: pushes are kept on local disk while PostgreSQL is away or
//! push maintenance mode is on, and replayed into PostgreSQL afterwards.
//!
//! - [`segment`]: files, the directory lock, recovery and quarantine.
//! - `writer`: the thread that appends, with fsync batched across pushes.
//! - [`outage`]: whether PostgreSQL is considered down (one WARN, one INFO).
//!
//! The spool is storage only: the replay into PostgreSQL is a job
//! (`jobs/spool_replay.rs`), and the broker decides what goes here.
//!
//! A push is answered `buffered` only after its records are durable. Every
//! record carries its transactionId (generated before the first attempt when the
//! client gave none), so a replay that repeats work PostgreSQL already committed
//! is answered `duplicate` by the store and creates nothing twice.

pub mod outage;
pub mod segment;
mod writer;

#[cfg(test)]
mod model_tests;

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};

use queen_proto::spool::{self as codec, Record};
use tokio::sync::{oneshot, Notify};

use crate::config::SpoolConfig;
use outage::Outage;
use writer::Command;

/// Why the spool did not take a push.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    #[error("push spool is full ({used} of {limit} bytes used); retry later")]
    Full { used: u64, limit: u64 },
    #[error("a spooled item is too large: {0}")]
    TooLarge(String),
    #[error("push spool write failed: {0}")]
    Io(#[from] io::Error),
    #[error("push spool is closed")]
    Closed,
}

/// A sealed segment waiting to be replayed.
#[derive(Debug, Clone, Copy)]
pub struct Sealed {
    pub seq: u64,
    /// Replay progress: records before this byte offset are in PostgreSQL.
    pub pos: u64,
    pub len: u64,
}

/// Numbers for the maintenance and status routes and the metrics.
#[derive(Debug, Clone, Default)]
pub struct SpoolStats {
    /// Records accepted and not yet replayed.
    pub records: u64,
    /// Bytes of segment files on disk.
    pub bytes: u64,
    pub max_bytes: u64,
    pub segments: u64,
    /// Entries in `failed/`.
    pub failed: u64,
    /// Records replayed into PostgreSQL since start.
    pub drained_total: u64,
    /// False after a failed write, until the next write succeeds.
    pub healthy: bool,
}

/// State shared by the handle, the writer thread and the drainer.
#[derive(Debug)]
pub(crate) struct Shared {
    dir: PathBuf,
    config: SpoolConfig,
    sealed: Mutex<VecDeque<Sealed>>,
    /// Undrained records per partition key ([`partition_key`]).
    pending: Mutex<HashMap<String, u64>>,
    records: AtomicU64,
    bytes: AtomicU64,
    active_records: AtomicU64,
    failed: AtomicU64,
    drained_total: AtomicU64,
    healthy: AtomicBool,
    /// Set when a push was refused for the size limit; cleared once one fits again.
    full: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The key of a partition in the pending map (names never hold control characters).
pub fn partition_key(queue: &str, partition: &str) -> String {
    format!("{queue}\u{0}{partition}")
}

impl Shared {
    fn set_healthy(&self, ok: bool) {
        self.healthy.store(ok, Ordering::Relaxed);
    }

    fn add_pending<'a>(&self, keys: impl Iterator<Item = &'a String>) {
        let mut pending = lock(&self.pending);
        let mut n = 0;
        for k in keys {
            *pending.entry(k.clone()).or_default() += 1;
            n += 1;
        }
        self.records.fetch_add(n, Ordering::AcqRel);
    }

    fn remove_pending<'a>(&self, keys: impl Iterator<Item = &'a str>) {
        let mut pending = lock(&self.pending);
        let mut n = 0;
        for k in keys {
            if let Some(c) = pending.get_mut(k) {
                *c -= 1;
                if *c == 0 {
                    pending.remove(k);
                }
            }
            n += 1;
        }
        let _ = self
            .records
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                Some(r.saturating_sub(n))
            });
    }

    fn push_sealed(&self, seq: u64, len: u64) {
        lock(&self.sealed).push_back(Sealed { seq, pos: 0, len });
    }
}

/// The handle on one broker's spool directory.
#[derive(Debug)]
pub struct Spool {
    shared: Arc<Shared>,
    tx: Mutex<mpsc::Sender<Command>>,
    /// Whether PostgreSQL is considered down.
    pub outage: Outage,
    /// Wakes the drainer (maintenance turned off, database back).
    pub kick: Notify,
    /// Holds the directory lock while the spool lives.
    _lock: File,
}

impl Spool {
    /// Opens (creating if needed) and recovers the spool in `config.dir`, takes
    /// its lock and starts the writer thread. Blocking I/O: call at start.
    pub fn open(config: &SpoolConfig) -> io::Result<Self> {
        let dir = config.dir.clone();
        let lock_file = segment::lock_dir(&dir)?;
        let recovered = recover(&dir)?;
        let shared = Arc::new(Shared {
            dir,
            config: config.clone(),
            sealed: Mutex::new(recovered.sealed),
            pending: Mutex::new(HashMap::new()),
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(recovered.bytes),
            active_records: AtomicU64::new(0),
            failed: AtomicU64::new(segment::count_failed(&config.dir)),
            drained_total: AtomicU64::new(0),
            healthy: AtomicBool::new(true),
            full: AtomicBool::new(false),
        });
        shared.add_pending(recovered.pending_keys.iter());
        if shared.records.load(Ordering::Acquire) > 0 {
            tracing::info!(
                records = shared.records.load(Ordering::Acquire),
                dir = %shared.dir.display(),
                "spool holds records from an earlier run; they are replayed once PostgreSQL is reachable"
            );
        }
        let (tx, rx) = mpsc::channel();
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("queen-spool-writer".into())
            .spawn(move || writer::run(thread_shared, recovered.next_seq, rx))?;
        Ok(Self {
            shared,
            tx: Mutex::new(tx),
            outage: Outage::default(),
            kick: Notify::new(),
            _lock: lock_file,
        })
    }

    /// The spool directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    pub fn config(&self) -> &SpoolConfig {
        &self.shared.config
    }

    /// Appends `records` durably: returns once they are fsynced, or why not.
    /// Nothing is written when the spool would go past its size limit.
    pub async fn append(&self, records: &[Record]) -> Result<(), SpoolError> {
        let mut frames = Vec::new();
        let mut keys = Vec::with_capacity(records.len());
        for r in records {
            codec::encode(r, &mut frames).map_err(|e| SpoolError::TooLarge(e.to_string()))?;
            keys.push(partition_key(&r.queue, &r.partition));
        }
        let n = frames.len() as u64;
        let limit = self.shared.config.max_bytes;
        self.shared
            .bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used + n <= limit).then_some(used + n)
            })
            .map_err(|used| {
                self.shared.full.store(true, Ordering::Relaxed);
                SpoolError::Full { used, limit }
            })?;
        self.shared.full.store(false, Ordering::Relaxed);
        let (reply, rx) = oneshot::channel();
        let sent = lock(&self.tx).send(Command::Append {
            frames,
            keys,
            reply,
        });
        if sent.is_err() {
            self.shared.bytes.fetch_sub(n, Ordering::AcqRel);
            return Err(SpoolError::Closed);
        }
        // the writer releases the reservation itself on failure, so a push whose
        // request is cancelled meanwhile leaves the accounting right
        rx.await
            .map_err(|_| SpoolError::Closed)?
            .map_err(Into::into)
    }

    /// Seals the open segment if it holds records, so the drainer can read it.
    pub async fn seal(&self) -> Result<bool, SpoolError> {
        let (reply, rx) = oneshot::channel();
        lock(&self.tx)
            .send(Command::Seal { reply })
            .map_err(|_| SpoolError::Closed)?;
        Ok(rx.await.map_err(|_| SpoolError::Closed)??)
    }

    /// Makes every append before it durable, seals the open segment and stops
    /// the writer thread; appends after it fail as [`SpoolError::Closed`].
    /// Called once, at shutdown.
    pub async fn close(&self) -> Result<(), SpoolError> {
        let (reply, rx) = oneshot::channel();
        lock(&self.tx)
            .send(Command::Close { reply })
            .map_err(|_| SpoolError::Closed)?;
        Ok(rx.await.map_err(|_| SpoolError::Closed)??)
    }

    /// True when no record waits to be replayed.
    pub fn is_empty(&self) -> bool {
        self.shared.records.load(Ordering::Acquire) == 0
    }

    /// True when any of `keys` (partition keys) has records waiting in the spool.
    pub fn holds_any<'a>(&self, mut keys: impl Iterator<Item = (&'a str, &'a str)>) -> bool {
        if self.is_empty() {
            return false;
        }
        let pending = lock(&self.shared.pending);
        keys.any(|(q, p)| pending.contains_key(&partition_key(q, p)))
    }

    /// Records in the open (not yet sealed) segment.
    pub fn active_records(&self) -> u64 {
        self.shared.active_records.load(Ordering::Acquire)
    }

    /// The oldest sealed segment with its replay progress.
    pub fn front(&self) -> Option<Sealed> {
        lock(&self.shared.sealed).front().copied()
    }

    /// Records that segment `seq` is replayed up to `pos` and that `records`
    /// left the spool (replayed, duplicate, or moved to `failed/`).
    pub fn advance(&self, seq: u64, pos: u64, records: &[(u64, Record)], drained: u64) {
        if let Err(e) = segment::write_pos(&self.shared.dir, seq, pos) {
            tracing::warn!(error = %e, "spool: cannot record replay progress (replay stays idempotent)");
        }
        if let Some(s) = lock(&self.shared.sealed).iter_mut().find(|s| s.seq == seq) {
            s.pos = pos;
        }
        let keys: Vec<String> = records
            .iter()
            .map(|(_, r)| partition_key(&r.queue, &r.partition))
            .collect();
        self.shared.remove_pending(keys.iter().map(String::as_str));
        self.shared
            .drained_total
            .fetch_add(drained, Ordering::Relaxed);
    }

    /// Deletes the fully replayed front segment `seq`.
    pub fn retire(&self, seq: u64) -> io::Result<()> {
        segment::remove(&self.shared.dir, seq)?;
        let mut sealed = lock(&self.shared.sealed);
        if let Some(i) = sealed.iter().position(|s| s.seq == seq) {
            if let Some(s) = sealed.remove(i) {
                self.shared.bytes.fetch_sub(s.len, Ordering::AcqRel);
                self.shared.full.store(false, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Moves one record PostgreSQL refused for good into `failed/`.
    pub fn fail_record(&self, seq: u64, offset: u64, record: &Record, reason: &str) {
        tracing::error!(
            queue = %record.queue,
            partition = %record.partition,
            transaction_id = %record.transaction_id,
            reason,
            "spool: record refused by PostgreSQL; moved to failed/"
        );
        if let Err(e) = segment::fail_record(&self.shared.dir, seq, offset, record, reason) {
            tracing::error!(error = %e, "spool: cannot write the refused record to failed/");
        }
        self.shared.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Quarantines the rest of sealed segment `seq` from byte `pos` (it turned out
    /// unreadable): a copy goes to `failed/` with `reason` and the segment is dropped.
    pub fn quarantine(&self, seq: u64, pos: u64, reason: &str) {
        let path = segment::segment_path(&self.shared.dir, seq, true);
        tracing::error!(segment = %path.display(), reason, "spool: unreadable segment moved to failed/");
        let reason = format!("{reason}; records before byte {pos} were replayed");
        if let Err(e) = segment::quarantine_tail(&self.shared.dir, &path, pos, &reason) {
            tracing::error!(error = %e, "spool: cannot quarantine the segment");
        }
        self.shared.failed.fetch_add(1, Ordering::Relaxed);
        let _ = self.retire(seq);
        // the dropped records' partition counts are unknown: recount what is left
        let mut keys = Vec::new();
        for s in lock(&self.shared.sealed).iter() {
            if let Ok(scan) = segment::scan(&segment::segment_path(&self.shared.dir, s.seq, true)) {
                keys.extend(
                    scan.records
                        .into_iter()
                        .filter(|(off, _, _)| *off >= s.pos)
                        .map(|(_, q, p)| partition_key(&q, &p)),
                );
            }
        }
        lock(&self.shared.pending).clear();
        self.shared.records.store(0, Ordering::Release);
        self.shared.add_pending(keys.iter());
    }

    /// Current numbers.
    pub fn stats(&self) -> SpoolStats {
        let s = &self.shared;
        let sealed = lock(&s.sealed).len() as u64;
        SpoolStats {
            records: s.records.load(Ordering::Acquire),
            bytes: s.bytes.load(Ordering::Acquire),
            max_bytes: s.config.max_bytes,
            segments: sealed + u64::from(s.active_records.load(Ordering::Acquire) > 0),
            failed: s.failed.load(Ordering::Relaxed),
            drained_total: s.drained_total.load(Ordering::Relaxed),
            healthy: s.healthy.load(Ordering::Relaxed),
        }
    }

    /// True while the spool takes pushes: its writes succeed and the last push
    /// was not refused for the size limit (until space is freed).
    pub fn is_healthy(&self) -> bool {
        self.shared.healthy.load(Ordering::Relaxed) && !self.shared.full.load(Ordering::Relaxed)
    }
}

/// What recovery left in place.
struct Recovered {
    sealed: VecDeque<Sealed>,
    pending_keys: Vec<String>,
    bytes: u64,
    next_seq: u64,
}

/// Scans every segment: cuts torn tails, quarantines corrupted records (the
/// valid prefix stays), seals a leftover open segment, drops replayed ones.
fn recover(dir: &Path) -> io::Result<Recovered> {
    let listing = segment::list(dir)?;
    let mut out = Recovered {
        sealed: VecDeque::new(),
        pending_keys: Vec::new(),
        bytes: 0,
        next_seq: listing.segments.last().map_or(1, |(seq, _)| seq + 1),
    };
    for (seq, sealed) in listing.segments {
        let path = segment::segment_path(dir, seq, sealed);
        let scan = segment::scan(&path)?;
        if let Some((at, e)) = &scan.corrupt {
            let reason = format!(
                "{}: bad record at byte {at} ({e}); the {} records before it were kept for replay, \
                 the {} bytes from it on were not replayed",
                path.display(),
                scan.records.len(),
                scan.file_len - at
            );
            tracing::error!(reason, "spool: corrupted segment quarantined to failed/");
            segment::quarantine_tail(dir, &path, scan.valid_len, &reason)?;
        } else if scan.valid_len < scan.file_len {
            tracing::warn!(
                segment = %path.display(),
                cut_bytes = scan.file_len - scan.valid_len,
                "spool: torn tail (a write cut short by a crash, never acknowledged) cut off"
            );
            segment::truncate(&path, scan.valid_len)?;
        }
        if scan.valid_len == 0 {
            std::fs::remove_file(&path)?;
            continue;
        }
        if !sealed {
            segment::seal(dir, seq)?;
        }
        let pos = segment::read_pos(dir, seq).min(scan.valid_len);
        if pos >= scan.valid_len {
            segment::remove(dir, seq)?;
            continue;
        }
        out.pending_keys.extend(
            scan.records
                .into_iter()
                .filter(|(off, _, _)| *off >= pos)
                .map(|(_, q, p)| partition_key(&q, &p)),
        );
        out.bytes += scan.valid_len;
        out.sealed.push_back(Sealed {
            seq,
            pos,
            len: scan.valid_len,
        });
    }
    Ok(out)
}
