//! The mesh wire between replicas: framed TCP carrying best-effort hints.
//!
//! A frame is a `u32` big-endian length, one type byte, then a JSON payload; the
//! length counts the type byte plus the payload (spec: high-availability §3).
//! A length of zero or above [`MAX_FRAME_LEN`] is refused before anything is
//! allocated. The codec does no I/O: [`decode`] reads from a byte slice and says
//! when it needs more bytes.

use serde::{Deserialize, Serialize};

/// Largest accepted frame length (type byte + payload): 16 MiB.
pub const MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

/// Bytes of the length prefix.
const LEN_BYTES: usize = 4;

/// Frame type bytes on the wire.
pub mod kind {
    pub const HELLO: u8 = 1;
    pub const HEARTBEAT: u8 = 2;
    pub const MESSAGE_AVAILABLE: u8 = 3;
    pub const PARTITION_FREE: u8 = 4;
    pub const QUEUE_CONFIG_INVALIDATE: u8 = 5;
    pub const MAINTENANCE_MODE_SET: u8 = 6;
    /// Strict mode only: the listener's answer to a HELLO (see [`crate::mesh_auth`]).
    pub const CHALLENGE: u8 = 7;
    /// Strict mode only: the dialer's answer to the CHALLENGE.
    pub const AUTH: u8 = 8;
}

/// The first frame on a dialled connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub server_id: String,
    /// Random hex chosen by the dialer.
    pub nonce: String,
    /// Hex HMAC-SHA256 over the nonce (and `ts` in strict mode); empty in open mode.
    pub mac: String,
    /// Unix milliseconds; strict mode only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<i64>,
    /// Strict mode only: the server id of the listener this HELLO is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// Strict mode: the listener's fresh nonce and its proof that it knows the
/// secret and is the replica the dialer meant (see [`crate::mesh_auth`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    pub server_id: String,
    pub nonce: String,
    pub mac: String,
}

/// Strict mode: the dialer's MAC over both ids and both nonces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Auth {
    pub mac: String,
}

/// A periodic write that lets a dead peer be noticed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub server_id: String,
}

/// A push committed on this queue and partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageAvailable {
    pub queue: String,
    pub partition: String,
}

/// A lease was released: pops parked on the partition may claim it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionFree {
    pub queue: String,
    pub partition: String,
    pub consumer_group: String,
}

/// A queue's configuration changed: drop the cached copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueConfigInvalidate {
    pub queue: String,
}

/// Which maintenance mode a [`MaintenanceModeSet`] sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MaintenanceKind {
    Push,
    Pop,
}

/// A maintenance mode was switched (PostgreSQL holds the same flag).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaintenanceModeSet {
    pub mode: MaintenanceKind,
    pub enabled: bool,
}

/// A decoded mesh frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Hello(Hello),
    Heartbeat(Heartbeat),
    MessageAvailable(MessageAvailable),
    PartitionFree(PartitionFree),
    QueueConfigInvalidate(QueueConfigInvalidate),
    MaintenanceModeSet(MaintenanceModeSet),
}

/// Why bytes are not a valid frame. Every variant closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    #[error("frame length {0} is zero or over the 16 MiB limit")]
    BadLength(usize),
    #[error("unknown frame type {0}")]
    UnknownType(u8),
    #[error("malformed {kind} payload: {reason}")]
    BadPayload { kind: &'static str, reason: String },
}

/// A frame split into its type byte and payload, before the payload is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawFrame<'a> {
    pub kind: u8,
    pub payload: &'a [u8],
}

/// Splits the next frame off `buf`. `Ok(None)`: more bytes are needed.
/// The length is checked before anything is allocated.
pub fn decode_raw(buf: &[u8]) -> Result<Option<(RawFrame<'_>, usize)>, FrameError> {
    let Some(total) = announced_len(buf)? else {
        return Ok(None);
    };
    let Some(body) = buf.get(LEN_BYTES..total) else {
        return Ok(None);
    };
    Ok(Some((
        RawFrame {
            kind: body[0],
            payload: &body[1..],
        },
        total,
    )))
}

