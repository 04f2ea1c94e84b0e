//! The binary push and transaction bodies of the queen-mq 2.6 clients
//! (`Content-Type: application/x-queen-push`), free of I/O.
//!
//! spec: client-dataplane-2.6 §3 (`QPB1`), §4 (`QTB1`), §6 (zstd). All
//! integers are little-endian; `str16` is a `u16` byte length and UTF-8.
//!
//! ```text
//! QPB1 | u8 flags | [u32 raw_len, flag 1] | body
//!   flag 1  body is one zstd frame whose content is raw_len bytes of the plain body
//!   flag 2  answer with counts
//!   flag 4  every item carries a transaction id ("" = the broker mints one)
//!   flag 8  frames form (never with 1 or 4)
//! plain:  u32 groups | group: str16 queue | str16 partition | u32 n
//!         | n × ([str16 transactionId, flag 4] | u32 len | payload)
//! frames: u32 groups | group: str16 queue | str16 partition | u32 n | u32 z_len | z
//!         z = one zstd frame of n frames: u32 body_len | u8 flags = 0
//!             | [16] message id | str16 transactionId | payload
//! QTB1 | u8 flags (2 = counts) | u32 head_len | head (JSON) | groups as in the frames form
//! ```
//!
//! [`decode_push`] and [`decode_transaction`] check everything §3.4 lists and
//! answer the items as validated names, transaction ids and payloads, or a
//! [`BinaryError`] naming the place (`groups[1].items[3].transactionId`) and
//! what is wrong with it. zstd is inflated within [`Limits::max_decoded_bytes`]
//! over the whole body: a frame must declare its content size, a size over
//! what is left of the bound is refused before anything is allocated, and
//! the output buffer is exactly the declared size, so a frame that lies
//! about it fails instead of growing.
//!
//! The encoders ([`encode_push`], [`encode_transaction`]) write the same
//! layout; the load generator and the tests use them.

use uuid::Uuid;

use crate::names::{PartitionName, QueueName, MAX_NAME_CHARS};
use crate::payload::check_payload;

/// The `Content-Type` the clients send with either body.
pub const CONTENT_TYPE: &str = "application/x-queen-push";

/// Magic of the push body.
pub const PUSH_MAGIC: [u8; 4] = *b"QPB1";
/// Magic of the transaction body.
pub const TRANSACTION_MAGIC: [u8; 4] = *b"QTB1";

/// `QPB1` flag: the body is one zstd frame.
pub const FLAG_ZSTD: u8 = 1;
/// `QPB1` / `QTB1` flag: answer with counts instead of one result per item.
pub const FLAG_COUNTS: u8 = 2;
/// `QPB1` flag: every item carries a transaction id.
pub const FLAG_TXN: u8 = 4;
/// `QPB1` flag: the groups are zstd frames of stored-message frames.
pub const FLAG_FRAMES: u8 = 8;

/// Longest transaction id, in characters: the JSON push's limit.
pub const MAX_TRANSACTION_ID_CHARS: usize = MAX_NAME_CHARS;

/// The zstd frame magic number as it appears on the wire.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// u32 body_len + u8 flags + 16-byte id + u16 txn length: the smallest frame.
const MIN_FRAME_BYTES: usize = 4 + FRAME_BODY_MIN;
/// flags + id + txn length: the smallest `body_len`.
const FRAME_BODY_MIN: usize = 1 + 16 + 2;
/// u32 payload length: the smallest plain item (without a transaction id).
const MIN_PLAIN_ITEM_BYTES: usize = 4;

/// Which body a buffer's magic announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `QPB1`, for `POST /api/v1/push`.
    Push,
    /// `QTB1`, for `POST /api/v1/transaction`.
    Transaction,
}

/// The body `buf` announces by its first four bytes, if any.
pub fn kind(buf: &[u8]) -> Option<Kind> {
    match buf.get(..4)? {
        m if m == PUSH_MAGIC => Some(Kind::Push),
        m if m == TRANSACTION_MAGIC => Some(Kind::Transaction),
        _ => None,
    }
}

/// What one body may cost the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// zstd output of the whole body at most, in bytes (the broker's push body limit).
    pub max_decoded_bytes: usize,
    /// Nesting depth of a payload at most (`MAX_PAYLOAD_DEPTH`).
    pub max_payload_depth: usize,
    /// Items of one body at most (`MAX_PUSH_ITEMS`, or the transaction's operation limit).
    pub max_items: usize,
}

