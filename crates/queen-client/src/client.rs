//! The cloneable client handle, its builder, and the calls that act on
//! messages already popped (ack, lease renewal, traces).

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio_util::task::TaskTracker;

use crate::admin::Admin;
use crate::dlq::DlqQuery;
use crate::error::{Error, Result};
use crate::path::segment;
use crate::queue::Queue;
use crate::transaction::Transaction;
use crate::transport::{Call, RetryPolicy, Transport};
use crate::types::{AckResult, AckStatus, LeaseRenewal, Message, WireAck};

/// Default timeout of one request (long polls add their own wait to it).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle keep-alive connections kept per broker: enough for a few pipelined pushes
/// and a handful of consumers without reconnecting.
const DEFAULT_MAX_IDLE: usize = 32;

/// Configures a [`Client`].
///
/// ```no_run
/// use std::time::Duration;
/// let client = queen_client::Client::builder()
///     .urls(["http://queen-a:6632", "http://queen-b:6632"])
///     .token("eyJhbGciOi…")
///     .timeout(Duration::from_secs(10))
///     .build()?;
/// # Ok::<_, queen_client::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ClientBuilder {
    urls: Vec<String>,
    token: Option<String>,
    timeout: Option<Duration>,
    retry: Option<RetryPolicy>,
    max_idle: Option<usize>,
}

impl ClientBuilder {
    /// Adds one broker URL (`http://host:port`).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.urls.push(url.into());
        self
    }

    /// Adds several broker URLs: replicas of one cluster, used in turn and
    /// skipped while they cannot be reached.
    pub fn urls<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.urls.extend(urls.into_iter().map(Into::into));
        self
    }

    /// Sends `Authorization: Bearer <token>` on every request (brokers with JWT on).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Timeout of one request (default 30 s; a long poll adds its wait).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// How failed requests are retried (default [`RetryPolicy::default`]).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// Idle keep-alive connections kept per broker (default 32).
    pub fn max_idle_connections(mut self, n: usize) -> Self {
        self.max_idle = Some(n);
        self
    }

    /// Builds the client. Fails on an empty or malformed URL list; it does not connect.
    pub fn build(self) -> Result<Client> {
        let transport = Transport::new(
            &self.urls,
            self.token.as_deref(),
            self.timeout.unwrap_or(DEFAULT_TIMEOUT),
            self.retry.unwrap_or_default(),
            self.max_idle.unwrap_or(DEFAULT_MAX_IDLE),
        )?;
        Ok(Client {
            inner: Arc::new(Inner {
                transport,
                buffers: TaskTracker::new(),
            }),
        })
    }
}

#[derive(Debug)]
struct Inner {
    transport: Transport,
    /// Flush tasks of buffered producers (they outlive a dropped producer).
    buffers: TaskTracker,
}

