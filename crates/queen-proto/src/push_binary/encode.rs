//! The encoder of the `QPB1` and `QTB1` bodies: what the 2.6 client writes,
//! for tests, the fuzz target and queen-bench.

use uuid::Uuid;

use super::{
    Item, FLAG_COUNTS, FLAG_FRAMES, FLAG_TXN, FLAG_ZSTD, FRAME_BODY_MIN, PUSH_MAGIC,
    TRANSACTION_MAGIC,
};

/// One partition's messages, for the encoders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch<'a> {
    pub queue: &'a str,
    pub partition: &'a str,
    pub messages: Vec<Message<'a>>,
}

/// One message, for the encoders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message<'a> {
    /// `""`: none (the plain form then lets the broker mint one; the frames
    /// form writes the message id's text, as the client does).
    pub transaction_id: &'a str,
    /// Written by the frames form only.
    pub message_id: Uuid,
    /// One JSON document.
    pub payload: &'a [u8],
}

/// How [`encode_push`] writes the groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The plain form with transaction ids (flag 4), zstd over the whole body when set (flag 1).
    Plain { zstd: bool },
    /// The frames form (flag 8): what the 2.6 client sends with `push_compression`.
    Frames,
}

/// Writes a `QPB1` body. Names and ids over 65535 bytes are cut to their
/// length field (the caller keeps them shorter). Fails only if zstd does.
pub fn encode_push(batches: &[Batch<'_>], form: Form, counts: bool) -> std::io::Result<Vec<u8>> {
    let mut out = PUSH_MAGIC.to_vec();
    let counts = if counts { FLAG_COUNTS } else { 0 };
    match form {
        Form::Plain { zstd: false } => {
            out.push(FLAG_TXN | counts);
            plain_body(batches, &mut out);
        }
        Form::Plain { zstd: true } => {
            out.push(FLAG_TXN | FLAG_ZSTD | counts);
            let mut plain = Vec::new();
            plain_body(batches, &mut plain);
            out.extend_from_slice(&(plain.len() as u32).to_le_bytes());
            out.extend_from_slice(&zstd::bulk::compress(&plain, 1)?);
        }
        Form::Frames => {
            out.push(FLAG_FRAMES | counts);
            frames_body(batches, &mut out)?;
        }
    }
    Ok(out)
}

/// Writes a `QTB1` body: `head` (the JSON transaction body without its pushes), then `batches`.
pub fn encode_transaction(
    head: &[u8],
    batches: &[Batch<'_>],
    counts: bool,
) -> std::io::Result<Vec<u8>> {
    let mut out = TRANSACTION_MAGIC.to_vec();
    out.push(if counts { FLAG_COUNTS } else { 0 });
    out.extend_from_slice(&(head.len() as u32).to_le_bytes());
    out.extend_from_slice(head);
    frames_body(batches, &mut out)?;
    Ok(out)
}

/// Groups consecutive items of one (queue, partition) into batches, as the
/// clients do, for re-encoding decoded items.
pub fn regroup(items: &[Item]) -> Vec<Batch<'_>> {
    let mut batches: Vec<Batch<'_>> = Vec::new();
    for item in items {
        let message = Message {
            transaction_id: item.transaction_id.as_deref().unwrap_or(""),
            message_id: item.message_id.unwrap_or(Uuid::nil()),
            payload: item.payload.as_bytes(),
        };
        match batches.last_mut() {
            Some(b) if b.queue == item.queue.as_str() && b.partition == item.partition.as_str() => {
                b.messages.push(message);
            }
            _ => batches.push(Batch {
                queue: item.queue.as_str(),
                partition: item.partition.as_str(),
                messages: vec![message],
            }),
        }
    }
    batches
}

fn put_str16(out: &mut Vec<u8>, s: &[u8]) {
    let s = &s[..s.len().min(u16::MAX as usize)];
    out.extend_from_slice(&(s.len() as u16).to_le_bytes());
    out.extend_from_slice(s);
}

fn put_names(out: &mut Vec<u8>, b: &Batch<'_>) {
    put_str16(out, b.queue.as_bytes());
    put_str16(out, b.partition.as_bytes());
    out.extend_from_slice(&(b.messages.len() as u32).to_le_bytes());
}

fn plain_body(batches: &[Batch<'_>], out: &mut Vec<u8>) {
    out.extend_from_slice(&(batches.len() as u32).to_le_bytes());
    for b in batches {
        put_names(out, b);
        for m in &b.messages {
            put_str16(out, m.transaction_id.as_bytes());
            out.extend_from_slice(&(m.payload.len() as u32).to_le_bytes());
            out.extend_from_slice(m.payload);
        }
    }
}

fn frames_body(batches: &[Batch<'_>], out: &mut Vec<u8>) -> std::io::Result<()> {
    out.extend_from_slice(&(batches.len() as u32).to_le_bytes());
    let mut frames = Vec::new();
    for b in batches {
        frames.clear();
        for m in &b.messages {
            let own_id;
            let txn = if m.transaction_id.is_empty() {
                own_id = m.message_id.to_string();
                own_id.as_bytes()
            } else {
                m.transaction_id.as_bytes()
            };
            let txn = &txn[..txn.len().min(u16::MAX as usize)];
            let body_len = FRAME_BODY_MIN + txn.len() + m.payload.len();
            frames.extend_from_slice(&(body_len as u32).to_le_bytes());
            frames.push(0);
            frames.extend_from_slice(m.message_id.as_bytes());
            put_str16(&mut frames, txn);
            frames.extend_from_slice(m.payload);
        }
        put_names(out, b);
        let z = zstd::bulk::compress(&frames, 1)?;
        out.extend_from_slice(&(z.len() as u32).to_le_bytes());
        out.extend_from_slice(&z);
    }
    Ok(())
}
