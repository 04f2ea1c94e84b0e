//! The record format of the broker's disk spool, free of I/O.
//!
//! A spool segment file is a sequence of frames:
//!
//! ```text
//! u32 BE  length of the body (1 ..= MAX_BODY_LEN)
//! u32 BE  CRC-32 (IEEE) of the body
//! body    one push item, see below
//! ```
//!
//! Body (version 1), all integers big-endian:
//!
//! ```text
//! u8      version (1)
//! u8      flags: bit 0 = traceId present, bit 1 = producerSub present,
//!         bit 2 = messageId present
//! i64     spooled-at time, milliseconds since the Unix epoch
//! [16]    traceId, when flagged
//! [16]    messageId, when flagged (the client minted it: binary push frames)
//! str     queue, partition, transactionId, producerSub (when flagged), payload
//! ```
//!
//! where `str` is a `u32` byte length followed by UTF-8. Nothing may follow the
//! payload. [`decode`] answers `Ok(None)` when `buf` ends inside a frame (a torn
//! tail), checks the length before touching the body, and never panics.

use uuid::Uuid;

/// Bytes of the frame header: length and checksum.
pub const HEADER_LEN: usize = 8;

/// Largest accepted body: 64 MiB (a push body is at most `MAX_BODY_BYTES`, 16 MiB by
/// default, so one item always fits).
pub const MAX_BODY_LEN: usize = 64 * 1024 * 1024;

const VERSION: u8 = 1;
const FLAG_TRACE: u8 = 0b01;
const FLAG_PRODUCER_SUB: u8 = 0b10;
const FLAG_MESSAGE_ID: u8 = 0b100;
/// version + flags + spooled-at.
const FIXED_LEN: usize = 1 + 1 + 8;

/// One spooled push item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub queue: String,
    pub partition: String,
    /// Always set: generated at spool time when the client gave none, so a replay
    /// deduplicates exactly.
    pub transaction_id: String,
    pub trace_id: Option<Uuid>,
    /// The message id the client minted (frames of the binary push); `None`:
    /// the broker mints one when the record is replayed.
    pub message_id: Option<Uuid>,
    /// JSON text of the payload, byte for byte as pushed.
    pub payload: String,
    pub producer_sub: Option<String>,
    /// When the broker accepted the item, in milliseconds since the Unix epoch.
    pub spooled_at_ms: i64,
}

/// Why bytes are not a valid frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    #[error("record length 0")]
    ZeroLength,
    #[error("record length {0} exceeds the limit of {MAX_BODY_LEN} bytes")]
    TooLong(usize),
    #[error("checksum mismatch: header says {expected:#010x}, body has {actual:#010x}")]
    Checksum { expected: u32, actual: u32 },
    #[error("malformed record body: {0}")]
    Malformed(&'static str),
}

/// Reads the frame header: the whole frame length (header included), validated
/// before anything is allocated for the body.
pub fn frame_len(header: [u8; HEADER_LEN]) -> Result<usize, RecordError> {
    let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if len == 0 {
        return Err(RecordError::ZeroLength);
    }
    if len > MAX_BODY_LEN {
        return Err(RecordError::TooLong(len));
    }
    Ok(HEADER_LEN + len)
}

/// Decodes the frame at the start of `buf`: `Ok(Some((record, consumed)))`,
/// `Ok(None)` when `buf` ends before the frame does, or why the frame is bad.
pub fn decode(buf: &[u8]) -> Result<Option<(Record, usize)>, RecordError> {
    let Some(header) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let mut h = [0u8; HEADER_LEN];
    h.copy_from_slice(header);
    let total = frame_len(h)?;
    let Some(body) = buf.get(HEADER_LEN..total) else {
        return Ok(None);
    };
    let expected = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    let actual = crc32fast::hash(body);
    if expected != actual {
        return Err(RecordError::Checksum { expected, actual });
    }
    Ok(Some((decode_body(body)?, total)))
}