/// One validated message of a binary body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub queue: QueueName,
    pub partition: PartitionName,
    /// `None`: the broker mints one (an empty id of the plain form, or the
    /// plain form without flag 4).
    pub transaction_id: Option<String>,
    /// The client-minted message id of the frames form.
    pub message_id: Option<Uuid>,
    /// The payload: one JSON document, as sent.
    pub payload: String,
}

/// A decoded `QPB1` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushBody {
    /// Flag 2: answer with counts.
    pub counts: bool,
    /// The items in wire order.
    pub items: Vec<Item>,
}

/// A decoded `QTB1` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionBody<'a> {
    /// Flag 2: answer with counts.
    pub counts: bool,
    /// The JSON transaction body without its pushes (UTF-8, not yet parsed;
    /// may be empty).
    pub head: &'a str,
    /// The pushed messages in wire order.
    pub items: Vec<Item>,
}

mod error;
pub use error::{BinaryError, GroupField, ItemField, Place};

/// Decodes a `QPB1` body.
pub fn decode_push(buf: &[u8], limits: &Limits) -> Result<PushBody, BinaryError> {
    if kind(buf) != Some(Kind::Push) {
        return Err(BinaryError::BadMagic);
    }
    let mut c = Cursor(&buf[4..]);
    let flags = c.u8(Place::Flags)?;
    if flags & !(FLAG_ZSTD | FLAG_COUNTS | FLAG_TXN | FLAG_FRAMES) != 0 {
        return Err(BinaryError::UnknownFlags(flags));
    }
    if flags & FLAG_FRAMES != 0 && flags & (FLAG_ZSTD | FLAG_TXN) != 0 {
        return Err(BinaryError::FlagConflict(flags));
    }
    let mut budget = Budget {
        left: limits.max_decoded_bytes,
        limit: limits.max_decoded_bytes,
    };
    let counts = flags & FLAG_COUNTS != 0;
    let with_txn = flags & FLAG_TXN != 0;
    let items = if flags & FLAG_FRAMES != 0 {
        frame_groups(c, limits, &mut budget)?
    } else if flags & FLAG_ZSTD != 0 {
        let raw_len = c.u32(Place::RawLen)?;
        let plain = inflate(c.0, Some(raw_len), &mut budget, Place::RawLen)?;
        plain_groups(Cursor(&plain), with_txn, limits)?
    } else {
        plain_groups(c, with_txn, limits)?
    };
    Ok(PushBody { counts, items })
}

/// Decodes a `QTB1` body.
pub fn decode_transaction<'a>(
    buf: &'a [u8],
    limits: &Limits,
) -> Result<TransactionBody<'a>, BinaryError> {
    if kind(buf) != Some(Kind::Transaction) {
        return Err(BinaryError::BadMagic);
    }
    let mut c = Cursor(&buf[4..]);
    let flags = c.u8(Place::Flags)?;
    if flags & !FLAG_COUNTS != 0 {
        return Err(BinaryError::UnknownFlags(flags));
    }
    let head_len = c.u32(Place::Head)? as usize;
    let head = c.take(head_len, Place::Head)?;
    let head = std::str::from_utf8(head).map_err(|_| BinaryError::NotUtf8(Place::Head))?;
    let mut budget = Budget {
        left: limits.max_decoded_bytes,
        limit: limits.max_decoded_bytes,
    };
    let items = frame_groups(c, limits, &mut budget)?;
    Ok(TransactionBody {
        counts: flags & FLAG_COUNTS != 0,
        head,
        items,
    })
}

