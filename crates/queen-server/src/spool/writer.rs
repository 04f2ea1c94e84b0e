//! The writer thread: the only code that appends to segment files.
//!
//! Appends from concurrent pushes queue up on a channel; the thread takes all
//! that are waiting, writes them with one `write`, makes them durable with one
//! `fdatasync`, and only then answers each of them (group commit). While one
//! fsync runs the next group gathers, so the fsync rate, not the push rate,
//! bounds the cost.

use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;

use tokio::sync::oneshot;

use super::segment;
use super::Shared;

/// Largest segment file before it is sealed, whatever its record count (64 MiB).
const SEGMENT_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Most commands folded into one group commit.
const MAX_GROUP: usize = 4096;

/// A request to the writer thread.
pub(super) enum Command {
    /// Append encoded frames; `keys` names each record's partition.
    Append {
        frames: Vec<u8>,
        keys: Vec<String>,
        reply: oneshot::Sender<io::Result<()>>,
    },
    /// Seal the open segment if it holds records; answers whether it did.
    Seal {
        reply: oneshot::Sender<io::Result<bool>>,
    },
    /// Write and sync what waits, seal the open segment, sync the directory,
    /// answer, and end the thread: later appends are refused as closed.
    Close {
        reply: oneshot::Sender<io::Result<()>>,
    },
}

/// The segment being appended to.
struct Active {
    seq: u64,
    file: File,
    len: u64,
    records: u64,
}

struct Writer {
    shared: Arc<Shared>,
    active: Option<Active>,
    next_seq: u64,
    /// Frames written but not yet synced, and the appends waiting for them.
    buf: Vec<u8>,
    waiting: Vec<(Vec<String>, oneshot::Sender<io::Result<()>>)>,
    buffered_records: u64,
}

/// Runs until every sender is dropped.
pub(super) fn run(shared: Arc<Shared>, next_seq: u64, rx: Receiver<Command>) {
    let mut w = Writer {
        shared,
        active: None,
        next_seq,
        buf: Vec::new(),
        waiting: Vec::new(),
        buffered_records: 0,
    };
    while let Ok(first) = rx.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(c) => group.push(c),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        for command in group {
            match command {
                Command::Append {
                    frames,
                    keys,
                    reply,
                } => w.append(frames, keys, reply),
                Command::Seal { reply } => {
                    w.flush();
                    let _ = reply.send(w.seal());
                }
                Command::Close { reply } => {
                    w.flush();
                    let closed = w.seal().and_then(|_| segment::fsync_dir(&w.shared.dir));
                    let _ = reply.send(closed);
                    return;
                }
            }
        }
        w.flush();
    }
    w.flush();
}

impl Writer {
    fn append(
        &mut self,
        frames: Vec<u8>,
        keys: Vec<String>,
        reply: oneshot::Sender<io::Result<()>>,
    ) {
        let full = self.active.as_ref().is_some_and(|a| {
            a.records + self.buffered_records >= self.shared.config.events_per_file
                || a.len + self.buf.len() as u64 >= SEGMENT_MAX_BYTES
        });
        if full {
            self.flush();
            if let Err(e) = self.seal() {
                self.shared.set_healthy(false);
                tracing::error!(error = %e, "spool: cannot seal a full segment");
            }
        }
        self.buffered_records += keys.len() as u64;
        self.buf.extend_from_slice(&frames);
        self.waiting.push((keys, reply));
    }

    /// Writes and syncs the buffered frames, then answers their appends.
    fn flush(&mut self) {
        if self.waiting.is_empty() {
            return;
        }
        let bytes = self.buf.len() as u64;
        let result = self.write_synced();
        let waiting = std::mem::take(&mut self.waiting);
        self.buf.clear();
        let records = std::mem::take(&mut self.buffered_records);
        match result {
            Ok(()) => {
                self.shared.set_healthy(true);
                if let Some(a) = &mut self.active {
                    a.len += bytes;
                    a.records += records;
                }
                self.shared
                    .active_records
                    .fetch_add(records, Ordering::AcqRel);
                let all_keys = waiting.iter().flat_map(|(k, _)| k.iter());
                self.shared.add_pending(all_keys);
                for (_, reply) in waiting {
                    let _ = reply.send(Ok(()));
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "spool: append failed; the pushes are refused");
                self.shared.set_healthy(false);
                self.shared.bytes.fetch_sub(bytes, Ordering::AcqRel);
                for (_, reply) in waiting {
                    let _ = reply.send(Err(io::Error::new(e.kind(), e.to_string())));
                }
            }
        }
    }

    fn write_synced(&mut self) -> io::Result<()> {
        if self.active.is_none() {
            let seq = self.next_seq;
            let file = segment::create_open(&self.shared.dir, seq)?;
            self.next_seq += 1;
            self.active = Some(Active {
                seq,
                file,
                len: 0,
                records: 0,
            });
        }
        let Some(a) = self.active.as_mut() else {
            return Err(io::Error::other("no open segment"));
        };
        let written = a
            .file
            .write_all(&self.buf)
            .and_then(|()| a.file.sync_data());
        if let Err(e) = written {
            // cut back to the last durable record, so the file holds no half record
            // followed by good ones; if even that fails, leave the file for recovery
            if a.file
                .set_len(a.len)
                .and_then(|()| a.file.sync_data())
                .is_err()
            {
                let _ = self.seal();
            }
            return Err(e);
        }
        Ok(())
    }

    /// Seals the open segment if it holds records; the next append opens a new one.
    fn seal(&mut self) -> io::Result<bool> {
        let Some(a) = self.active.take() else {
            return Ok(false);
        };
        if a.records == 0 && a.len == 0 {
            self.active = Some(a);
            return Ok(false);
        }
        let seq = a.seq;
        let (len, records) = (a.len, a.records);
        drop(a);
        segment::seal(&self.shared.dir, seq)?;
        self.shared
            .active_records
            .fetch_sub(records, Ordering::AcqRel);
        self.shared.push_sealed(seq, len);
        Ok(true)
    }
}