/// Appends the frame of `record` to `out`; returns the bytes written.
pub fn encode(record: &Record, out: &mut Vec<u8>) -> Result<usize, RecordError> {
    let len = body_len(record);
    if len > MAX_BODY_LEN {
        return Err(RecordError::TooLong(len));
    }
    let start = out.len();
    out.reserve(HEADER_LEN + len);
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    let mut flags = 0;
    if record.trace_id.is_some() {
        flags |= FLAG_TRACE;
    }
    if record.producer_sub.is_some() {
        flags |= FLAG_PRODUCER_SUB;
    }
    if record.message_id.is_some() {
        flags |= FLAG_MESSAGE_ID;
    }
    out.push(VERSION);
    out.push(flags);
    out.extend_from_slice(&record.spooled_at_ms.to_be_bytes());
    if let Some(t) = record.trace_id {
        out.extend_from_slice(t.as_bytes());
    }
    if let Some(m) = record.message_id {
        out.extend_from_slice(m.as_bytes());
    }
    put_str(out, &record.queue);
    put_str(out, &record.partition);
    put_str(out, &record.transaction_id);
    if let Some(s) = &record.producer_sub {
        put_str(out, s);
    }
    put_str(out, &record.payload);
    let crc = crc32fast::hash(&out[start + HEADER_LEN..]);
    out[start + 4..start + HEADER_LEN].copy_from_slice(&crc.to_be_bytes());
    Ok(out.len() - start)
}

/// Bytes of the frame of `record`, header included.
pub fn encoded_len(record: &Record) -> usize {
    HEADER_LEN + body_len(record)
}

fn body_len(r: &Record) -> usize {
    let strings = [
        Some(&r.queue),
        Some(&r.partition),
        Some(&r.transaction_id),
        r.producer_sub.as_ref(),
        Some(&r.payload),
    ];
    FIXED_LEN
        + if r.trace_id.is_some() { 16 } else { 0 }
        + if r.message_id.is_some() { 16 } else { 0 }
        + strings.iter().flatten().map(|s| 4 + s.len()).sum::<usize>()
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A cursor over a body that refuses to read past its end.
struct Body<'a>(&'a [u8]);

impl<'a> Body<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], RecordError> {
        if n > self.0.len() {
            return Err(RecordError::Malformed(what));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn string(&mut self, what: &'static str) -> Result<String, RecordError> {
        let len = self.take(4, what)?;
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let bytes = self.take(len, what)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| RecordError::Malformed("string is not UTF-8"))
    }
}

