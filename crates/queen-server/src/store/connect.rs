//! Opening connections: one host after the other, each within a deadline.
//!
//! The driver tries the hosts of a list in order, but bounds only the TCP
//! connect: a server that accepts the connection and then never answers the
//! start-up (a frozen primary: `SIGSTOP`, a hung host behind a live kernel)
//! holds the attempt forever, and the next host is never tried. So the list
//! is split here into one configuration per host, each attempt (TCP, TLS,
//! authentication and the `target_session_attrs` check) gets
//! `DB_CONNECTION_TIMEOUT`, and the host that answered last is tried first
//! next time, so after a failover new connections go straight to the new
//! primary instead of waiting on the old one.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, Connection, Socket};

use super::error::refused_credentials;
use super::tls::Connector;

type Stream = <Connector as MakeTlsConnect<Socket>>::Stream;

/// The hosts to try, the TLS connector, which host answered last, and
/// whether the last round failed because a host refused the credentials.
#[derive(Clone)]
pub(super) struct Hosts {
    configs: Arc<Vec<Config>>,
    tls: Connector,
    deadline: Duration,
    preferred: Arc<AtomicUsize>,
    refused: Arc<Mutex<Option<String>>>,
}

impl Hosts {
    /// One configuration per host of `configs` (already split), tried in
    /// order with `deadline` each.
    pub(super) fn new(configs: Vec<Config>, tls: Connector, deadline: Duration) -> Self {
        Self {
            configs: Arc::new(configs),
            tls,
            deadline,
            preferred: Arc::default(),
            refused: Arc::default(),
        }
    }

    /// The configuration of the host that answered last (the first host
    /// before any answered).
    pub(super) fn current(&self) -> Option<&Config> {
        let i = self.preferred.load(Ordering::Relaxed);
        self.configs.get(i).or_else(|| self.configs.first())
    }

    /// How many hosts are tried.
    pub(super) fn len(&self) -> usize {
        self.configs.len()
    }

    /// The longest one full round over the hosts may take.
    pub(super) fn round_deadline(&self) -> Duration {
        self.deadline * u32::try_from(self.len().max(1)).unwrap_or(u32::MAX)
    }

    /// `host:port: code: message` when the last round of connection
    /// attempts failed and a host refused the credentials (a role that does
    /// not exist, a wrong password); `None` once a connection succeeds.
    pub(super) fn credentials_refused(&self) -> Option<String> {
        self.refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Connects to the first host that answers in time (and accepts writes
    /// when `target_session_attrs=read-write`), starting with the one that
    /// answered last. When every host fails and one of them refused the
    /// credentials, that refusal is the error returned (it says what to fix;
    /// the others' timeouts or read-only answers do not).
    pub(super) async fn open(
        &self,
    ) -> Result<(Client, Connection<Socket, Stream>), tokio_postgres::Error> {
        let n = self.configs.len();
        let first = self.preferred.load(Ordering::Relaxed) % n.max(1);
        let mut last = None;
        let mut refusal = None;
        for i in (0..n).map(|k| (first + k) % n) {
            let attempt = self.configs[i].connect(self.tls.clone());
            match tokio::time::timeout(self.deadline, attempt).await {
                Ok(Ok(pair)) => {
                    if i != first {
                        tracing::info!(host = %describe(&self.configs[i]), "PostgreSQL: connected to another host of the list");
                    }
                    self.preferred.store(i, Ordering::Relaxed);
                    self.remember_refusal(None);
                    return Ok(pair);
                }
                Ok(Err(e)) => {
                    tracing::debug!(host = %describe(&self.configs[i]), error = %e, "PostgreSQL host refused");
                    if let Some(why) = refused_credentials(&e) {
                        refusal = Some((format!("{}: {why}", describe(&self.configs[i])), e));
                    } else {
                        last = Some(e);
                    }
                }
                Err(_) => {
                    tracing::debug!(host = %describe(&self.configs[i]), "PostgreSQL host did not answer in time");
                    // the driver's own "timeout waiting for server" error: the
                    // only way to build one outside the driver
                    last = Some(tokio_postgres::Error::__private_api_timeout());
                }
            }
        }
        let (why, refused) = refusal.unzip();
        self.remember_refusal(why);
        Err(refused
            .or(last)
            .unwrap_or_else(tokio_postgres::Error::__private_api_timeout))
    }

    fn remember_refusal(&self, why: Option<String>) {
        *self.refused.lock().unwrap_or_else(|e| e.into_inner()) = why;
    }

    /// [`open`](Self::open), with the connection driven by its own task.
    pub(super) async fn open_spawned(
        &self,
    ) -> Result<(Client, JoinHandle<()>), tokio_postgres::Error> {
        let (client, connection) = self.open().await?;
        let task = tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "PostgreSQL connection closed");
            }
        });
        Ok((client, task))
    }
}

