//! Queries of the dead-letter queue (`GET /api/v1/dlq`).

use crate::client::Client;
use crate::error::Result;
use crate::path::Query;
use crate::transport::Call;
use crate::types::DeadLetterPage;

/// Filters and paging of a dead-letter query; made by [`Client::dlq`] or
/// [`crate::Queue::dlq`]. Newest first.
///
/// ```no_run
/// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
/// let page = client
///     .dlq()
///     .queue("orders")
///     .from("2026-05-01T00:00:00Z")
///     .limit(50)
///     .get()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DlqQuery {
    client: Client,
    queue: Option<String>,
    group: Option<String>,
    partition: Option<String>,
    from: Option<String>,
    to: Option<String>,
    limit: u32,
    offset: u32,
}

/// Entries per page when none is asked for (the broker's default).
const DEFAULT_LIMIT: u32 = 100;

impl DlqQuery {
    pub(crate) fn new(client: Client) -> Self {
        Self {
            client,
            queue: None,
            group: None,
            partition: None,
            from: None,
            to: None,
            limit: DEFAULT_LIMIT,
            offset: 0,
        }
    }

    /// Only this queue's dead letters.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Only this consumer group's.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Only this partition's (by name).
    pub fn partition(mut self, partition: impl Into<String>) -> Self {
        self.partition = Some(partition.into());
        self
    }

    /// Only entries that failed at or after this time (ISO 8601).
    pub fn from(mut self, t: impl Into<String>) -> Self {
        self.from = Some(t.into());
        self
    }

    /// Only entries that failed at or before this time (ISO 8601).
    pub fn to(mut self, t: impl Into<String>) -> Self {
        self.to = Some(t.into());
        self
    }

    /// Entries per page (default 100).
    pub fn limit(mut self, n: u32) -> Self {
        self.limit = n;
        self
    }

    /// Entries skipped.
    pub fn offset(mut self, n: u32) -> Self {
        self.offset = n;
        self
    }

    /// Runs the query.
    pub async fn get(&self) -> Result<DeadLetterPage> {
        let mut q = Query::default();
        q.opt("queue", self.queue.as_deref())
            .opt("consumerGroup", self.group.as_deref())
            .opt("partition", self.partition.as_deref())
            .opt("from", self.from.as_deref())
            .opt("to", self.to.as_deref())
            .push("limit", self.limit)
            .push("offset", self.offset);
        self.client
            .transport()
            .json(&Call::get(format!("/api/v1/dlq{}", q.as_str())))
            .await
    }
}
