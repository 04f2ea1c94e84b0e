//! Segment files on disk: naming, the directory lock, durable create/seal,
//! recovery scans and quarantine into `failed/`.
//!
//! Layout of `FILE_BUFFER_DIR`:
//!
//! ```text
//! LOCK                       held (flock) by the live broker that owns the directory
//! 00000000000000000007.seg   sealed segment: immutable, waiting to be replayed
//! 00000000000000000007.pos   replay progress of that segment (byte offset), advisory
//! 00000000000000000008.open  the segment being appended to (at most one)
//! failed/                    records PostgreSQL refused for good, and corrupted files,
//!                            each with a `.reason` text file beside it
//! ```
//!
//! Durability: the writer fsyncs data before it answers; a new file is followed by
//! a directory fsync; sealing is a rename followed by a directory fsync. Progress
//! files are written by rename without fsync: losing one only replays records
//! again, and replay is idempotent.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use queen_proto::spool::{self as codec, Record, RecordError, HEADER_LEN};

pub const LOCK_FILE: &str = "LOCK";
pub const FAILED_DIR: &str = "failed";
const SEALED_EXT: &str = "seg";
const OPEN_EXT: &str = "open";
const POS_EXT: &str = "pos";
const REASON_EXT: &str = "reason";

/// The path of segment `seq`, sealed or open.
pub fn segment_path(dir: &Path, seq: u64, sealed: bool) -> PathBuf {
    let ext = if sealed { SEALED_EXT } else { OPEN_EXT };
    dir.join(format!("{seq:020}.{ext}"))
}

fn pos_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:020}.{POS_EXT}"))
}

/// Makes the entries of `dir` (created, renamed, removed files) durable.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `dir` (and `failed/`) if missing, checks it can be written, and takes
/// its lock. The returned file holds the lock until it is dropped.
pub fn lock_dir(dir: &Path) -> io::Result<File> {
    fs::create_dir_all(dir.join(FAILED_DIR))?;
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(dir.join(LOCK_FILE))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "another live broker holds this directory (its LOCK file is locked); \
                 every broker needs its own FILE_BUFFER_DIR",
            ))
        }
        Err(fs::TryLockError::Error(e)) => return Err(e),
    }
    // a write probe: a read-only mount or directory fails here, not at the first push
    let probe = dir.join(".write-probe");
    fs::write(&probe, b"ok")?;
    fs::remove_file(&probe)?;
    lock.set_len(0)?;
    (&lock).write_all(format!("{}\n", std::process::id()).as_bytes())?;
    Ok(lock)
}

/// Creates the empty open segment `seq` durably.
pub fn create_open(dir: &Path, seq: u64) -> io::Result<File> {
    let file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(segment_path(dir, seq, false))?;
    fsync_dir(dir)?;
    Ok(file)
}

/// Seals segment `seq`: its data is already synced; the rename is made durable.
pub fn seal(dir: &Path, seq: u64) -> io::Result<()> {
    fs::rename(segment_path(dir, seq, false), segment_path(dir, seq, true))?;
    fsync_dir(dir)
}