/// The full size (prefix included) of the frame at the start of `buf`, once
/// its prefix is there; refuses a zero or oversized length.
pub fn announced_len(buf: &[u8]) -> Result<Option<usize>, FrameError> {
    let Some(prefix) = buf.get(..LEN_BYTES) else {
        return Ok(None);
    };
    let mut len_bytes = [0u8; LEN_BYTES];
    len_bytes.copy_from_slice(prefix);
    let len = u32::from_be_bytes(len_bytes) as usize;
    if len == 0 || len > MAX_FRAME_LEN {
        return Err(FrameError::BadLength(len));
    }
    Ok(Some(LEN_BYTES + len))
}

fn parse<'de, T: Deserialize<'de>>(
    kind: &'static str,
    payload: &'de [u8],
) -> Result<T, FrameError> {
    serde_json::from_slice(payload).map_err(|e| FrameError::BadPayload {
        kind,
        reason: e.to_string(),
    })
}

impl Frame {
    /// Parses the payload of a raw frame.
    pub fn from_raw(raw: RawFrame<'_>) -> Result<Self, FrameError> {
        Ok(match raw.kind {
            kind::HELLO => Self::Hello(parse("HELLO", raw.payload)?),
            kind::HEARTBEAT => Self::Heartbeat(parse("HEARTBEAT", raw.payload)?),
            kind::MESSAGE_AVAILABLE => {
                Self::MessageAvailable(parse("MESSAGE_AVAILABLE", raw.payload)?)
            }
            kind::PARTITION_FREE => Self::PartitionFree(parse("PARTITION_FREE", raw.payload)?),
            kind::QUEUE_CONFIG_INVALIDATE => {
                Self::QueueConfigInvalidate(parse("QUEUE_CONFIG_INVALIDATE", raw.payload)?)
            }
            kind::MAINTENANCE_MODE_SET => {
                Self::MaintenanceModeSet(parse("MAINTENANCE_MODE_SET", raw.payload)?)
            }
            other => return Err(FrameError::UnknownType(other)),
        })
    }

    /// The type byte of this frame.
    pub fn kind(&self) -> u8 {
        match self {
            Self::Hello(_) => kind::HELLO,
            Self::Heartbeat(_) => kind::HEARTBEAT,
            Self::MessageAvailable(_) => kind::MESSAGE_AVAILABLE,
            Self::PartitionFree(_) => kind::PARTITION_FREE,
            Self::QueueConfigInvalidate(_) => kind::QUEUE_CONFIG_INVALIDATE,
            Self::MaintenanceModeSet(_) => kind::MAINTENANCE_MODE_SET,
        }
    }

    /// The JSON payload of this frame.
    pub fn payload(&self) -> Vec<u8> {
        let json = match self {
            Self::Hello(v) => serde_json::to_vec(v),
            Self::Heartbeat(v) => serde_json::to_vec(v),
            Self::MessageAvailable(v) => serde_json::to_vec(v),
            Self::PartitionFree(v) => serde_json::to_vec(v),
            Self::QueueConfigInvalidate(v) => serde_json::to_vec(v),
            Self::MaintenanceModeSet(v) => serde_json::to_vec(v),
        };
        json.unwrap_or_default()
    }
}