/// A cursor that refuses to read past its end, naming what it was reading.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, place: Place) -> Result<&'a [u8], BinaryError> {
        if n > self.0.len() {
            return Err(BinaryError::Truncated(place));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self, place: Place) -> Result<u8, BinaryError> {
        Ok(self.take(1, place)?[0])
    }

    fn u16(&mut self, place: Place) -> Result<u16, BinaryError> {
        let b = self.take(2, place)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, place: Place) -> Result<u32, BinaryError> {
        let b = self.take(4, place)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn str16(&mut self, place: Place) -> Result<&'a str, BinaryError> {
        let len = self.u16(place)? as usize;
        let bytes = self.take(len, place)?;
        std::str::from_utf8(bytes).map_err(|_| BinaryError::NotUtf8(place))
    }

    /// The group count: at least one.
    fn groups(&mut self) -> Result<u32, BinaryError> {
        match self.u32(Place::Groups)? {
            0 => Err(BinaryError::Zero(Place::Groups)),
            n => Ok(n),
        }
    }

    /// A group's queue and partition, validated as the JSON push validates them.
    fn names(&mut self, g: usize) -> Result<(QueueName, PartitionName), BinaryError> {
        let place = Place::Group(g, GroupField::Queue);
        let queue = QueueName::new(self.str16(place)?)
            .map_err(|error| BinaryError::Name { place, error })?;
        let place = Place::Group(g, GroupField::Partition);
        let partition = PartitionName::new(self.str16(place)?)
            .map_err(|error| BinaryError::Name { place, error })?;
        Ok((queue, partition))
    }

    /// A group's item count: at least one, and at most what `min_item` bytes
    /// per item leave room for in `room` bytes.
    fn n(&mut self, g: usize, room: usize, min_item: usize) -> Result<u32, BinaryError> {
        let place = Place::Group(g, GroupField::N);
        let n = self.u32(place)?;
        if n == 0 {
            return Err(BinaryError::Zero(place));
        }
        if (n as usize).saturating_mul(min_item) > room {
            return Err(BinaryError::Truncated(place));
        }
        Ok(n)
    }

    fn end(&self) -> Result<(), BinaryError> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(BinaryError::Trailing(n)),
        }
    }
}

/// What is left of the body's allowance of decompressed bytes.
struct Budget {
    left: usize,
    limit: usize,
}

/// Inflates one zstd frame that declares its content size (equal to
/// `expected`, when given), within the budget, into a buffer of exactly that size.
fn inflate(
    z: &[u8],
    expected: Option<u32>,
    budget: &mut Budget,
    place: Place,
) -> Result<Vec<u8>, BinaryError> {
    let zstd_err = |reason: String| BinaryError::Zstd { place, reason };
    if z.get(..4) != Some(&ZSTD_MAGIC[..]) {
        return Err(zstd_err("not a zstd frame".into()));
    }
    let declared = match zstd::zstd_safe::get_frame_content_size(z) {
        Ok(Some(n)) => n,
        Ok(None) => {
            return Err(zstd_err(
                "the zstd frame does not declare its content size".into(),
            ))
        }
        Err(_) => return Err(zstd_err("the zstd frame header is damaged".into())),
    };
    if let Some(raw_len) = expected {
        if declared != u64::from(raw_len) {
            return Err(zstd_err(format!(
                "the zstd frame declares {declared} bytes, raw_len says {raw_len}"
            )));
        }
    }
    let size = match usize::try_from(declared) {
        Ok(n) if n <= budget.left => n,
        _ => {
            return Err(BinaryError::Inflate {
                place,
                declared,
                limit: budget.limit,
            })
        }
    };
    match zstd::zstd_safe::find_frame_compressed_size(z) {
        Ok(n) if n == z.len() => {}
        Ok(n) => {
            return Err(zstd_err(format!(
                "{} bytes follow the zstd frame",
                z.len() - n
            )))
        }
        Err(code) => {
            return Err(zstd_err(format!(
                "the zstd frame is damaged: {}",
                zstd::zstd_safe::get_error_name(code)
            )))
        }
    }
    let mut out = Vec::with_capacity(size);
    let mut dctx = zstd::zstd_safe::DCtx::create();
    dctx.decompress(&mut out, z).map_err(|code| {
        zstd_err(format!(
            "the zstd frame does not inflate to its declared {declared} bytes: {}",
            zstd::zstd_safe::get_error_name(code)
        ))
    })?;
    if out.len() != size {
        return Err(zstd_err(format!(
            "the zstd frame inflates to {} bytes, not its declared {declared}",
            out.len()
        )));
    }
    budget.left -= size;
    Ok(out)
}

/// Counts items against the body's limit.
fn count_item(items: &[Item], limits: &Limits) -> Result<(), BinaryError> {
    if items.len() >= limits.max_items {
        return Err(BinaryError::TooManyItems(limits.max_items));
    }
    Ok(())
}

/// The groups of the plain form.
fn plain_groups(
    mut c: Cursor<'_>,
    with_txn: bool,
    limits: &Limits,
) -> Result<Vec<Item>, BinaryError> {
    let groups = c.groups()?;
    let mut items = Vec::new();
    let min_item = MIN_PLAIN_ITEM_BYTES + if with_txn { 2 } else { 0 };
    for g in 0..groups as usize {
        let (queue, partition) = c.names(g)?;
        let n = c.n(g, c.0.len(), min_item)?;
        for i in 0..n as usize {
            count_item(&items, limits)?;
            let transaction_id = if with_txn {
                let place = Place::Item(g, i, ItemField::TransactionId);
                let t = c.str16(place)?;
                check_transaction_id(t, place)?;
                (!t.is_empty()).then(|| t.to_owned())
            } else {
                None
            };
            let place = Place::Item(g, i, ItemField::Payload);
            let len = c.u32(place)? as usize;
            let payload = payload(c.take(len, place)?, place, limits)?;
            items.push(Item {
                queue: queue.clone(),
                partition: partition.clone(),
                transaction_id,
                message_id: None,
                payload,
            });
        }
    }
    c.end()?;
    Ok(items)
}