fn decode_body(body: &[u8]) -> Result<Record, RecordError> {
    let mut b = Body(body);
    let fixed = b.take(FIXED_LEN, "body shorter than its fixed part")?;
    if fixed[0] != VERSION {
        return Err(RecordError::Malformed("unknown record version"));
    }
    let flags = fixed[1];
    if flags & !(FLAG_TRACE | FLAG_PRODUCER_SUB | FLAG_MESSAGE_ID) != 0 {
        return Err(RecordError::Malformed("unknown flags"));
    }
    let mut at = [0u8; 8];
    at.copy_from_slice(&fixed[2..10]);
    let spooled_at_ms = i64::from_be_bytes(at);
    let trace_id = if flags & FLAG_TRACE != 0 {
        let t = b.take(16, "traceId cut short")?;
        Some(Uuid::from_slice(t).map_err(|_| RecordError::Malformed("traceId"))?)
    } else {
        None
    };
    let message_id = if flags & FLAG_MESSAGE_ID != 0 {
        let m = b.take(16, "messageId cut short")?;
        Some(Uuid::from_slice(m).map_err(|_| RecordError::Malformed("messageId"))?)
    } else {
        None
    };
    let queue = b.string("queue cut short")?;
    let partition = b.string("partition cut short")?;
    let transaction_id = b.string("transactionId cut short")?;
    let producer_sub = if flags & FLAG_PRODUCER_SUB != 0 {
        Some(b.string("producerSub cut short")?)
    } else {
        None
    };
    let payload = b.string("payload cut short")?;
    if !b.0.is_empty() {
        return Err(RecordError::Malformed("bytes after the payload"));
    }
    Ok(Record {
        queue,
        partition,
        transaction_id,
        trace_id,
        message_id,
        payload,
        producer_sub,
        spooled_at_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Record {
        Record {
            queue: "orders".into(),
            partition: "cust-42".into(),
            transaction_id: "0196a7c0-7b2e-7e11-9a3f-2b1c0d9e8f70".into(),
            trace_id: Some(Uuid::from_u128(7)),
            message_id: None,
            payload: r#"{"orderId":1}"#.into(),
            producer_sub: None,
            spooled_at_ms: 1_750_000_000_000,
        }
    }

    fn record() -> impl Strategy<Value = Record> {
        (
            ".{1,40}",
            ".{1,40}",
            ".{1,60}",
            proptest::option::of(any::<u128>()),
            proptest::option::of(any::<u128>()),
            ".{0,200}",
            proptest::option::of(".{0,20}"),
            any::<i64>(),
        )
            .prop_map(|(q, p, t, trace, id, payload, sub, at)| Record {
                queue: q,
                partition: p,
                transaction_id: t,
                trace_id: trace.map(Uuid::from_u128),
                message_id: id.map(Uuid::from_u128),
                payload,
                producer_sub: sub,
                spooled_at_ms: at,
            })
    }

    #[test]
    fn a_record_round_trips_and_reports_its_length() {
        let mut buf = Vec::new();
        let n = encode(&sample(), &mut buf).unwrap();
        assert_eq!(n, buf.len());
        assert_eq!(n, encoded_len(&sample()));
        assert_eq!(decode(&buf).unwrap(), Some((sample(), n)));
    }

    #[test]
    fn a_client_minted_message_id_round_trips() {
        let with_id = Record {
            message_id: Some(Uuid::from_u128(0x019b_76da_a87b_7102_8304_0506_0708_090a)),
            ..sample()
        };
        let mut buf = Vec::new();
        let n = encode(&with_id, &mut buf).unwrap();
        assert_eq!(n, encoded_len(&sample()) + 16);
        assert_eq!(decode(&buf).unwrap(), Some((with_id, n)));
    }

    #[test]
    fn every_strict_prefix_is_incomplete() {
        let mut buf = Vec::new();
        encode(&sample(), &mut buf).unwrap();
        for cut in 0..buf.len() {
            assert_eq!(decode(&buf[..cut]).unwrap(), None, "cut at {cut}");
        }
    }

    #[test]
    fn bad_lengths_are_refused_before_reading_the_body() {
        assert_eq!(decode(&[0; 8]), Err(RecordError::ZeroLength));
        let mut huge = ((MAX_BODY_LEN + 1) as u32).to_be_bytes().to_vec();
        huge.extend_from_slice(&[0; 4]);
        assert_eq!(decode(&huge), Err(RecordError::TooLong(MAX_BODY_LEN + 1)));
    }

    #[test]
    fn a_flipped_body_byte_fails_the_checksum() {
        let mut buf = Vec::new();
        encode(&sample(), &mut buf).unwrap();
        let last = buf.len() - 1;
        buf[last] ^= 0x01;
        assert!(matches!(decode(&buf), Err(RecordError::Checksum { .. })));
    }

    #[test]
    fn a_checksummed_but_malformed_body_is_refused() {
        let body = [VERSION, 0b1000, 0, 0, 0, 0, 0, 0, 0, 0];
        let mut buf = (body.len() as u32).to_be_bytes().to_vec();
        buf.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        buf.extend_from_slice(&body);
        assert_eq!(decode(&buf), Err(RecordError::Malformed("unknown flags")));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn records_round_trip_back_to_back(records in proptest::collection::vec(record(), 1..5)) {
            let mut buf = Vec::new();
            for r in &records {
                encode(r, &mut buf).unwrap();
            }
            let mut at = 0;
            for r in &records {
                let (got, n) = decode(&buf[at..]).unwrap().unwrap();
                prop_assert_eq!(&got, r);
                at += n;
            }
            prop_assert_eq!(at, buf.len());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(Some((record, n))) = decode(&bytes) {
                // whatever decodes re-encodes to the same bytes
                let mut again = Vec::new();
                encode(&record, &mut again).unwrap();
                prop_assert_eq!(&again[..], &bytes[..n]);
            }
        }

        #[test]
        fn a_flipped_bit_in_the_body_never_decodes(r in record(), pick in any::<usize>(), bit in 0u8..8) {
            let mut buf = Vec::new();
            encode(&r, &mut buf).unwrap();
            let i = HEADER_LEN + pick % (buf.len() - HEADER_LEN);
            buf[i] ^= 1 << bit;
            let is_checksum_error = matches!(decode(&buf), Err(RecordError::Checksum { .. }));
            prop_assert!(is_checksum_error);
        }
    }

    /// Replays every saved input under `fuzz/corpus/spool_record/` (and crash
    /// artifacts, if any): none may panic, and whatever decodes must re-encode.
    #[test]
    fn corpus_replays_without_panicking() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
        let dirs = [
            root.join("corpus/spool_record"),
            root.join("artifacts/spool_record"),
        ];
        let mut seen = 0;
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let bytes = std::fs::read(entry.path()).unwrap();
                let mut at = 0;
                while let Ok(Some((record, n))) = decode(&bytes[at..]) {
                    let mut again = Vec::new();
                    encode(&record, &mut again).unwrap();
                    assert_eq!(&again[..], &bytes[at..at + n], "{:?}", entry.path());
                    at += n;
                }
                seen += 1;
            }
        }
        assert!(seen >= 3, "the corpus has seed files");
    }
}