impl deadpool_postgres::Connect for Hosts {
    fn connect(
        &self,
        _: &Config,
    ) -> Pin<
        Box<
            dyn Future<Output = Result<(Client, JoinHandle<()>), tokio_postgres::Error>>
                + Send
                + '_,
        >,
    > {
        Box::pin(self.open_spawned())
    }
}

/// `host:port` of a single-host configuration, for logs.
fn describe(c: &Config) -> String {
    let host = match c.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "?".to_owned(),
    };
    let port = c.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
}

/// Splits the host list of a `postgres://` / `postgresql://` URL into one URL
/// per host (`h1:p1,h2:p2` → two URLs); anything else comes back unchanged.
pub(super) fn split_url(url: &str) -> Vec<String> {
    let Some(scheme_end) = url.find("://") else {
        return vec![url.to_owned()];
    };
    let rest_start = scheme_end + 3;
    let rest = &url[rest_start..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    if !hosts.contains(',') {
        return vec![url.to_owned()];
    }
    hosts
        .split(',')
        .filter(|h| !h.trim().is_empty())
        .map(|h| {
            format!(
                "{}{userinfo}{}{}",
                &url[..rest_start],
                h.trim(),
                &rest[authority_end..]
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_host_list_becomes_one_url_per_host() {
        let urls = split_url(
            "postgresql://postgres:pw@127.0.0.1:5433,127.0.0.1:5434/queen?target_session_attrs=read-write",
        );
        assert_eq!(
            urls,
            [
                "postgresql://postgres:pw@127.0.0.1:5433/queen?target_session_attrs=read-write",
                "postgresql://postgres:pw@127.0.0.1:5434/queen?target_session_attrs=read-write",
            ]
        );
        for u in &urls {
            let c: Config = u.parse().unwrap();
            assert_eq!(c.get_hosts().len(), 1);
            assert_eq!(
                c.get_target_session_attrs(),
                tokio_postgres::config::TargetSessionAttrs::ReadWrite
            );
        }
        assert_eq!(split_url("postgres://h/db"), ["postgres://h/db"]);
        assert_eq!(
            split_url("postgres://a,b"),
            ["postgres://a", "postgres://b"]
        );
        assert_eq!(split_url("host=a,b dbname=x"), ["host=a,b dbname=x"]);
    }

    #[tokio::test]
    async fn a_host_that_never_answers_does_not_hold_back_the_next() {
        // a listener that accepts and never speaks: the frozen primary
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let silent_port = silent.local_addr().unwrap().port();
        let _hold = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = silent.accept().await {
                held.push(s);
            }
        });
        // a port nobody listens on: refused at once
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed_port = closed.local_addr().unwrap().port();
        drop(closed);
        let configs = [silent_port, closed_port]
            .iter()
            .map(|p| {
                let mut c = Config::new();
                c.host("127.0.0.1").port(*p).user("u").dbname("d");
                c.ssl_mode(tokio_postgres::config::SslMode::Disable);
                c
            })
            .collect();
        let tls = tokio_postgres_rustls::MakeRustlsConnect::new(
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth(),
        );
        let hosts = Hosts::new(configs, tls, Duration::from_millis(300));
        let e = tokio::time::timeout(Duration::from_secs(60), hosts.open())
            .await
            .expect("the attempt ends")
            .err()
            .expect("nothing answers");
        // both tried: the refusal of the second is the error kept
        assert!(!e.to_string().starts_with("timeout"), "{e}");
    }
}