/// The groups of the frames form (`QPB1` flag 8 and `QTB1`).
fn frame_groups(
    mut c: Cursor<'_>,
    limits: &Limits,
    budget: &mut Budget,
) -> Result<Vec<Item>, BinaryError> {
    let groups = c.groups()?;
    let mut items = Vec::new();
    for g in 0..groups as usize {
        let (queue, partition) = c.names(g)?;
        let n = c.n(g, budget.left, MIN_FRAME_BYTES)?;
        let place = Place::Group(g, GroupField::Z);
        let z_len = c.u32(place)? as usize;
        let z = c.take(z_len, place)?;
        let frames = inflate(z, None, budget, place)?;
        let mut f = Cursor(&frames);
        let mut i = 0usize;
        while !f.0.is_empty() {
            if i == n as usize {
                return Err(BinaryError::ExtraFrames { place, expected: n });
            }
            count_item(&items, limits)?;
            items.push(frame(&mut f, g, i, &queue, &partition, limits)?);
            i += 1;
        }
        if i != n as usize {
            return Err(BinaryError::FrameCount {
                place,
                expected: n,
                found: i,
            });
        }
    }
    c.end()?;
    Ok(items)
}

/// One stored-message frame: `u32 body_len | u8 flags | [16] id | str16 txn | payload`.
fn frame(
    f: &mut Cursor<'_>,
    g: usize,
    i: usize,
    queue: &QueueName,
    partition: &PartitionName,
    limits: &Limits,
) -> Result<Item, BinaryError> {
    let place = Place::Item(g, i, ItemField::Frame);
    let body_len = f.u32(place)?;
    if (body_len as usize) < FRAME_BODY_MIN {
        return Err(BinaryError::FrameLen { place, body_len });
    }
    let mut body = Cursor(f.take(body_len as usize, place)?);
    let flags = body.u8(place)?;
    if flags != 0 {
        return Err(BinaryError::FrameFlags { place, flags });
    }
    let id = body.take(16, Place::Item(g, i, ItemField::MessageId))?;
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(id);
    let message_id = Uuid::from_bytes(bytes);
    let txn_place = Place::Item(g, i, ItemField::TransactionId);
    let txn = body.str16(txn_place)?;
    check_transaction_id(txn, txn_place)?;
    let place = Place::Item(g, i, ItemField::Payload);
    let payload = payload(body.0, place, limits)?;
    Ok(Item {
        queue: queue.clone(),
        partition: partition.clone(),
        // the client writes the id's text when the message has no id of its own
        transaction_id: Some(if txn.is_empty() {
            message_id.to_string()
        } else {
            txn.to_owned()
        }),
        message_id: Some(message_id),
        payload,
    })
}

/// A transaction id as the JSON push accepts it: no NUL, at most 255 characters.
fn check_transaction_id(t: &str, place: Place) -> Result<(), BinaryError> {
    if t.contains('\0') {
        return Err(BinaryError::Nul(place));
    }
    if t.len() > MAX_TRANSACTION_ID_CHARS && t.chars().count() > MAX_TRANSACTION_ID_CHARS {
        return Err(BinaryError::TooLong(place));
    }
    if crate::names::transaction_id_has_dot_segment(t) {
        return Err(BinaryError::Path(
            place,
            crate::names::PathProblem::DotSegment,
        ));
    }
    Ok(())
}

/// A payload: UTF-8 holding exactly one JSON document the broker can return as sent.
fn payload(bytes: &[u8], place: Place, limits: &Limits) -> Result<String, BinaryError> {
    let text = std::str::from_utf8(bytes).map_err(|_| BinaryError::NotUtf8(place))?;
    check_payload(text, limits.max_payload_depth).map_err(|e| BinaryError::Payload {
        place,
        reason: e.to_string(),
    })?;
    Ok(text.to_owned())
}

mod encode;
pub use encode::{encode_push, encode_transaction, regroup, Batch, Form, Message};

#[cfg(test)]
mod tests;
