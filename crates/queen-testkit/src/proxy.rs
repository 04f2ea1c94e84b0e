//! `FaultProxy`: a TCP relay on loopback whose link can be cut, hung and
//! restored.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Relays connections from a local port to `upstream`. While cut, it refuses new
/// connections and has closed every open one. While hung, it accepts new
/// connections and keeps every link open but forwards nothing either way:
/// what a frozen server or a network partition looks like from the client.
/// [`retarget`](FaultProxy::retarget) sends new connections elsewhere (a host
/// name that now resolves to another server).
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    upstream: Arc<Mutex<SocketAddr>>,
    cut: Arc<AtomicBool>,
    hung: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
    acceptor: JoinHandle<()>,
}

impl FaultProxy {
    /// Starts relaying 127.0.0.1:<free port> to `upstream`.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let cut = Arc::new(AtomicBool::new(false));
        let hung = Arc::new(AtomicBool::new(false));
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let upstream = Arc::new(Mutex::new(upstream));
        let acceptor = {
            let upstream = upstream.clone();
            let cut = cut.clone();
            let hung = hung.clone();
            let links = links.clone();
            tokio::spawn(async move {
                while let Ok((inbound, _)) = listener.accept().await {
                    if cut.load(Ordering::SeqCst) {
                        drop(inbound);
                        continue;
                    }
                    let hung = hung.clone();
                    let upstream = *upstream.lock().unwrap_or_else(|e| e.into_inner());
                    let link = tokio::spawn(async move {
                        if let Ok(outbound) = TcpStream::connect(upstream).await {
                            relay(inbound, outbound, hung).await;
                        }
                    });
                    let mut links = links.lock().unwrap_or_else(|e| e.into_inner());
                    links.retain(|l| !l.is_finished());
                    links.push(link);
                }
            })
        };
        Ok(Self {
            addr,
            upstream,
            cut,
            hung,
            links,
            acceptor,
        })
    }

    /// The local address to connect to instead of the upstream.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Relays connections accepted from now on to `upstream`; open links stay
    /// with the server they reached.
    pub fn retarget(&self, upstream: SocketAddr) {
        *self.upstream.lock().unwrap_or_else(|e| e.into_inner()) = upstream;
    }

    /// Closes every open link and refuses new ones until [`restore`](Self::restore).
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        let mut links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        for link in links.drain(..) {
            link.abort();
        }
    }

    /// Stops forwarding: links stay open and new ones are accepted, but no
    /// byte goes through in either direction until [`restore`](Self::restore)
    /// (bytes read meanwhile are held, then delivered).
    pub fn hang(&self) {
        self.hung.store(true, Ordering::SeqCst);
    }

    /// Accepts connections and forwards bytes again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
        self.hung.store(false, Ordering::SeqCst);
    }
}

/// Copies both ways between `a` and `b`, holding every byte while `hung`.
async fn relay(a: TcpStream, b: TcpStream, hung: Arc<AtomicBool>) {
    let (ar, aw) = a.into_split();
    let (br, bw) = b.into_split();
    tokio::select! {
        _ = pump(ar, bw, hung.clone()) => {}
        _ = pump(br, aw, hung) => {}
    }
}

/// Copies `from` into `to`; while `hung`, reads are held back before writing.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    hung: Arc<AtomicBool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while hung.load(Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.cut();
        self.acceptor.abort();
    }
}
