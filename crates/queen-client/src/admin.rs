//! Administration and inspection routes (`client.admin()`).
//!
//! Their answers are dashboard data whose inner shapes the contract leaves
//! open, so most calls return the JSON as the broker sent it; the switches
//! with a fixed shape are typed.

use serde_json::{json, Value};

use crate::client::Client;
use crate::error::Result;
use crate::path::{segment, Query};
use crate::transport::{Call, Replay};
use crate::types::{Maintenance, Seek};

/// Filters of [`Admin::messages`]; every field is optional.
///
/// ```
/// let filter = queen_client::MessageFilter {
///     queue: Some("orders".into()),
///     status: Some("dead_letter".into()),
///     ..Default::default()
/// };
/// ```
#[derive(Debug, Clone, Default)]
pub struct MessageFilter {
    pub queue: Option<String>,
    pub partition: Option<String>,
    pub namespace: Option<String>,
    pub task: Option<String>,
    /// `pending`, `processing`, `completed` or `dead_letter`.
    pub status: Option<String>,
    /// Window start (ISO 8601); the broker's default is an hour ago.
    pub from: Option<String>,
    pub to: Option<String>,
    pub limit: Option<u32>,
    pub offset: Option<u32>,
}

/// Administration calls; made by [`Client::admin`].
#[derive(Debug, Clone)]
pub struct Admin {
    client: Client,
}

impl Admin {
    pub(crate) fn new(client: Client) -> Self {
        Self { client }
    }

    async fn get(&self, path: String) -> Result<Value> {
        self.client.transport().json(&Call::get(path)).await
    }

    async fn post(&self, path: String, body: &Value) -> Result<Value> {
        self.client.transport().json(&Call::post(path, body)?).await
    }

    async fn delete(&self, path: String) -> Result<Value> {
        self.client.transport().json(&Call::delete(path)).await
    }

    /// `GET` any route of the API and return its JSON answer (for routes this
    /// crate has no typed call for: key/value, locks, timers, analytics, …).
    /// `path` starts with `/` and carries its own query string.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let timers = client.admin().get_json("/api/v1/timers/reports?limit=10").await?;
    /// # Ok(()) }
    /// ```
    pub async fn get_json(&self, path: &str) -> Result<Value> {
        self.get(path.to_owned()).await
    }

    /// `POST` a JSON body to any route and return its JSON answer. Retried
    /// only when it surely never reached a broker, since not every route is
    /// safe to apply twice (a key/value `incr`, a transaction).
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let body = serde_json::json!({"operations": [{"op": "get", "ns": "app", "key": "k"}]});
    /// let answer = client.admin().post_json("/api/v1/kv", &body).await?;
    /// # Ok(()) }
    /// ```
    pub async fn post_json(&self, path: &str, body: &Value) -> Result<Value> {
        let call = Call::post(path, body)?.replay(Replay::IfNeverSent);
        self.client.transport().json(&call).await
    }

    /// `DELETE` any route and return its JSON answer.
    pub async fn delete_json(&self, path: &str) -> Result<Value> {
        self.delete(path.to_owned()).await
    }

    /// `GET /health` of the next broker URL: `503` (an error) when its database is down.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// assert_eq!(client.admin().health().await?["status"], "healthy");
    /// # Ok(()) }
    /// ```
    pub async fn health(&self) -> Result<Value> {
        self.get("/health".into()).await
    }

    /// `GET /metrics`: uptime, request and message counters, pool, memory.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let m = client.admin().metrics().await?;
    /// println!("{}", m["database"]["poolSize"]);
    /// # Ok(()) }
    /// ```
    pub async fn metrics(&self) -> Result<Value> {
        self.get("/metrics".into()).await
    }

    /// `GET /metrics/prometheus`: the Prometheus text exposition.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let text = client.admin().prometheus().await?;
    /// assert!(text.contains("queen_uptime_seconds"));
    /// # Ok(()) }
    /// ```
    pub async fn prometheus(&self) -> Result<String> {
        let answer = self
            .client
            .transport()
            .send(&Call::get("/metrics/prometheus"))
            .await?;
        Ok(String::from_utf8_lossy(&answer.body).into_owned())
    }

    /// `GET /api/v1/resources/overview`: counts of queues, partitions, messages by state.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let o = client.admin().overview().await?;
    /// println!("{} queues", o["queues"]);
    /// # Ok(()) }
    /// ```
    pub async fn overview(&self) -> Result<Value> {
        self.get("/api/v1/resources/overview".into()).await
    }