/// A handle on one Queen broker or cluster; cheap to clone, safe to share.
///
/// ```no_run
/// # async fn run() -> queen_client::Result<()> {
/// let client = queen_client::Client::new("http://localhost:6632")?;
/// client.queue("orders").partition("cust-42").push(&serde_json::json!({"id": 1})).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// A client for the broker at `url`, with default settings.
    pub fn new(url: impl Into<String>) -> Result<Self> {
        Self::builder().url(url).build()
    }

    /// A builder for several URLs, a token, timeouts and retries.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    pub(crate) fn transport(&self) -> &Transport {
        &self.inner.transport
    }

    pub(crate) fn buffer_tasks(&self) -> &TaskTracker {
        &self.inner.buffers
    }

    /// The broker URLs this client uses.
    ///
    /// ```
    /// let client = queen_client::Client::new("http://localhost:6632/")?;
    /// assert_eq!(client.urls(), ["http://localhost:6632"]);
    /// # Ok::<_, queen_client::Error>(())
    /// ```
    pub fn urls(&self) -> Vec<String> {
        self.inner.transport.urls().map(str::to_owned).collect()
    }

    /// A handle on queue `name`, to push, pop, consume and configure it.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let messages = client.queue("orders").group("billing").batch(10).pop().await?;
    /// # Ok(()) }
    /// ```
    pub fn queue(&self, name: impl Into<String>) -> Queue {
        Queue::new(self.clone(), name.into())
    }

    /// Administration and inspection calls.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let health = client.admin().health().await?;
    /// println!("{health}");
    /// # Ok(()) }
    /// ```
    pub fn admin(&self) -> Admin {
        Admin::new(self.clone())
    }

    /// A transaction: acks and pushes that commit together or not at all.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client, msg: queen_client::Message) -> queen_client::Result<()> {
    /// client
    ///     .transaction()
    ///     .ack(&msg)
    ///     .push("stage-2", "cust-42", &serde_json::json!({"total": 99}))?
    ///     .commit()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn transaction(&self) -> Transaction {
        Transaction::new(self.clone())
    }

    /// A query of the dead-letter queue across every queue (filters on the query).
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let page = client.dlq().limit(20).get().await?;
    /// println!("{} dead letters", page.total);
    /// # Ok(()) }
    /// ```
    pub fn dlq(&self) -> DlqQuery {
        DlqQuery::new(self.clone())
    }

    /// Acknowledges `message` as processed.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// for msg in client.queue("orders").pop().await? {
    ///     let result = client.ack(&msg).await?;
    ///     assert!(result.success, "{:?}", result.error);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn ack(&self, message: &Message) -> Result<AckResult> {
        self.ack_with(message, AckStatus::Completed, None).await
    }

    /// Acknowledges `message` with `status` (`Failed` counts a retry, then
    /// dead-letters); `error` is stored on the dead letter.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client, msg: queen_client::Message) -> queen_client::Result<()> {
    /// use queen_client::AckStatus;
    /// client.ack_with(&msg, AckStatus::Failed, Some("downstream timeout")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn ack_with(
        &self,
        message: &Message,
        status: AckStatus,
        error: Option<&str>,
    ) -> Result<AckResult> {
        self.post_ack(&wire_ack(message, status, error)).await
    }

    async fn post_ack(&self, ack: &WireAck<'_>) -> Result<AckResult> {
        let mut results: Vec<AckResult> = self
            .transport()
            .json(&Call::post("/api/v1/ack", ack)?)
            .await?;
        results.pop().ok_or_else(|| Error::Decode {
            url: "/api/v1/ack".into(),
            detail: "empty ack answer".into(),
        })
    }

    /// Acknowledges every message of `messages` with one status in one request.
    /// The consumer group of the first message applies to all (the wire has
    /// one group per batch).
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// use queen_client::AckStatus;
    /// let batch = client.queue("orders").batch(50).pop().await?;
    /// let results = client.ack_batch(&batch, AckStatus::Completed, None).await?;
    /// assert!(results.iter().all(|r| r.success));
    /// # Ok(()) }
    /// ```
    pub async fn ack_batch(
        &self,
        messages: &[Message],
        status: AckStatus,
        error: Option<&str>,
    ) -> Result<Vec<AckResult>> {
        let Some(first) = messages.first() else {
            return Ok(Vec::new());
        };
        let body = AckBatch {
            consumer_group: first.group(),
            acknowledgments: messages
                .iter()
                .map(|m| wire_ack(m, status, error))
                .collect(),
        };
        self.transport()
            .json(&Call::post("/api/v1/ack/batch", &body)?)
            .await
    }

    /// Acknowledges a message by its ids, as a script that kept them would.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// use queen_client::{AckRequest, AckStatus};
    /// let req = AckRequest::new("c3d9e0f1-2a3b-4c5d-8e9f-a0b1c2d3e4f5", "order-1")
    ///     .lease_id("0196a7c1-0a11-7b22-9c33-d4e5f6a7b8c9")
    ///     .status(AckStatus::Dlq);
    /// client.ack_ids(&req).await?;
    /// # Ok(()) }
    /// ```
    pub async fn ack_ids(&self, req: &AckRequest) -> Result<AckResult> {
        self.post_ack(&WireAck {
            transaction_id: &req.transaction_id,
            partition_id: &req.partition_id,
            lease_id: req.lease_id.as_deref().filter(|l| !l.is_empty()),
            status: req.status.as_str(),
            error: req.error.as_deref(),
            consumer_group: req.group.as_deref(),
        })
        .await
    }

    /// Extends the lease `lease_id` (every partition it covers) by `seconds`
    /// from now. A lease that is gone answers `success: false`, not an error.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client, msg: queen_client::Message) -> queen_client::Result<()> {
    /// let renewal = client.renew(&msg.lease_id, 60).await?;
    /// println!("lease now ends at {:?}", renewal.expires_at);
    /// # Ok(()) }
    /// ```
    pub async fn renew(&self, lease_id: &str, seconds: u32) -> Result<LeaseRenewal> {
        if lease_id.is_empty() {
            return Err(Error::InvalidInput("lease id is empty".into()));
        }
        let path = format!("/api/v1/lease/{}/extend", segment(lease_id));
        let call = Call::post(&path, &serde_json::json!({ "seconds": seconds }))?;
        match self.transport().json::<LeaseRenewal>(&call).await {
            Ok(r) => Ok(r),
            // a lease that is gone: this broker answers 404/409 with the same body
            Err(Error::Status {
                status: 404 | 409,
                message,
                ..
            }) => Ok(LeaseRenewal {
                lease_id: lease_id.to_owned(),
                success: false,
                error: Some(message),
                expires_at: None,
                renewed: 0,
            }),
            Err(e) => Err(e),
        }
    }

    /// Records a trace event on `message` under `names` (which may be empty).
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client, msg: queen_client::Message) -> queen_client::Result<()> {
    /// client
    ///     .trace(&msg, &["tenant-acme"], "info", &serde_json::json!({"step": "parsed"}))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn trace(
        &self,
        message: &Message,
        names: &[&str],
        event_type: &str,
        data: &impl Serialize,
    ) -> Result<Value> {
        let body = serde_json::json!({
            "transactionId": message.transaction_id,
            "partitionId": message.partition_id,
            "consumerGroup": message.consumer_group,
            "traceNames": if names.is_empty() { Value::Null } else { serde_json::json!(names) },
            "eventType": event_type,
            "data": data,
        });
        self.transport()
            .json(&Call::post("/api/v1/traces", &body)?)
            .await
    }

    /// Waits until every [`crate::BufferedProducer`] of this client has been
    /// dropped (or closed) and has flushed what it held.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let producer = client.queue("events").buffer(Default::default());
    /// producer.push(&serde_json::json!({"n": 1})).await?;
    /// drop(producer);
    /// client.wait_for_buffers().await;
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_buffers(&self) {
        let tasks = self.buffer_tasks();
        tasks.close();
        tasks.wait().await;
        tasks.reopen();
    }
}