/// Removes a fully replayed segment and its progress file.
pub fn remove(dir: &Path, seq: u64) -> io::Result<()> {
    fs::remove_file(segment_path(dir, seq, true))?;
    match fs::remove_file(pos_path(dir, seq)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    fsync_dir(dir)
}

/// Reads the replay progress of segment `seq` (0 when absent or unreadable).
pub fn read_pos(dir: &Path, seq: u64) -> u64 {
    fs::read_to_string(pos_path(dir, seq))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Records that segment `seq` is replayed up to byte `pos` (write + rename, no fsync).
pub fn write_pos(dir: &Path, seq: u64, pos: u64) -> io::Result<()> {
    let tmp = dir.join(format!("{seq:020}.{POS_EXT}.tmp"));
    fs::write(&tmp, format!("{pos}\n"))?;
    fs::rename(&tmp, pos_path(dir, seq))
}

/// Segment files found in a directory at start.
#[derive(Debug, Default)]
pub struct Listing {
    /// `(seq, sealed)` in sequence order.
    pub segments: Vec<(u64, bool)>,
}

/// Lists the segments of `dir` and deletes leftover temporary files.
pub fn list(dir: &Path) -> io::Result<Listing> {
    let mut segments = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let (Some(stem), Some(ext)) = (
            path.file_stem().and_then(|s| s.to_str()),
            path.extension().and_then(|s| s.to_str()),
        ) else {
            continue;
        };
        if ext == "tmp" {
            let _ = fs::remove_file(&path);
            continue;
        }
        let Ok(seq) = stem.parse::<u64>() else {
            continue;
        };
        match ext {
            SEALED_EXT => segments.push((seq, true)),
            OPEN_EXT => segments.push((seq, false)),
            _ => {}
        }
    }
    segments.sort_unstable();
    Ok(Listing { segments })
}

/// What a scan of one segment file found.
#[derive(Debug)]
pub struct Scan {
    /// `(start offset, queue, partition)` of every valid record, in file order.
    pub records: Vec<(u64, String, String)>,
    /// Bytes of the valid prefix.
    pub valid_len: u64,
    pub file_len: u64,
    /// Set when a record is bad (not merely cut short): its offset and why.
    pub corrupt: Option<(u64, RecordError)>,
}

/// Decodes every record of `path` (at most one record's bytes in memory at a time).
pub fn scan(path: &Path) -> io::Result<Scan> {
    let file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut scan = Scan {
        records: Vec::new(),
        valid_len: 0,
        file_len,
        corrupt: None,
    };
    loop {
        match read_frame(&mut reader)? {
            Frame::End | Frame::Torn => break,
            Frame::Bad(e) => {
                let rest = file_len - scan.valid_len;
                if !is_zero_tail(path, scan.valid_len, rest)? {
                    scan.corrupt = Some((scan.valid_len, e));
                }
                break;
            }
            Frame::Ok(record, n) => {
                scan.records
                    .push((scan.valid_len, record.queue, record.partition));
                scan.valid_len += n as u64;
            }
        }
    }
    Ok(scan)
}

/// True when the `len` bytes at `from` are all zero: a tail the file system
/// extended but never wrote (a crash mid-append), not corruption.
fn is_zero_tail(path: &Path, from: u64, len: u64) -> io::Result<bool> {
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(from))?;
    let mut buf = [0u8; 8192];
    let mut left = len;
    while left > 0 {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        left = left.saturating_sub(n as u64);
    }
    Ok(true)
}

/// Cuts the file at `path` to `len` bytes, durably.
pub fn truncate(path: &Path, len: u64) -> io::Result<()> {
    let f = OpenOptions::new().write(true).open(path)?;
    f.set_len(len)?;
    f.sync_all()
}

/// Moves a copy of a corrupted segment into `failed/` with a reason, then cuts
/// the segment to its valid prefix, so the records before the bad one are still
/// replayed. Safe to repeat after a crash at any step.
pub fn quarantine_tail(dir: &Path, path: &Path, valid_len: u64, reason: &str) -> io::Result<()> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("segment");
    let failed = dir.join(FAILED_DIR);
    let copy = failed.join(name);
    fs::copy(path, &copy)?;
    File::open(&copy)?.sync_all()?;
    write_reason(&failed, name, reason)?;
    truncate(path, valid_len)
}

/// Writes one refused record into `failed/` as a frame file with a reason beside it.
pub fn fail_record(
    dir: &Path,
    seq: u64,
    offset: u64,
    record: &Record,
    reason: &str,
) -> io::Result<()> {
    let failed = dir.join(FAILED_DIR);
    let name = format!("{seq:020}-{offset:012}.rec");
    let mut frame = Vec::new();
    codec::encode(record, &mut frame).map_err(io::Error::other)?;
    let path = failed.join(&name);
    let mut f = File::create(&path)?;
    f.write_all(&frame)?;
    f.sync_all()?;
    write_reason(&failed, &name, reason)
}

fn write_reason(failed: &Path, name: &str, reason: &str) -> io::Result<()> {
    let path = failed.join(format!("{name}.{REASON_EXT}"));
    let mut f = File::create(&path)?;
    f.write_all(reason.as_bytes())?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    fsync_dir(failed)
}

/// Entries in `failed/` (one per reason file).
pub fn count_failed(dir: &Path) -> u64 {
    fs::read_dir(dir.join(FAILED_DIR))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == REASON_EXT))
                .count() as u64
        })
        .unwrap_or(0)
}

/// One frame read from a stream.
pub enum Frame {
    /// A valid record and its frame length.
    Ok(Record, usize),
    /// The stream ended exactly at a frame boundary.
    End,
    /// The stream ended inside a frame.
    Torn,
    /// The frame is invalid.
    Bad(RecordError),
}

