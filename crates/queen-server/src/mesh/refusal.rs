//! Why the listener refused or cut a connection, counted per reason for
//! `/metrics`, `/metrics/prometheus` and the shared-state surface.

use std::sync::atomic::{AtomicU64, Ordering};

use queen_proto::mesh_auth::StrictError;

/// One reason a connection was refused (before or after authentication).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The cap on unauthenticated connections in total was reached.
    TooManyUnauthenticated,
    /// The cap on unauthenticated connections from one source address was reached.
    TooManyFromAddress,
    /// The whole handshake did not finish within its deadline.
    HandshakeTimeout,
    /// A frame before authentication announced more than the pre-auth limit.
    FrameTooLarge,
    /// Bytes that are no valid frame (bad length, truncated, bad JSON, unknown type).
    BadFrame,
    /// A frame other than the one the handshake expects (e.g. a hint before HELLO).
    UnexpectedFrame,
    /// A HELLO or AUTH MAC that does not verify.
    BadMac,
    /// A strict HELLO with a missing or far-off timestamp.
    StaleTimestamp,
    /// A strict HELLO nonce already seen.
    Replayed,
    /// A strict HELLO naming this replica's own id (a reflection).
    OwnId,
    /// A strict HELLO naming an id outside the peer list.
    UnknownPeer,
    /// A strict HELLO addressed to another replica (a replay across links).
    WrongListener,
    /// A frame after authentication whose MAC does not verify (strict mode).
    BadFrameMac,
}

impl Refusal {
    pub const ALL: [Self; 13] = [
        Self::TooManyUnauthenticated,
        Self::TooManyFromAddress,
        Self::HandshakeTimeout,
        Self::FrameTooLarge,
        Self::BadFrame,
        Self::UnexpectedFrame,
        Self::BadMac,
        Self::StaleTimestamp,
        Self::Replayed,
        Self::OwnId,
        Self::UnknownPeer,
        Self::WrongListener,
        Self::BadFrameMac,
    ];

    /// The label of this reason in the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooManyUnauthenticated => "too_many_unauthenticated",
            Self::TooManyFromAddress => "too_many_from_address",
            Self::HandshakeTimeout => "handshake_timeout",
            Self::FrameTooLarge => "frame_too_large",
            Self::BadFrame => "bad_frame",
            Self::UnexpectedFrame => "unexpected_frame",
            Self::BadMac => "bad_mac",
            Self::StaleTimestamp => "stale_timestamp",
            Self::Replayed => "replayed",
            Self::OwnId => "own_id",
            Self::UnknownPeer => "unknown_peer",
            Self::WrongListener => "wrong_listener",
            Self::BadFrameMac => "bad_frame_mac",
        }
    }

    fn index(self) -> usize {
        Self::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

impl From<StrictError> for Refusal {
    fn from(e: StrictError) -> Self {
        match e {
            StrictError::UnexpectedFrame(_) => Self::UnexpectedFrame,
            StrictError::Malformed => Self::BadFrame,
            StrictError::OwnId => Self::OwnId,
            StrictError::UnknownPeer => Self::UnknownPeer,
            StrictError::WrongListener => Self::WrongListener,
            StrictError::StaleTimestamp => Self::StaleTimestamp,
            StrictError::BadHelloMac
            | StrictError::BadChallengeMac
            | StrictError::BadAuthMac
            | StrictError::WrongChallenger => Self::BadMac,
        }
    }
}

/// One counter per [`Refusal`].
#[derive(Debug, Default)]
pub struct RefusalCounters([AtomicU64; Refusal::ALL.len()]);

impl RefusalCounters {
    pub fn count(&self, r: Refusal) {
        self.0[r.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(&self, r: Refusal) -> u64 {
        self.0[r.index()].load(Ordering::Relaxed)
    }

    /// Every reason with its count, zeros included (a stable metrics shape).
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        Refusal::ALL
            .iter()
            .map(|r| (r.as_str(), self.get(*r)))
            .collect()
    }
}