/// A message's ids, for [`Client::ack_ids`].
#[derive(Debug, Clone)]
pub struct AckRequest {
    partition_id: String,
    transaction_id: String,
    lease_id: Option<String>,
    group: Option<String>,
    status: AckStatus,
    error: Option<String>,
}

impl AckRequest {
    /// An ack of the message `transaction_id` in partition `partition_id` as completed.
    pub fn new(partition_id: impl Into<String>, transaction_id: impl Into<String>) -> Self {
        Self {
            partition_id: partition_id.into(),
            transaction_id: transaction_id.into(),
            lease_id: None,
            group: None,
            status: AckStatus::Completed,
            error: None,
        }
    }

    /// The lease the message was delivered under; the broker refuses the ack if it is gone.
    pub fn lease_id(mut self, lease: impl Into<String>) -> Self {
        self.lease_id = Some(lease.into());
        self
    }

    /// The consumer group the message was popped with (default: queue mode).
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// The ack status (default `Completed`).
    pub fn status(mut self, status: AckStatus) -> Self {
        self.status = status;
        self
    }

    /// Text stored on the dead letter if this ack dead-letters the message.
    pub fn error(mut self, error: impl Into<String>) -> Self {
        self.error = Some(error.into());
        self
    }
}

fn wire_ack<'a>(m: &'a Message, status: AckStatus, error: Option<&'a str>) -> WireAck<'a> {
    WireAck {
        transaction_id: &m.transaction_id,
        partition_id: &m.partition_id,
        lease_id: Some(m.lease_id.as_str()).filter(|l| !l.is_empty()),
        status: status.as_str(),
        error,
        consumer_group: m.group(),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AckBatch<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    consumer_group: Option<&'a str>,
    acknowledgments: Vec<WireAck<'a>>,
}