/// Reads the next frame from `r`, allocating only after the length is validated.
pub fn read_frame(r: &mut impl Read) -> io::Result<Frame> {
    let mut header = [0u8; HEADER_LEN];
    let got = read_full(r, &mut header)?;
    if got == 0 {
        return Ok(Frame::End);
    }
    if got < HEADER_LEN {
        return Ok(Frame::Torn);
    }
    let total = match codec::frame_len(header) {
        Ok(n) => n,
        Err(e) => return Ok(Frame::Bad(e)),
    };
    let mut buf = vec![0u8; total];
    buf[..HEADER_LEN].copy_from_slice(&header);
    if read_full(r, &mut buf[HEADER_LEN..])? < total - HEADER_LEN {
        return Ok(Frame::Torn);
    }
    Ok(match codec::decode(&buf) {
        Ok(Some((record, n))) => Frame::Ok(record, n),
        Ok(None) => Frame::Torn,
        Err(e) => Frame::Bad(e),
    })
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut at = 0;
    while at < buf.len() {
        match r.read(&mut buf[at..]) {
            Ok(0) => break,
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(at)
}

/// A batch read for replay: records with the offset each one starts at, and the
/// offset after the last one.
#[derive(Debug, Default)]
pub struct Batch {
    pub records: Vec<(u64, Record)>,
    pub end: u64,
    /// Set when the segment holds a bad or cut-short frame at `end`.
    pub bad: Option<String>,
}

/// Reads up to `max` records of sealed segment `seq` from byte `pos`.
pub fn read_batch(dir: &Path, seq: u64, pos: u64, max: usize) -> io::Result<Batch> {
    let mut file = File::open(segment_path(dir, seq, true))?;
    file.seek(SeekFrom::Start(pos))?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut batch = Batch {
        records: Vec::new(),
        end: pos,
        bad: None,
    };
    while batch.records.len() < max {
        match read_frame(&mut reader)? {
            Frame::End => break,
            Frame::Torn => {
                batch.bad = Some(format!("record cut short at byte {}", batch.end));
                break;
            }
            Frame::Bad(e) => {
                batch.bad = Some(format!("bad record at byte {}: {e}", batch.end));
                break;
            }
            Frame::Ok(record, n) => {
                batch.records.push((batch.end, record));
                batch.end += n as u64;
            }
        }
    }
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn record(id: &str) -> Record {
        Record {
            queue: "q".into(),
            partition: "p".into(),
            transaction_id: id.into(),
            trace_id: None,
            message_id: None,
            payload: "1".into(),
            producer_sub: None,
            spooled_at_ms: 1,
        }
    }

    #[test]
    fn names_sort_in_sequence_order() {
        let dir = Path::new("/spool");
        assert_eq!(
            segment_path(dir, 7, true),
            Path::new("/spool/00000000000000000007.seg")
        );
        assert_eq!(
            segment_path(dir, 8, false),
            Path::new("/spool/00000000000000000008.open")
        );
        assert!(segment_path(dir, 9, true) < segment_path(dir, 10, true));
    }

    #[test]
    fn frames_are_read_back_in_order_then_end() {
        let mut buf = Vec::new();
        for id in ["a", "b"] {
            codec::encode(&record(id), &mut buf).unwrap();
        }
        let mut r = Cursor::new(buf);
        for id in ["a", "b"] {
            match read_frame(&mut r).unwrap() {
                Frame::Ok(rec, _) => assert_eq!(rec.transaction_id, id),
                _ => panic!("expected a record"),
            }
        }
        assert!(matches!(read_frame(&mut r).unwrap(), Frame::End));
    }

    #[test]
    fn a_cut_frame_is_torn_and_a_damaged_one_is_bad() {
        let mut buf = Vec::new();
        codec::encode(&record("a"), &mut buf).unwrap();
        for cut in [3, HEADER_LEN, buf.len() - 1] {
            let mut r = Cursor::new(buf[..cut].to_vec());
            assert!(
                matches!(read_frame(&mut r).unwrap(), Frame::Torn),
                "cut {cut}"
            );
        }
        let mut damaged = buf.clone();
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        assert!(matches!(
            read_frame(&mut Cursor::new(damaged)).unwrap(),
            Frame::Bad(RecordError::Checksum { .. })
        ));
        let zeros = vec![0u8; 16];
        assert!(matches!(
            read_frame(&mut Cursor::new(zeros)).unwrap(),
            Frame::Bad(RecordError::ZeroLength)
        ));
    }
}