    /// `GET /api/v1/resources/queues`: `{"queues": [{name, partitions, messages, …}]}`.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// for q in client.admin().queues().await?["queues"].as_array().into_iter().flatten() {
    ///     println!("{}", q["name"]);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn queues(&self) -> Result<Value> {
        self.get("/api/v1/resources/queues".into()).await
    }

    /// `GET /api/v1/resources/queues/:queue`: partitions with their stats; `404` if unknown.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let q = client.admin().queue("orders").await?;
    /// println!("{}", q["totals"]);
    /// # Ok(()) }
    /// ```
    pub async fn queue(&self, name: &str) -> Result<Value> {
        self.get(format!("/api/v1/resources/queues/{}", segment(name)))
            .await
    }

    /// `GET /api/v1/status`: the dashboard's throughput and totals.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let s = client.admin().status().await?;
    /// println!("{}", s["messages"]);
    /// # Ok(()) }
    /// ```
    pub async fn status(&self) -> Result<Value> {
        self.get("/api/v1/status".into()).await
    }

    /// `GET /api/v1/consumer-groups`: one element per (group, queue).
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let groups = client.admin().consumer_groups().await?;
    /// # Ok(()) }
    /// ```
    pub async fn consumer_groups(&self) -> Result<Value> {
        self.get("/api/v1/consumer-groups".into()).await
    }

    /// `GET /api/v1/consumer-groups/:group`: per queue, per partition lag.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let g = client.admin().consumer_group("billing").await?;
    /// # Ok(()) }
    /// ```
    pub async fn consumer_group(&self, group: &str) -> Result<Value> {
        self.get(format!("/api/v1/consumer-groups/{}", segment(group)))
            .await
    }

    /// `GET /api/v1/consumer-groups/lagging`: partitions whose oldest
    /// unconsumed message is older than `min_lag_seconds`.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let lagging = client.admin().lagging(60).await?;
    /// # Ok(()) }
    /// ```
    pub async fn lagging(&self, min_lag_seconds: u64) -> Result<Value> {
        self.get(format!(
            "/api/v1/consumer-groups/lagging?minLagSeconds={min_lag_seconds}"
        ))
        .await
    }

    /// Deletes a group's cursors on every queue, or on `queue` only; with
    /// `delete_metadata` also its stored subscription.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// client.admin().delete_consumer_group("billing", Some("orders"), true).await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_consumer_group(
        &self,
        group: &str,
        queue: Option<&str>,
        delete_metadata: bool,
    ) -> Result<Value> {
        let scope = queue.map_or(String::new(), |q| format!("/queues/{}", segment(q)));
        self.delete(format!(
            "/api/v1/consumer-groups/{}{scope}?deleteMetadata={delete_metadata}",
            segment(group)
        ))
        .await
    }

    /// Moves a group's cursors on `queue` (only partitions it already read),
    /// releasing their leases.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// use queen_client::Seek;
    /// client.admin().seek("billing", "orders", &Seek::ToEnd).await?;
    /// client.admin().seek("billing", "orders", &Seek::To("2026-05-01T00:00:00Z".into())).await?;
    /// # Ok(()) }
    /// ```
    pub async fn seek(&self, group: &str, queue: &str, to: &Seek) -> Result<Value> {
        let body = match to {
            Seek::ToEnd => json!({"toEnd": true}),
            Seek::To(t) => json!({"timestamp": t}),
        };
        self.post(
            format!(
                "/api/v1/consumer-groups/{}/queues/{}/seek",
                segment(group),
                segment(queue)
            ),
            &body,
        )
        .await
    }

    /// Moves a group's cursor on one partition to its end.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// client.admin().seek_partition_to_end("billing", "orders", "cust-42").await?;
    /// # Ok(()) }
    /// ```
    pub async fn seek_partition_to_end(
        &self,
        group: &str,
        queue: &str,
        partition: &str,
    ) -> Result<Value> {
        self.post(
            format!(
                "/api/v1/consumer-groups/{}/queues/{}/partitions/{}/seek",
                segment(group),
                segment(queue),
                segment(partition)
            ),
            &json!({}),
        )
        .await
    }

    /// Rewrites the stored subscription time of a group on every queue.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// client.admin().update_subscription("billing", "2026-05-01T00:00:00Z").await?;
    /// # Ok(()) }
    /// ```
    pub async fn update_subscription(&self, group: &str, timestamp: &str) -> Result<Value> {
        self.post(
            format!("/api/v1/consumer-groups/{}/subscription", segment(group)),
            &json!({"subscriptionTimestamp": timestamp}),
        )
        .await
    }

    /// Both maintenance switches and the spool depth.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let m = client.admin().maintenance().await?;
    /// println!("push maintenance: {}", m.maintenance_mode);
    /// # Ok(()) }
    /// ```
    pub async fn maintenance(&self) -> Result<Maintenance> {
        self.client
            .transport()
            .json(&Call::get("/api/v1/system/maintenance"))
            .await
    }

    /// Turns push maintenance on or off for every replica (pushes are spooled while on).
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// client.admin().set_maintenance(true).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_maintenance(&self, enabled: bool) -> Result<Value> {
        self.post(
            "/api/v1/system/maintenance".into(),
            &json!({"enabled": enabled}),
        )
        .await
    }

    /// Turns pop maintenance on or off (pops answer empty while on).
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// client.admin().set_pop_maintenance(false).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_pop_maintenance(&self, enabled: bool) -> Result<Value> {
        self.post(
            "/api/v1/system/maintenance/pop".into(),
            &json!({"enabled": enabled}),
        )
        .await
    }

    /// `GET /api/v1/messages`: messages (no payloads) matching `filter`, newest first.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// use queen_client::MessageFilter;
    /// let filter = MessageFilter { queue: Some("orders".into()), ..Default::default() };
    /// let list = client.admin().messages(&filter).await?;
    /// # Ok(()) }
    /// ```
    pub async fn messages(&self, filter: &MessageFilter) -> Result<Value> {
        let mut q = Query::default();
        q.opt("queue", filter.queue.as_deref())
            .opt("partition", filter.partition.as_deref())
            .opt("ns", filter.namespace.as_deref())
            .opt("task", filter.task.as_deref())
            .opt("status", filter.status.as_deref())
            .opt("from", filter.from.as_deref())
            .opt("to", filter.to.as_deref())
            .opt("limit", filter.limit)
            .opt("offset", filter.offset);
        self.get(format!("/api/v1/messages{}", q.as_str())).await
    }

    /// One message with its payload and per-group state; `404` if unknown.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let m = client.admin().message("c3d9e0f1-2a3b-4c5d-8e9f-a0b1c2d3e4f5", "order-1").await?;
    /// println!("{}", m["status"]);
    /// # Ok(()) }
    /// ```
    pub async fn message(&self, partition_id: &str, transaction_id: &str) -> Result<Value> {
        self.get(message_path(partition_id, transaction_id, ""))
            .await
    }

    /// Deletes a message: pops skip it and its transaction id is free again.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let r = client.admin().delete_message("c3d9e0f1-2a3b-4c5d-8e9f-a0b1c2d3e4f5", "order-1").await?;
    /// println!("{}", r["success"]);
    /// # Ok(()) }
    /// ```
    pub async fn delete_message(&self, partition_id: &str, transaction_id: &str) -> Result<Value> {
        self.delete(message_path(partition_id, transaction_id, ""))
            .await
    }

    /// Deletes the dead letters of one message
    /// (`DELETE /api/v1/dlq/:partitionId/:transactionId`): those of `group`,
    /// or of every group with `None`. The message itself stays where it is;
    /// none there is a `404` error.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let r = client
    ///     .admin()
    ///     .delete_dead_letter("c3d9e0f1-2a3b-4c5d-8e9f-a0b1c2d3e4f5", "order-1", Some("billing"))
    ///     .await?;
    /// println!("{} deleted", r["deleted"]);
    /// # Ok(()) }
    /// ```
    pub async fn delete_dead_letter(
        &self,
        partition_id: &str,
        transaction_id: &str,
        group: Option<&str>,
    ) -> Result<Value> {
        let mut q = Query::default();
        q.opt("consumerGroup", group);
        self.delete(format!(
            "/api/v1/dlq/{}/{}{}",
            segment(partition_id),
            segment(transaction_id),
            q.as_str()
        ))
        .await
    }

    /// Moves a dead-lettered message back into its partition
    /// (`POST /api/v1/messages/:partitionId/:transactionId/retry`, the
    /// 2.6 client's route). Brokers without the route answer 404.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// client.admin().retry_message("c3d9e0f1-2a3b-4c5d-8e9f-a0b1c2d3e4f5", "order-1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn retry_message(&self, partition_id: &str, transaction_id: &str) -> Result<Value> {
        self.post(
            message_path(partition_id, transaction_id, "/retry"),
            &json!({}),
        )
        .await
    }

    /// The trace events of one message, oldest first.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let t = client.admin().traces("c3d9e0f1-2a3b-4c5d-8e9f-a0b1c2d3e4f5", "order-1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn traces(&self, partition_id: &str, transaction_id: &str) -> Result<Value> {
        self.get(format!(
            "/api/v1/traces/{}/{}",
            segment(partition_id),
            segment(transaction_id)
        ))
        .await
    }

    /// The trace events recorded under `name`.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let t = client.admin().traces_by_name("tenant-acme", 100, 0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn traces_by_name(&self, name: &str, limit: u32, offset: u32) -> Result<Value> {
        self.get(format!(
            "/api/v1/traces/by-name/{}?limit={limit}&offset={offset}",
            segment(name)
        ))
        .await
    }

    /// The trace names in use, with counts.
    ///
    /// ```no_run
    /// # async fn run(client: queen_client::Client) -> queen_client::Result<()> {
    /// let names = client.admin().trace_names(50, 0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn trace_names(&self, limit: u32, offset: u32) -> Result<Value> {
        self.get(format!(
            "/api/v1/traces/names?limit={limit}&offset={offset}"
        ))
        .await
    }
}

fn message_path(partition_id: &str, transaction_id: &str, suffix: &str) -> String {
    format!(
        "/api/v1/messages/{}/{}{suffix}",
        segment(partition_id),
        segment(transaction_id)
    )
}
