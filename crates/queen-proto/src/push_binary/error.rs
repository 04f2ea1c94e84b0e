//! What is wrong with a binary body, and where.

use std::fmt;

use super::{FRAME_BODY_MIN, MAX_TRANSACTION_ID_CHARS};
use crate::names::NameError;

/// Where in a body something is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Magic,
    Flags,
    RawLen,
    Head,
    Groups,
    Group(usize, GroupField),
    Item(usize, usize, ItemField),
    /// After the last group.
    End,
}

/// A field of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupField {
    Queue,
    Partition,
    N,
    Z,
}

/// A field of an item (plain form) or frame (frames form).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemField {
    Frame,
    MessageId,
    TransactionId,
    Payload,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Magic => f.write_str("magic"),
            Self::Flags => f.write_str("flags"),
            Self::RawLen => f.write_str("raw_len"),
            Self::Head => f.write_str("head"),
            Self::Groups => f.write_str("groups"),
            Self::Group(g, field) => {
                let name = match field {
                    GroupField::Queue => "queue",
                    GroupField::Partition => "partition",
                    GroupField::N => "n",
                    GroupField::Z => "z",
                };
                write!(f, "groups[{g}].{name}")
            }
            Self::Item(g, i, field) => {
                let name = match field {
                    ItemField::Frame => "frame",
                    ItemField::MessageId => "messageId",
                    ItemField::TransactionId => "transactionId",
                    ItemField::Payload => "payload",
                };
                write!(f, "groups[{g}].items[{i}].{name}")
            }
            Self::End => f.write_str("end of body"),
        }
    }
}

/// Why a binary body was refused; `Display` names the place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BinaryError {
    #[error("binary body: the magic must be QPB1 (push) or QTB1 (transaction)")]
    BadMagic,
    #[error("binary body: {0} runs past the end of the body")]
    Truncated(Place),
    #[error("binary body: {0} bytes left over after the last group")]
    Trailing(usize),
    #[error("binary body: flags {0:#04x} has unknown bits")]
    UnknownFlags(u8),
    #[error(
        "binary body: flags {0:#04x} combines frames (8) with zstd (1) or transaction ids (4)"
    )]
    FlagConflict(u8),
    #[error("binary body: {0} must be at least 1")]
    Zero(Place),
    #[error("binary body: {place}: {error}")]
    Name { place: Place, error: NameError },
    #[error("binary body: {0} is not UTF-8")]
    NotUtf8(Place),
    #[error("binary body: {0} must not contain NUL characters")]
    Nul(Place),
    #[error("binary body: {0} must be at most {MAX_TRANSACTION_ID_CHARS} characters")]
    TooLong(Place),
    #[error("binary body: {0} {1}")]
    Path(Place, crate::names::PathProblem),
    #[error("binary body: {place} is not one JSON document: {reason}")]
    Payload { place: Place, reason: String },
    #[error("binary body: {place}: {reason}")]
    Zstd { place: Place, reason: String },
    #[error("binary body: {place} declares {declared} bytes, over the limit of {limit} bytes of decompressed data")]
    Inflate {
        place: Place,
        declared: u64,
        limit: usize,
    },
    #[error("binary body: {place}: body_len {body_len} is shorter than {FRAME_BODY_MIN}")]
    FrameLen { place: Place, body_len: u32 },
    #[error("binary body: {place}: frame flags {flags:#04x} must be 0 (no trace, producer or encryption)")]
    FrameFlags { place: Place, flags: u8 },
    #[error("binary body: {place}: the zstd frame holds {found} frames, n says {expected}")]
    FrameCount {
        place: Place,
        expected: u32,
        found: usize,
    },
    #[error("binary body: {place}: the zstd frame holds more than the {expected} frames n says")]
    ExtraFrames { place: Place, expected: u32 },
    #[error("binary body: more than {0} items")]
    TooManyItems(usize),
}
