//! Message identity and payloads: transaction ids, sequence numbers, the salted payload bytes, push bodies.

use queen_proto::push_binary::{self, Batch, Form, Message};

use super::RunState;

/// How Queen's pushes are written: the JSON body, or the binary body of the
/// 2.6 clients (docs/http-api.md, "Binary push and transaction bodies").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PushBody {
    #[default]
    Json,
    /// Case token `bin`: `QPB1` flags 4, what `binary_push=True` sends.
    Binary,
    /// Case token `binz`: `QPB1` flags 8, zstd frames with client-minted
    /// message ids, what `push_compression=True` adds.
    BinaryZstd,
}

impl PushBody {
    /// The case token (`""` for JSON).
    pub fn token(self) -> &'static str {
        match self {
            Self::Json => "",
            Self::Binary => "bin",
            Self::BinaryZstd => "binz",
        }
    }
}

pub fn txid(prefix: &str, seq: u64) -> String {
    format!("{prefix}-0000-7000-8000-{seq:012x}")
}

pub fn parse_seq(prefix: &str, txid: &str) -> Option<u64> {
    let rest = txid
        .strip_prefix(prefix)?
        .strip_prefix("-0000-7000-8000-")?;
    if rest.len() != 12 {
        return None;
    }
    u64::from_str_radix(rest, 16).ok()
}

/// A JSON payload of exactly `bytes` bytes (at least 10): `{"pad":"…"}`,
/// the pad being pseudo-random characters that differ for every `seq`.
///
/// Random rather than repeated: PostgreSQL compresses (pglz) values it
/// TOASTs, and a segment of identical or `xxxx` payloads would shrink to
/// almost nothing, flattering any design that packs messages into rows.
pub fn payload_for(bytes: usize, seq: u64, salt: u64) -> String {
    let mut out = String::with_capacity(bytes.max(10));
    push_payload(&mut out, bytes, seq, salt);
    out
}

/// Appends [`payload_for`] to `out`.
pub fn push_payload(out: &mut String, bytes: usize, seq: u64, salt: u64) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let pad = bytes.saturating_sub(10);
    out.push_str("{\"pad\":\"");
    let mut state = seq ^ salt.rotate_left(17);
    let mut left = pad;
    while left > 0 {
        let mut r = splitmix64(&mut state);
        for _ in 0..left.min(10) {
            out.push(char::from(ALPHABET[(r & 63) as usize]));
            r >>= 6;
        }
        left = left.saturating_sub(10);
    }
    out.push_str("\"}");
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A per-run salt for [`payload_for`], derived from the run prefix.
pub fn salt(prefix: &str) -> u64 {
    u64::from_str_radix(prefix, 16).unwrap_or(0x5eed)
}

/// The push body for messages `first..last` of a run, all to one partition.
pub fn push_body(
    run: &RunState,
    partition: &str,
    first: u64,
    last: u64,
    payload_bytes: usize,
) -> String {
    let n = (last - first) as usize;
    let mut body = String::with_capacity(16 + n * (payload_bytes + run.queue.len() + 100));
    let salt = salt(&run.prefix);
    body.push_str("{\"items\":[");
    for seq in first..last {
        if seq > first {
            body.push(',');
        }
        body.push_str("{\"queue\":\"");
        body.push_str(&run.queue);
        body.push_str("\",\"partition\":\"");
        body.push_str(partition);
        if run.anon {
            body.push_str("\",\"payload\":");
            body.push_str(&String::from_utf8_lossy(&crate::peers::body(
                payload_bytes,
                seq,
                salt,
            )));
        } else {
            body.push_str("\",\"transactionId\":\"");
            body.push_str(&txid(&run.prefix, seq));
            body.push_str("\",\"payload\":");
            push_payload(&mut body, payload_bytes, seq, salt);
        }
        body.push('}');
    }
    body.push_str("]}");
    body
}

/// The binary push body (`QPB1`) for messages `first..last` of a run, all to
/// one partition: the same transaction ids and payloads as [`push_body`].
/// The zstd form mints a UUIDv7 per message, as the client does.
pub fn push_body_binary(
    run: &RunState,
    partition: &str,
    first: u64,
    last: u64,
    payload_bytes: usize,
    zstd: bool,
) -> anyhow::Result<Vec<u8>> {
    let salt = salt(&run.prefix);
    let texts: Vec<(String, Vec<u8>)> = (first..last)
        .map(|seq| {
            if run.anon {
                (String::new(), crate::peers::body(payload_bytes, seq, salt))
            } else {
                (
                    txid(&run.prefix, seq),
                    payload_for(payload_bytes, seq, salt).into_bytes(),
                )
            }
        })
        .collect();
    let batch = Batch {
        queue: &run.queue,
        partition,
        messages: texts
            .iter()
            .map(|(txn, payload)| Message {
                transaction_id: txn,
                message_id: uuid::Uuid::now_v7(),
                payload,
            })
            .collect(),
    };
    let form = if zstd {
        Form::Frames
    } else {
        Form::Plain { zstd: false }
    };
    Ok(push_binary::encode_push(&[batch], form, false)?)
}

pub fn partition_name(index: u64) -> String {
    format!("p{index}")
}
