//! `fault-proxy`: a [`FaultProxy`] for shell scripts (the dashboard's browser
//! test cuts PostgreSQL with it).
//!
//! ```text
//! fault-proxy <upstream host:port>
//! ```
//!
//! Relays a free loopback port to the upstream and serves a control port;
//! prints `proxy <addr> control <addr>` on one line once both listen. The
//! control port answers HTTP: `POST /cut`, `POST /hang`, `POST /restore`
//! (`200 ok`), anything else `404`. Runs until killed.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use anyhow::Context;
use queen_testkit::FaultProxy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let arg = std::env::args()
        .nth(1)
        .context("usage: fault-proxy <upstream host:port>")?;
    let upstream: SocketAddr = arg
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {arg}"))?
        .next()
        .with_context(|| format!("{arg} resolves to no address"))?;
    let proxy = Arc::new(FaultProxy::start(upstream).await?);
    let control = TcpListener::bind("127.0.0.1:0").await?;
    println!("proxy {} control {}", proxy.addr(), control.local_addr()?);
    loop {
        let (stream, _) = control.accept().await?;
        let proxy = proxy.clone();
        tokio::spawn(async move {
            if let Err(e) = command(stream, &proxy).await {
                eprintln!("fault-proxy: control connection: {e}");
            }
        });
    }
}

/// Reads one request head from `stream`, applies it, answers and closes.
async fn command(mut stream: TcpStream, proxy: &FaultProxy) -> anyhow::Result<()> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let mut words = line.split_whitespace();
    let (status, body) = match (words.next(), words.next()) {
        (Some("POST"), Some("/cut")) => {
            proxy.cut();
            ("200 OK", "ok")
        }
        (Some("POST"), Some("/hang")) => {
            proxy.hang();
            ("200 OK", "ok")
        }
        (Some("POST"), Some("/restore")) => {
            proxy.restore();
            ("200 OK", "ok")
        }
        _ => ("404 Not Found", "unknown command"),
    };
    eprintln!(
        "fault-proxy: {} -> {status}",
        line.lines().next().unwrap_or("")
    );
    let answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(answer.as_bytes()).await?;
    stream.shutdown().await?;
    Ok(())
}