/// Appends one frame (`kind` + `payload`) to `out`.
pub fn encode_raw(kind: u8, payload: &[u8], out: &mut Vec<u8>) {
    let len = (payload.len() + 1) as u32;
    out.extend_from_slice(&len.to_be_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
}

/// Appends `frame` to `out`.
pub fn encode(frame: &Frame, out: &mut Vec<u8>) {
    encode_raw(frame.kind(), &frame.payload(), out);
}

/// Decodes the next typed frame of `buf`.
pub fn decode(buf: &[u8]) -> Result<Option<(Frame, usize)>, FrameError> {
    match decode_raw(buf)? {
        None => Ok(None),
        Some((raw, used)) => Ok(Some((Frame::from_raw(raw)?, used))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame_strategy() -> impl Strategy<Value = Frame> {
        let s = "[a-zA-Z0-9._ -]{0,40}";
        prop_oneof![
            (
                s,
                s,
                s,
                proptest::option::of(any::<i64>()),
                proptest::option::of(s)
            )
                .prop_map(|(a, b, c, ts, to)| Frame::Hello(Hello {
                    server_id: a,
                    nonce: b,
                    mac: c,
                    ts,
                    to
                })),
            s.prop_map(|a| Frame::Heartbeat(Heartbeat { server_id: a })),
            (s, s).prop_map(|(q, p)| Frame::MessageAvailable(MessageAvailable {
                queue: q,
                partition: p
            })),
            (s, s, s).prop_map(|(q, p, g)| Frame::PartitionFree(PartitionFree {
                queue: q,
                partition: p,
                consumer_group: g
            })),
            s.prop_map(|q| Frame::QueueConfigInvalidate(QueueConfigInvalidate { queue: q })),
            (any::<bool>(), any::<bool>()).prop_map(|(pop, enabled)| Frame::MaintenanceModeSet(
                MaintenanceModeSet {
                    mode: if pop {
                        MaintenanceKind::Pop
                    } else {
                        MaintenanceKind::Push
                    },
                    enabled
                }
            )),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn frames_round_trip(frames in proptest::collection::vec(frame_strategy(), 1..5)) {
            let mut buf = Vec::new();
            for f in &frames {
                encode(f, &mut buf);
            }
            let mut at = 0;
            for f in &frames {
                let (got, used) = decode(&buf[at..]).unwrap().unwrap();
                prop_assert_eq!(&got, f);
                at += used;
            }
            prop_assert_eq!(at, buf.len());
        }

        #[test]
        fn every_prefix_asks_for_more(frame in frame_strategy()) {
            let mut buf = Vec::new();
            encode(&frame, &mut buf);
            for cut in 0..buf.len() {
                prop_assert_eq!(decode(&buf[..cut]).unwrap(), None);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn oversized_and_zero_lengths_are_refused_from_the_prefix_alone() {
        let huge = ((MAX_FRAME_LEN + 1) as u32).to_be_bytes();
        assert_eq!(decode(&huge), Err(FrameError::BadLength(MAX_FRAME_LEN + 1)));
        assert_eq!(decode(&[0, 0, 0, 0]), Err(FrameError::BadLength(0)));
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff, 1]),
            Err(FrameError::BadLength(u32::MAX as usize))
        );
    }

    #[test]
    fn unknown_types_and_bad_json_are_errors() {
        let mut buf = Vec::new();
        encode_raw(99, b"{}", &mut buf);
        assert_eq!(decode(&buf), Err(FrameError::UnknownType(99)));
        let mut buf = Vec::new();
        encode_raw(kind::MESSAGE_AVAILABLE, b"{not json", &mut buf);
        assert!(matches!(decode(&buf), Err(FrameError::BadPayload { .. })));
    }

    /// Replays every saved input under `fuzz/corpus/mesh_frame` (seeds and past
    /// findings): decoding must never panic, and a success must re-encode to the
    /// same frame.
    #[test]
    fn corpus_replays_without_panics() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/mesh_frame");
        let entries = std::fs::read_dir(&dir).expect("corpus folder exists");
        let mut n = 0;
        for entry in entries {
            let bytes = std::fs::read(entry.expect("entry").path()).expect("read corpus file");
            if let Ok(Some((frame, _))) = decode(&bytes) {
                let mut again = Vec::new();
                encode(&frame, &mut again);
                assert_eq!(decode(&again).unwrap().unwrap().0, frame);
            }
            n += 1;
        }
        assert!(n >= 5, "corpus has {n} files");
    }
}
