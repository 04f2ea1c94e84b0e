//! Helpers of the client's integration tests.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use queen_client::{Client, Message, RetryPolicy};
use queen_testkit::{TestBroker, TestDb};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A fresh database and a broker on it.
pub async fn setup() -> (TestDb, TestBroker) {
    setup_with(&[]).await
}

/// Like [`setup`], with extra broker environment.
pub async fn setup_with(env: &[(&str, &str)]) -> (TestDb, TestBroker) {
    queen_testkit::fresh_broker(env)
        .await
        .expect("start a broker on a fresh database")
}

/// Whether `queue` has nothing to deliver to `group` (queue mode when `None`) right now.
pub async fn drained(client: &Client, queue: &str, group: Option<&str>) -> bool {
    let mut q = client.queue(queue).wait(false);
    if let Some(g) = group {
        q = q.group(g);
    }
    q.pop().await.unwrap().is_empty()
}

/// How often a consumer saw each integer payload.
#[derive(Debug, Clone, Default)]
pub struct Seen(Arc<std::sync::Mutex<std::collections::HashMap<i64, u32>>>);

impl Seen {
    pub fn record(&self, m: &Message) {
        *self
            .0
            .lock()
            .unwrap()
            .entry(m.data.as_i64().unwrap())
            .or_default() += 1;
    }

    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Asserts that each of `0..n` was seen exactly once.
    #[track_caller]
    pub fn assert_each_once(&self, n: u64) {
        let seen = self.0.lock().unwrap().clone();
        let missing: Vec<u64> = (0..n)
            .filter(|i| !seen.contains_key(&(*i as i64)))
            .collect();
        assert!(missing.is_empty(), "lost: {missing:?}");
        let doubled: Vec<_> = seen.iter().filter(|(_, &c)| c > 1).collect();
        assert!(doubled.is_empty(), "delivered twice: {doubled:?}");
        assert_eq!(seen.len() as u64, n, "unexpected payloads: {seen:?}");
    }
}

/// A client of `b` with quick retries.
pub fn client(b: &TestBroker) -> Client {
    Client::builder()
        .url(b.url(""))
        .retry(quick_retries())
        .build()
        .unwrap()
}

/// Retries short enough for tests.
pub fn quick_retries() -> RetryPolicy {
    RetryPolicy {
        attempts: 5,
        first_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
        down_for: Duration::from_millis(500),
    }
}

/// A queue (or group) name no other test uses.
pub fn unique(prefix: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{}", &id[..12])
}

/// Pops everything `queue` holds for queue mode, committing on delivery.
pub async fn drain(client: &Client, queue: &str) -> Vec<Message> {
    let mut all = Vec::new();
    loop {
        let batch = client
            .queue(queue)
            .batch(1000)
            .partitions(1000)
            .wait(false)
            .commit_on_delivery(true)
            .pop()
            .await
            .unwrap();
        if batch.is_empty() {
            return all;
        }
        all.extend(batch);
    }
}

/// Messages stored in `queue`, whatever their state.
pub async fn stored(client: &Client, queue: &str) -> u64 {
    let q = client.admin().queue(queue).await.unwrap();
    q["totals"]["total"].as_u64().unwrap()
}

/// What the front does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// Relay it to the broker and its answer back.
    Forward,
    /// Answer `503` without relaying.
    Unavailable,
    /// Relay it to the broker, then close the connection without answering.
    LoseAnswer,
}

/// An HTTP front for a broker that acts on each request as a script says:
/// the n-th request (from 0) gets `script(n)`. Closes every connection after
/// one exchange, so each request is counted.
#[derive(Debug)]
pub struct Front {
    pub addr: SocketAddr,
    pub requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Front {
    pub async fn start(
        upstream: String,
        script: impl Fn(usize, &str) -> Act + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let script = Arc::new(script);
        let http = reqwest::Client::new();
        let task = {
            let requests = requests.clone();
            tokio::spawn(async move {
                while let Ok((sock, _)) = listener.accept().await {
                    let n = requests.fetch_add(1, Ordering::SeqCst);
                    let script = script.clone();
                    let http = http.clone();
                    let upstream = upstream.clone();
                    tokio::spawn(async move {
                        let _ = serve(sock, n, &*script, &http, &upstream).await;
                    });
                }
            })
        };
        Self {
            addr,
            requests,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    mut sock: TcpStream,
    n: usize,
    script: &(dyn Fn(usize, &str) -> Act + Send + Sync),
    http: &reqwest::Client,
    upstream: &str,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let read = sock.read(&mut chunk).await?;
        if read == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..read]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.lines();
    let request_line = lines.next().unwrap_or_default().to_owned();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or("GET").to_owned();
    let path = parts.next().unwrap_or("/").to_owned();
    let mut length = 0usize;
    let mut auth = None;
    for line in lines {
        let (k, v) = line.split_once(':').unwrap_or((line, ""));
        if k.eq_ignore_ascii_case("content-length") {
            length = v.trim().parse().unwrap_or(0);
        }
        if k.eq_ignore_ascii_case("authorization") {
            auth = Some(v.trim().to_owned());
        }
    }
    while buf.len() < head_end + length {
        let mut chunk = [0u8; 65536];
        let read = sock.read(&mut chunk).await?;
        if read == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..read]);
    }
    let body = buf[head_end..head_end + length].to_vec();
    let act = script(n, &path);
    if act == Act::Unavailable {
        let body = br#"{"error":"unavailable for the test"}"#;
        let head = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        sock.write_all(head.as_bytes()).await?;
        sock.write_all(body).await?;
        return Ok(());
    }
    let mut req = http.request(
        reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
        format!("{upstream}{path}"),
    );
    if !body.is_empty() {
        req = req.header("content-type", "application/json").body(body);
    }
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let resp = req.send().await.map_err(std::io::Error::other)?;
    let status = resp.status();
    let answer = resp.bytes().await.map_err(std::io::Error::other)?;
    if act == Act::LoseAnswer {
        // the broker applied it; the caller never hears
        return Ok(());
    }
    let head = format!(
        "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        status.as_u16(),
        answer.len()
    );
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(&answer).await?;
    Ok(())
}
