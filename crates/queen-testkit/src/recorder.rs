//! `RecordingProxy`: a TCP relay on loopback that keeps every byte the
//! connecting side sent, per connection: what an attacker who can capture
//! traffic on the link would have (mesh security tests replay it).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

type Captures = Arc<Mutex<Vec<Arc<Mutex<Vec<u8>>>>>>;

/// Relays 127.0.0.1:<free port> to `upstream`, recording the client's bytes.
#[derive(Debug)]
pub struct RecordingProxy {
    addr: SocketAddr,
    captures: Captures,
    acceptor: JoinHandle<()>,
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    record: Option<Arc<Mutex<Vec<u8>>>>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(r) = &record {
            r.lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(&buf[..n]);
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

impl RecordingProxy {
    /// Starts relaying to `upstream` (which may come up later: each accepted
    /// connection dials it then).
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let captures: Captures = Arc::default();
        let acceptor = {
            let captures = captures.clone();
            tokio::spawn(async move {
                while let Ok((inbound, _)) = listener.accept().await {
                    let record = Arc::new(Mutex::new(Vec::new()));
                    captures
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(record.clone());
                    tokio::spawn(async move {
                        let Ok(outbound) = TcpStream::connect(upstream).await else {
                            return;
                        };
                        let (ir, iw) = inbound.into_split();
                        let (or, ow) = outbound.into_split();
                        tokio::join!(pump(ir, ow, Some(record)), pump(or, iw, None));
                    });
                }
            })
        };
        Ok(Self {
            addr,
            captures,
            acceptor,
        })
    }

    /// The local address to dial instead of the upstream.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bytes the client sent on each connection so far, oldest first.
    pub fn captured(&self) -> Vec<Vec<u8>> {
        self.captures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|c| c.lock().unwrap_or_else(|e| e.into_inner()).clone())
            .collect()
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}
