//! The HTTP/1.1 listener: hyper connections with deadlines and a cap.
//!
//! - `HTTP_HEADER_TIMEOUT_MS`: a request head must be complete this long after
//!   the connection opened, or after the first byte of a later request. A
//!   client trickling a byte at a time does not reset it.
//! - `HTTP_IDLE_TIMEOUT_MS`: how long a keep-alive connection may stay silent
//!   after an answer ([`conn_clock`](super::conn_clock)).
//! - `HTTP_MAX_CONNECTIONS`: beyond, a new connection is answered 503 (JSON)
//!   and closed at once.
//! - Requests hyper refuses before any handler runs (a head too large: 431; a
//!   malformed request line or header: 400; a URI too long: 414) are answered
//!   with a JSON `error` body too ([`ErrorBodies`]).
//!
//! The body deadline is a layer of the router (`edge::body_deadline`).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::conn_clock::{ConnTimer, SharedActivity};
use super::HttpService;
use crate::config::LimitsConfig;

/// Connections over the cap answered 503 at once; beyond, they are closed unanswered.
const MAX_REFUSALS_IN_FLIGHT: usize = 64;
/// How long a refused connection's 503 may take to write.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// Serves `router` on `listener` until `shutdown`; then stops accepting, lets
/// every connection finish its request in flight, and returns.
pub async fn serve(
    listener: TcpListener,
    router: impl HttpService,
    limits: LimitsConfig,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT));
    let tracker = TaskTracker::new();
    let mut builder = http1::Builder::new();
    builder
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    loop {
        let stream = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // out of file descriptors and the like: back off, keep serving
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            // answered while few refusals are in flight; in a flood, just closed
            if let Ok(refusing) = refusals.clone().try_acquire_owned() {
                let cap = limits.max_connections;
                tracker.spawn(async move {
                    refuse(stream, cap).await;
                    drop(refusing);
                });
            }
            continue;
        };
        let activity = SharedActivity::default();
        let conn = builder
            .clone()
            .timer(ConnTimer::new(
                activity.clone(),
                limits.header_timeout,
                limits.idle_timeout,
            ))
            .serve_connection(
                TokioIo::new(ErrorBodies::new(stream, activity)),
                TowerToHyperService::new(router.clone()),
            );
        let shutdown = shutdown.clone();
        tracker.spawn(async move {
            let _permit = permit;
            tokio::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                () = shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tracker.close();
    tracker.wait().await;
    Ok(())
}

/// Answers a connection over the cap with a 503 and closes it.
async fn refuse(mut stream: TcpStream, cap: usize) {
    let body = serde_json::json!({
        "error": format!("Too many connections (limit {cap}); retry later")
    })
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let written =
        tokio::time::timeout(REFUSAL_WRITE_TIMEOUT, stream.write_all(answer.as_bytes())).await;
    if matches!(written, Ok(Ok(()))) {
        // the request the client sent meanwhile stays unread: linger, do not reset
        linger(stream).await;
    }
}

/// The connection's byte stream, with hyper's own error answers (status
/// line, `content-length: 0`, no body) replaced by the same status with a
/// JSON `error` body. Every answer of the router to an error has a body, so
/// an empty 4xx/5xx on the wire is one of hyper's.
///
/// After such an answer hyper closes the connection with the rest of the
/// request unread, and closing a socket with unread bytes sends a reset that
/// can destroy the answer before the client reads it. So the close lingers
/// (on drop): our side is shut down first, so the client sees the end of the
/// answer, then what the client still sends is read and dropped, for
/// `LINGER` or `LINGER_BYTES` at most.
pub struct ErrorBodies {
    /// `None` only once dropped.
    inner: Option<TcpStream>,
    /// The replacement being written: bytes, how many are out, and the
    /// length of hyper's buffer it stands for.
    pending: Option<(Vec<u8>, usize, usize)>,
    /// Set once an error answer went out: the close lingers.
    answered_error: bool,
    /// Told of every read and write, for the head and idle deadlines.
    activity: SharedActivity,
}

/// Most time a close lingers after an error answer.
const LINGER: Duration = Duration::from_secs(2);
/// Most bytes read and dropped while a close lingers.
const LINGER_BYTES: usize = 4 << 20;

impl ErrorBodies {
    pub fn new(inner: TcpStream, activity: SharedActivity) -> Self {
        Self {
            inner: Some(inner),
            pending: None,
            answered_error: false,
            activity,
        }
    }

    fn io(&mut self) -> io::Result<&mut TcpStream> {
        self.inner
            .as_mut()
            .ok_or_else(|| io::ErrorKind::NotConnected.into())
    }
}

impl Drop for ErrorBodies {
    fn drop(&mut self) {
        let (true, Some(stream)) = (self.answered_error, self.inner.take()) else {
            return;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(linger(stream));
        }
    }
}

/// Shuts our side of `stream`, then reads and drops what the client still sends.
async fn linger(mut stream: TcpStream) {
    let _ = tokio::time::timeout(LINGER, async {
        stream.shutdown().await?;
        let mut scratch = vec![0u8; 16 * 1024];
        let mut drained = 0;
        while drained < LINGER_BYTES {
            match stream.read(&mut scratch).await? {
                0 => break,
                n => drained += n,
            }
        }
        io::Result::Ok(())
    })
    .await;
}

/// The JSON answer standing for hyper's automatic error answer `buf`, if it is one.
pub fn json_for_automatic_error(buf: &[u8]) -> Option<Vec<u8>> {
    // most writes are the router's answers: refuse them on their first bytes
    // (an error status, a head alone) before looking for the head's end
    let error_status = buf.len() >= 12 && matches!(buf[9], b'4' | b'5');
    if !error_status || !buf.ends_with(b"\r\n\r\n") {
        return None;
    }
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    if head_end != buf.len() || buf.len() < 12 {
        return None;
    }
    if !(buf.starts_with(b"HTTP/1.1 ") || buf.starts_with(b"HTTP/1.0 ")) {
        return None;
    }
    let code: u16 = std::str::from_utf8(&buf[9..12]).ok()?.parse().ok()?;
    if !(400..600).contains(&code) {
        return None;
    }
    let head = String::from_utf8_lossy(buf).to_ascii_lowercase();
    if !head.contains("\r\ncontent-length: 0\r\n") {
        return None;
    }
    let status = axum::http::StatusCode::from_u16(code).ok()?;
    let reason = status.canonical_reason().unwrap_or("Error");
    let message = match code {
        431 => "Request header fields too large".to_owned(),
        414 => "URI too long".to_owned(),
        400 => "Malformed HTTP request".to_owned(),
        _ => reason.to_owned(),
    };
    let body = serde_json::json!({ "error": message }).to_string();
    Some(
        format!(
            "HTTP/1.1 {code} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl AsyncRead for ErrorBodies {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = match this.io() {
            Ok(s) => ready!(Pin::new(s).poll_read(cx, buf)),
            Err(e) => Err(e),
        };
        if buf.filled().len() > before {
            this.activity.read();
        }
        Poll::Ready(read)
    }
}

impl AsyncWrite for ErrorBodies {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.pending.is_none() {
            match json_for_automatic_error(buf) {
                Some(answer) => this.pending = Some((answer, 0, buf.len())),
                None => {
                    let written = ready!(Pin::new(this.io()?).poll_write(cx, buf));
                    if matches!(written, Ok(n) if n > 0) {
                        this.activity.wrote();
                    }
                    return Poll::Ready(written);
                }
            }
        }
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        };
        let Some((answer, written, stands_for)) = this.pending.as_mut() else {
            return Poll::Ready(Ok(0));
        };
        while *written < answer.len() {
            let n = ready!(Pin::new(&mut *inner).poll_write(cx, &answer[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        let stands_for = *stands_for;
        this.pending = None;
        this.activity.wrote();
        this.answered_error = true;
        Poll::Ready(Ok(stands_for))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.get_mut().io()?).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.get_mut().io()?).poll_shutdown(cx)
    }
    // not vectored: hyper then hands each answer over as one buffer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hyper_error_heads_get_a_json_body() {
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Tue, 01 Dec 2026 12:00:00 GMT\r\n\r\n";
        let out = String::from_utf8(json_for_automatic_error(head).unwrap()).unwrap();
        assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
        assert!(out.contains("content-type: application/json"), "{out}");
        assert!(
            out.ends_with(r#"{"error":"Request header fields too large"}"#),
            "{out}"
        );
        // answers with a body, and successes, go out untouched
        let with_body = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 11\r\n\r\n{\"error\":1}";
        assert!(json_for_automatic_error(with_body).is_none());
        let ok = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";
        assert!(json_for_automatic_error(ok).is_none());
    }
}
