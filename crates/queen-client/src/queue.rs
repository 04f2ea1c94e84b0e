//! `client.queue(name)`: a builder that carries a queue, partition, group and
//! pop options, and the calls made with them.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::buffer::{BufferOptions, BufferedProducer};
use crate::client::Client;
use crate::dlq::DlqQuery;
use crate::error::{Error, Result};
use crate::path::{segment, Query};
use crate::transport::Call;
use crate::types::{
    ConfigureResult, DeleteQueueResult, Message, PopBody, PushItem, PushResult, WireItem,
    WirePushResult,
};

pub use queen_proto::QueueOptions;

/// Where a consumer group starts the first time it reads a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubscriptionMode {
    /// From the oldest message kept.
    All,
    /// Only messages pushed from now on.
    New,
}

impl SubscriptionMode {
    fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::New => "new",
        }
    }
}

/// The body of `POST /api/v1/push`.
#[derive(Serialize)]
struct PushBody<'a> {
    items: &'a [WireItem<'a>],
}

/// How long a pop waits by default for a message (the official clients' 30 s).
const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// Extra time a long poll's HTTP request gets beyond its wait, as the official
/// clients allow, so the broker's empty answer arrives before the client gives up.
const LONG_POLL_SLACK: Duration = Duration::from_secs(5);

/// A queue with the partition, consumer group and options of the calls made
/// through it. Setters take and return the builder; calls borrow it, so one
/// builder can be reused.
///
/// ```no_run
/// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
/// let orders = client.queue("orders").partition("cust-42");
/// orders.push(&serde_json::json!({"id": 1})).await?;
/// let batch = client.queue("orders").group("billing").batch(10).wait(false).pop().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Queue {
    pub(crate) client: Client,
    pub(crate) name: String,
    pub(crate) partition: Option<String>,
    pub(crate) group: Option<String>,
    pub(crate) namespace: Option<String>,
    pub(crate) task: Option<String>,
    pub(crate) batch: Option<u32>,
    pub(crate) partitions: Option<u32>,
    pub(crate) wait: bool,
    pub(crate) timeout: Duration,
    pub(crate) commit_on_delivery: bool,
    pub(crate) subscription_mode: Option<SubscriptionMode>,
    pub(crate) subscription_from: Option<String>,
    pub(crate) consume: crate::consume::ConsumeOptions,
}

