//! Reading frames off a mesh connection with a length cap chosen per phase:
//! [`PRE_AUTH_MAX_FRAME`](queen_proto::mesh_auth::PRE_AUTH_MAX_FRAME) until the
//! connection is authenticated, the codec's 16 MiB after.

use std::time::Duration;

use queen_proto::mesh::{announced_len, decode_raw};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::Refusal;

/// Read buffer chunk (bytes read per call before the buffer grows).
const READ_CHUNK: usize = 4 * 1024;

/// Why a connection ended: a refusal (counted) or an ordinary close.
#[derive(Debug)]
pub(super) struct Cut {
    pub refusal: Option<Refusal>,
    pub detail: String,
}

impl Cut {
    pub(super) fn refused(r: Refusal, detail: impl Into<String>) -> Self {
        Self {
            refusal: Some(r),
            detail: detail.into(),
        }
    }

    pub(super) fn closed(detail: impl Into<String>) -> Self {
        Self {
            refusal: None,
            detail: detail.into(),
        }
    }
}

/// Reads one frame. A length over `max_len` is refused from the prefix alone,
/// so at most `max_len` plus one chunk is ever buffered. `silence`, when
/// given, bounds each read; `Ok(None)` is a clean close between frames.
pub(super) async fn read_frame(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    max_len: usize,
    silence: Option<Duration>,
) -> Result<Option<(u8, Vec<u8>)>, Cut> {
    loop {
        match announced_len(buf) {
            Err(e) => return Err(Cut::refused(Refusal::BadFrame, e.to_string())),
            Ok(Some(total)) if total - 4 > max_len => {
                return Err(Cut::refused(
                    Refusal::FrameTooLarge,
                    format!("frame length {} over the limit {max_len}", total - 4),
                ))
            }
            Ok(Some(total)) if buf.len() >= total => {
                let (raw, used) = match decode_raw(buf) {
                    Ok(Some(x)) => x,
                    Ok(None) => return Err(Cut::refused(Refusal::BadFrame, "short frame")),
                    Err(e) => return Err(Cut::refused(Refusal::BadFrame, e.to_string())),
                };
                let out = (raw.kind, raw.payload.to_vec());
                buf.drain(..used);
                return Ok(Some(out));
            }
            _ => {}
        }
        let mut chunk = [0u8; READ_CHUNK];
        let read = stream.read(&mut chunk);
        let n = match silence {
            Some(limit) => match tokio::time::timeout(limit, read).await {
                Ok(r) => r,
                Err(_) => return Err(Cut::closed("peer silent past its heartbeat")),
            },
            None => read.await,
        }
        .map_err(|e| Cut::closed(e.to_string()))?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(Cut::refused(Refusal::BadFrame, "truncated frame"))
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