impl Queue {
    pub(crate) fn new(client: Client, name: String) -> Self {
        Self {
            client,
            name,
            partition: None,
            group: None,
            namespace: None,
            task: None,
            batch: None,
            partitions: None,
            wait: true,
            timeout: DEFAULT_WAIT,
            commit_on_delivery: false,
            subscription_mode: None,
            subscription_from: None,
            consume: crate::consume::ConsumeOptions::default(),
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Pushes go to, and pops read only, this partition (default: pushes to
    /// `Default`, pops from any partition).
    pub fn partition(mut self, name: impl Into<String>) -> Self {
        self.partition = Some(name.into());
        self
    }

    /// Pops, consumes and acks as this consumer group (default: queue mode).
    pub fn group(mut self, name: impl Into<String>) -> Self {
        self.group = Some(name.into());
        self
    }

    /// The namespace stored by [`Queue::configure`].
    pub fn namespace(mut self, name: impl Into<String>) -> Self {
        self.namespace = Some(name.into());
        self
    }

    /// The task stored by [`Queue::configure`].
    pub fn task(mut self, name: impl Into<String>) -> Self {
        self.task = Some(name.into());
        self
    }

    /// Most messages one pop returns (default: the broker's, 1).
    pub fn batch(mut self, n: u32) -> Self {
        self.batch = Some(n.max(1));
        self
    }

    /// Partitions one pop of the whole queue may claim (default 1).
    pub fn partitions(mut self, n: u32) -> Self {
        self.partitions = Some(n.max(1));
        self
    }

    /// Whether a pop waits for a message when there is none (default true).
    pub fn wait(mut self, wait: bool) -> Self {
        self.wait = wait;
        self
    }

    /// How long a waiting pop waits (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Pops commit on delivery: no lease, nothing to ack, at-most-once.
    pub fn commit_on_delivery(mut self, on: bool) -> Self {
        self.commit_on_delivery = on;
        self
    }

    /// Where the group starts on its first pop (stored by the broker then).
    pub fn subscription_mode(mut self, mode: SubscriptionMode) -> Self {
        self.subscription_mode = Some(mode);
        self
    }

    /// Starts the group at a time (ISO 8601) or `now`; wins over the mode.
    pub fn subscription_from(mut self, from: impl Into<String>) -> Self {
        self.subscription_from = Some(from.into());
        self
    }

    fn check_name(&self) -> Result<()> {
        queen_proto::QueueName::new(self.name.as_str())
            .map(drop)
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        if let Some(p) = &self.partition {
            queen_proto::PartitionName::new(p.as_str())
                .map_err(|e| Error::InvalidInput(e.to_string()))?;
        }
        if let Some(g) = &self.group {
            queen_proto::ConsumerGroup::new(g.as_str())
                .map_err(|e| Error::InvalidInput(e.to_string()))?;
        }
        Ok(())
    }

    /// Creates the queue or replaces its whole option set (options not set
    /// take their defaults).
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// use queen_client::QueueOptions;
    /// let options = QueueOptions { lease_time: 60, retry_limit: 5, ..Default::default() };
    /// let result = client.queue("orders").configure(&options).await?;
    /// assert!(result.configured);
    /// # Ok(()) }
    /// ```
    pub async fn configure(&self, options: &QueueOptions) -> Result<ConfigureResult> {
        self.configure_json(&serde_json::to_value(options)?).await
    }

    /// Creates or reconfigures the queue from a JSON object of options
    /// (`{"leaseTime": 60, …}`), as the HTTP API takes them.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// client.queue("orders").configure_json(&serde_json::json!({"retryLimit": 1})).await?;
    /// # Ok(()) }
    /// ```
    pub async fn configure_json(&self, options: &Value) -> Result<ConfigureResult> {
        self.check_name()?;
        if !options.is_object() {
            return Err(Error::InvalidInput(
                "queue options must be a JSON object".into(),
            ));
        }
        let body = serde_json::json!({
            "queue": self.name,
            "namespace": self.namespace,
            "task": self.task,
            "options": options,
        });
        self.client
            .transport()
            .json(&Call::post("/api/v1/configure", &body)?)
            .await
    }

    /// Deletes the queue with its partitions, messages, cursors and dead letters.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let result = client.queue("orders").delete().await?;
    /// println!("existed: {}", result.existed);
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self) -> Result<DeleteQueueResult> {
        self.check_name()?;
        let path = format!("/api/v1/resources/queues/{}", segment(&self.name));
        self.client.transport().json(&Call::delete(path)).await
    }

    /// Pushes one message whose payload is `payload` serialised to JSON.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// #[derive(serde::Serialize)]
    /// struct Order { id: u64 }
    /// let result = client.queue("orders").partition("cust-42").push(&Order { id: 1 }).await?;
    /// assert!(result.is_accepted());
    /// # Ok(()) }
    /// ```
    pub async fn push(&self, payload: &impl Serialize) -> Result<PushResult> {
        let mut results = self.push_items(vec![PushItem::new(payload)?]).await?;
        results.pop().ok_or_else(|| Error::Decode {
            url: "/api/v1/push".into(),
            detail: "empty push answer".into(),
        })
    }

    /// Pushes several messages in one request; one result per item, in order.
    ///
    /// Items without a transaction id get a UUID v7, so the client can retry
    /// the request after a lost answer without storing anything twice.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// use queen_client::PushItem;
    /// let items = vec![
    ///     PushItem::new(&serde_json::json!({"id": 1}))?.transaction_id("order-1"),
    ///     PushItem::raw(r#"{"id": 2}"#)?.partition("cust-7"),
    /// ];
    /// let results = client.queue("orders").push_items(items).await?;
    /// assert_eq!(results.len(), 2);
    /// # Ok(()) }
    /// ```
    pub async fn push_items(&self, items: Vec<PushItem>) -> Result<Vec<PushResult>> {
        self.check_name()?;
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let default_partition = self
            .partition
            .as_deref()
            .unwrap_or(queen_proto::names::DEFAULT_PARTITION);
        let ids: Vec<String> = items
            .iter()
            .map(|i| {
                i.transaction_id
                    .clone()
                    .unwrap_or_else(|| uuid::Uuid::now_v7().to_string())
            })
            .collect();
        let wire: Vec<WireItem<'_>> = items
            .iter()
            .zip(&ids)
            .map(|(item, id)| WireItem {
                queue: &self.name,
                partition: item.partition.as_deref().unwrap_or(default_partition),
                payload: &item.payload,
                transaction_id: id,
                trace_id: item.trace_id.as_deref(),
            })
            .collect();
        let call = Call::post("/api/v1/push", &PushBody { items: &wire })?;
        let answer = self.client.transport().send(&call).await?;
        let results: Vec<WirePushResult> = answer.json()?;
        if results.len() != ids.len() {
            return Err(Error::Decode {
                url: answer.url,
                detail: format!("{} results for {} items", results.len(), ids.len()),
            });
        }
        Ok(results
            .into_iter()
            .zip(&ids)
            .enumerate()
            .map(|(i, (r, id))| r.into_result(i, id))
            .collect())
    }

    fn pop_path(&self) -> String {
        let mut path = format!("/api/v1/pop/queue/{}", segment(&self.name));
        if let Some(p) = &self.partition {
            path.push_str("/partition/");
            path.push_str(&segment(p));
        }
        path
    }

    pub(crate) fn pop_call(&self, batch: Option<u32>) -> Call {
        let mut q = Query::default();
        q.opt("batch", batch.or(self.batch))
            .opt("partitions", self.partitions)
            .push("wait", self.wait)
            .push("timeout", self.timeout.as_millis())
            .opt("consumerGroup", self.group.as_deref())
            .opt(
                "subscriptionMode",
                self.subscription_mode.map(SubscriptionMode::as_str),
            )
            .opt("subscriptionFrom", self.subscription_from.as_deref());
        if self.commit_on_delivery {
            q.push("autoAck", true);
        }
        let call = Call::get(format!("{}{}", self.pop_path(), q.as_str()));
        if self.wait {
            call.timeout(self.timeout + LONG_POLL_SLACK)
        } else {
            call
        }
    }

    pub(crate) async fn pop_with(&self, batch: Option<u32>) -> Result<Vec<Message>> {
        self.check_name()?;
        let answer = self.client.transport().send(&self.pop_call(batch)).await?;
        if answer.is_empty() {
            return Ok(Vec::new());
        }
        let body: PopBody = answer.json()?;
        if !body.success {
            return Err(Error::Unavailable(
                body.error.unwrap_or_else(|| "pop failed".into()),
            ));
        }
        Ok(body.messages)
    }

    /// Pops up to `batch` messages; an empty list when there are none (after
    /// waiting up to `timeout` if `wait` is on). Messages are leased to this
    /// caller until acked or until the queue's lease time passes.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// use std::time::Duration;
    /// let messages = client
    ///     .queue("orders")
    ///     .batch(100)
    ///     .timeout(Duration::from_secs(5))
    ///     .pop()
    ///     .await?;
    /// for m in &messages {
    ///     println!("{} {}", m.transaction_id, m.data);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn pop(&self) -> Result<Vec<Message>> {
        self.pop_with(None).await
    }

    /// A query of this queue's dead letters (for its group and partition, if set).
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let page = client.queue("orders").group("billing").dlq().limit(10).get().await?;
    /// for d in &page.messages {
    ///     println!("{}: {:?}", d.transaction_id, d.error_message);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn dlq(&self) -> DlqQuery {
        let mut q = DlqQuery::new(self.client.clone()).queue(self.name.clone());
        if let Some(g) = &self.group {
            q = q.group(g.clone());
        }
        if let Some(p) = &self.partition {
            q = q.partition(p.clone());
        }
        q
    }

    /// A producer that gathers pushes to this queue and partition client-side
    /// and sends them in batches: when `max_messages` are waiting, when the
    /// oldest has waited `max_delay`, on [`BufferedProducer::flush`], and when
    /// the producer is dropped.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// use std::time::Duration;
    /// use queen_client::BufferOptions;
    /// let producer = client.queue("events").buffer(BufferOptions {
    ///     max_messages: 500,
    ///     max_delay: Duration::from_millis(200),
    ///     ..Default::default()
    /// });
    /// for n in 0..10_000 {
    ///     producer.push(&serde_json::json!({"n": n})).await?;
    /// }
    /// let stats = producer.close().await;
    /// assert_eq!(stats.failed, 0);
    /// # Ok(()) }
    /// ```
    pub fn buffer(&self, options: BufferOptions) -> BufferedProducer {
        BufferedProducer::start(self.clone(), options)
    }

    /// Pending messages per partition for the group (or the slowest group):
    /// `GET /api/v1/resources/queues/:queue/depth`. Brokers without the
    /// route answer 404.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let depth = client.queue("orders").group("billing").depth().await?;
    /// println!("pending: {}", depth["pending"]);
    /// # Ok(()) }
    /// ```
    pub async fn depth(&self) -> Result<Value> {
        self.check_name()?;
        let mut q = Query::default();
        q.opt("group", self.group.as_deref());
        let path = format!(
            "/api/v1/resources/queues/{}/depth{}",
            segment(&self.name),
            q.as_str()
        );
        self.client.transport().json(&Call::get(path)).await
    }
}
