//! The few HTTP v1 calls the benchmark makes (spec §3.2 push, §3.3 pop, §3.6 ack/batch).
//!
//! Request bodies borrow from the caller so building a batch costs one
//! serialization; responses are parsed only as far as the benchmark needs.

use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use reqwest::{Client, Response, StatusCode, Url};
use serde::{Deserialize, Serialize};

/// Cheap to clone: `reqwest::Client` is a shared connection pool.
#[derive(Clone)]
pub struct Api {
    http: Client,
    base: Url,
}

#[derive(Serialize)]
pub struct PushItem<'a> {
    pub queue: &'a str,
    pub partition: &'a str,
    pub payload: Payload<'a>,
    #[serde(rename = "transactionId")]
    pub transaction_id: String,
}

/// Message body: a sequence number plus `pad` to reach the requested size.
#[derive(Serialize)]
pub struct Payload<'a> {
    pub seq: u64,
    pub pad: &'a str,
}

/// Per-item statuses of one push response, in request order.
#[derive(Debug)]
pub struct PushOutcome {
    pub statuses: Vec<PushStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushStatus {
    Queued,
    Duplicate,
    Failed(String),
    /// `buffered` or anything else the broker may add later.
    Other(String),
}

pub struct PopParams {
    pub batch: u32,
    pub partitions: u32,
    /// `Some(timeout_ms)` long-polls (`wait=true&timeout=..`), `None` sends `wait=false`.
    pub wait_ms: Option<u64>,
    /// `consumerGroup` query parameter; `None` is queue mode.
    pub consumer_group: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoppedMessage {
    pub transaction_id: String,
    pub partition_id: String,
    #[serde(default)]
    pub lease_id: Option<String>,
    /// The payload as sent (runs whose number travels in it).
    #[serde(default)]
    pub data: Option<Box<serde_json::value::RawValue>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AckItem<'a> {
    pub transaction_id: &'a str,
    pub partition_id: &'a str,
    pub lease_id: &'a str,
    pub status: &'static str,
}

/// Reads the per-item results of a push answer, checking there is one per item.
async fn push_results(
    resp: reqwest::Result<reqwest::Response>,
    sent: usize,
) -> Result<Vec<PushResultItem>> {
    const WHAT: &str = "POST /api/v1/push";
    let resp = resp.with_context(|| format!("{WHAT}: request failed"))?;
    let resp = ensure_success(resp, WHAT).await?;
    let body = resp
        .bytes()
        .await
        .with_context(|| format!("{WHAT}: reading response"))?;
    let results: Vec<PushResultItem> = serde_json::from_slice(&body)
        .with_context(|| format!("{WHAT}: unexpected response {}", snippet(&body)))?;
    if results.len() != sent {
        bail!("{WHAT}: sent {sent} items, got {} results", results.len());
    }
    Ok(results)
}

impl<'a> AckItem<'a> {
    /// `completed` acks for every popped message that came with a lease
    /// (auto-acked ones carry an empty lease and need none).
    pub fn completed_for(messages: &'a [PoppedMessage]) -> Vec<Self> {
        messages
            .iter()
            .filter_map(|m| {
                let lease_id = m.lease_id.as_deref().filter(|l| !l.is_empty())?;
                Some(AckItem {
                    transaction_id: &m.transaction_id,
                    partition_id: &m.partition_id,
                    lease_id,
                    status: "completed",
                })
            })
            .collect()
    }
}

#[derive(Debug, Default)]
pub struct AckOutcome {
    pub succeeded: u64,
    pub failed: u64,
    pub first_error: Option<String>,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: Option<String>,
}

#[derive(Deserialize)]
struct PushResultItem {
    status: String,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Serialize)]
struct PushRequest<'a> {
    items: &'a [PushItem<'a>],
}

#[derive(Deserialize)]
struct PopResponse {
    #[serde(default)]
    success: Option<bool>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    messages: Vec<PoppedMessage>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AckBatchRequest<'a> {
    /// Always sent, `null` meaning queue mode (`__QUEUE_MODE__`).
    consumer_group: Option<&'a str>,
    acknowledgments: &'a [AckItem<'a>],
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AckBatchResponse {
    Items(Vec<AckResultItem>),
    /// Storage failures come back as an object, even with HTTP 200 (§3.5).
    Object(ErrorBody),
}

#[derive(Deserialize)]
struct AckResultItem {
    success: bool,
    #[serde(default)]
    error: Option<String>,
}

impl Api {
    pub fn new(base_url: &str, request_timeout: Duration) -> Result<Self> {
        let base = Url::parse(base_url).with_context(|| format!("invalid --url {base_url:?}"))?;
        if base.cannot_be_a_base() || !matches!(base.scheme(), "http" | "https") {
            bail!("invalid --url {base_url:?}: expected http://host:port");
        }
        let http = Client::builder()
            .timeout(request_timeout)
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true)
            .build()
            .context("building HTTP client")?;
        Ok(Self { http, base })
    }

    pub fn base(&self) -> &Url {
        &self.base
    }

    fn url(&self, segments: &[&str]) -> Result<Url> {
        let mut url = self.base.clone();
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|()| anyhow::anyhow!("--url cannot carry a path"))?;
            path.pop_if_empty().extend(segments);
        }
        Ok(url)
    }

    /// Fails with a clear message when nothing listens at `--url` or the broker
    /// reports itself unhealthy. A 404 (no `/health` route) is tolerated.
    pub async fn check_reachable(&self) -> Result<()> {
        let url = self.url(&["health"])?;
        let resp = self
            .http
            .get(url)
            .send()
            .await
            .with_context(|| format!("broker unreachable at {}", self.base))?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Ok(());
        }
        ensure_success(resp, "GET /health").await?;
        Ok(())
    }

    pub async fn push(&self, items: &[PushItem<'_>]) -> Result<PushOutcome> {
        let resp = self
            .http
            .post(self.url(&["api", "v1", "push"])?)
            .json(&PushRequest { items })
            .send()
            .await;
        let results = push_results(resp, items.len()).await?;
        let statuses = results
            .into_iter()
            .map(|r| match r.status.as_str() {
                "queued" => PushStatus::Queued,
                "duplicate" => PushStatus::Duplicate,
                "failed" => PushStatus::Failed(r.error.unwrap_or_default()),
                _ => PushStatus::Other(r.status),
            })
            .collect();
        Ok(PushOutcome { statuses })
    }

    /// Wildcard pop in queue mode. An empty vector means `204 No Content`.
    pub async fn pop(&self, queue: &str, params: &PopParams) -> Result<Vec<PoppedMessage>> {
        const WHAT: &str = "GET /api/v1/pop/queue/{queue}";
        let mut url = self.url(&["api", "v1", "pop", "queue", queue])?;
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("batch", &params.batch.to_string())
                .append_pair("partitions", &params.partitions.to_string());
            match params.wait_ms {
                Some(ms) => query
                    .append_pair("wait", "true")
                    .append_pair("timeout", &ms.to_string()),
                None => query.append_pair("wait", "false"),
            };
            if let Some(group) = &params.consumer_group {
                query.append_pair("consumerGroup", group);
            }
        }
        let resp = self
            .http
            .get(url)
            .send()
            .await
            .with_context(|| format!("{WHAT}: request failed"))?;
        let resp = ensure_success(resp, WHAT).await?;
        if resp.status() == StatusCode::NO_CONTENT {
            return Ok(Vec::new());
        }
        let body = resp
            .bytes()
            .await
            .with_context(|| format!("{WHAT}: reading response"))?;
        let parsed: PopResponse = serde_json::from_slice(&body)
            .with_context(|| format!("{WHAT}: unexpected response {}", snippet(&body)))?;
        if parsed.success == Some(false) {
            bail!(
                "{WHAT}: broker error: {}",
                parsed.error.as_deref().unwrap_or("(no error text)")
            );
        }
        Ok(parsed.messages)
    }

    pub async fn ack_batch(&self, acks: &[AckItem<'_>]) -> Result<AckOutcome> {
        self.ack_batch_group(None, acks).await
    }

    /// `ack/batch` for one consumer group (`None`: queue mode).
    pub async fn ack_batch_group(
        &self,
        consumer_group: Option<&str>,
        acks: &[AckItem<'_>],
    ) -> Result<AckOutcome> {
        const WHAT: &str = "POST /api/v1/ack/batch";
        let resp = self
            .http
            .post(self.url(&["api", "v1", "ack", "batch"])?)
            .json(&AckBatchRequest {
                consumer_group,
                acknowledgments: acks,
            })
            .send()
            .await
            .with_context(|| format!("{WHAT}: request failed"))?;
        let resp = ensure_success(resp, WHAT).await?;
        let body = resp
            .bytes()
            .await
            .with_context(|| format!("{WHAT}: reading response"))?;
        let parsed: AckBatchResponse = serde_json::from_slice(&body)
            .with_context(|| format!("{WHAT}: unexpected response {}", snippet(&body)))?;
        match parsed {
            AckBatchResponse::Object(e) => bail!(
                "{WHAT}: broker error: {}",
                e.error.as_deref().unwrap_or("(no error text)")
            ),
            AckBatchResponse::Items(items) => {
                if items.len() != acks.len() {
                    bail!(
                        "{WHAT}: sent {} acks, got {} results",
                        acks.len(),
                        items.len()
                    );
                }
                let mut outcome = AckOutcome::default();
                for item in items {
                    if item.success && item.error.is_none() {
                        outcome.succeeded += 1;
                    } else {
                        outcome.failed += 1;
                        if outcome.first_error.is_none() {
                            outcome.first_error =
                                Some(item.error.unwrap_or_else(|| "success: false".to_owned()));
                        }
                    }
                }
                Ok(outcome)
            }
        }
    }

    /// Push with a body the caller serialized (`{"items":[...]}` of `items`
    /// items). Returns how many were `queued`; anything else is an error.
    pub async fn push_raw(&self, body: String, items: usize) -> Result<u64> {
        self.push_bytes(body.into_bytes(), "application/json", items)
            .await
    }

    /// Pushes a binary push body (`QPB1`) of `items` items; the answer is the
    /// same as for JSON.
    pub async fn push_binary(&self, body: Vec<u8>, items: usize) -> Result<u64> {
        self.push_bytes(body, queen_proto::push_binary::CONTENT_TYPE, items)
            .await
    }

    async fn push_bytes(&self, body: Vec<u8>, content_type: &str, items: usize) -> Result<u64> {
        const WHAT: &str = "POST /api/v1/push";
        let resp = self
            .http
            .post(self.url(&["api", "v1", "push"])?)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body)
            .send()
            .await;
        let results = push_results(resp, items).await?;
        let mut queued = 0;
        for r in results {
            match r.status.as_str() {
                "queued" => queued += 1,
                other => bail!(
                    "{WHAT}: item status {other:?}: {}",
                    r.error.as_deref().unwrap_or("")
                ),
            }
        }
        Ok(queued)
    }

    /// Configures `queue` with `maxSize` `max_size` (every other option at
    /// its default).
    pub async fn configure_max_size(&self, queue: &str, max_size: u64) -> Result<()> {
        const WHAT: &str = "POST /api/v1/configure";
        let body = serde_json::json!({"queue": queue, "options": {"maxSize": max_size}});
        let resp = self
            .http
            .post(self.url(&["api", "v1", "configure"])?)
            .json(&body)
            .send()
            .await
            .with_context(|| format!("{WHAT}: request failed"))?;
        ensure_success(resp, WHAT).await?;
        Ok(())
    }

    pub async fn delete_queue(&self, queue: &str) -> Result<()> {
        const WHAT: &str = "DELETE /api/v1/resources/queues/{queue}";
        let resp = self
            .http
            .delete(self.url(&["api", "v1", "resources", "queues", queue])?)
            .send()
            .await
            .with_context(|| format!("{WHAT}: request failed"))?;
        ensure_success(resp, WHAT).await?;
        Ok(())
    }
}

/// Turns a non-2xx answer into an error carrying the broker's `error` text.
async fn ensure_success(resp: Response, what: &str) -> Result<Response> {
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let body = resp.bytes().await.unwrap_or_default();
    let detail = serde_json::from_slice::<ErrorBody>(&body)
        .ok()
        .and_then(|e| e.error)
        .unwrap_or_else(|| snippet(&body));
    bail!("{what}: HTTP {status}: {detail}")
}

/// First bytes of a body, for error messages.
fn snippet(body: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(&body[..body.len().min(MAX)]);
    if body.is_empty() {
        "(empty body)".to_owned()
    } else if body.len() > MAX {
        format!("{text}…")
    } else {
        text.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_batch_body_sends_null_consumer_group() {
        let acks = [AckItem {
            transaction_id: "t1",
            partition_id: "p1",
            lease_id: "l1",
            status: "completed",
        }];
        let body = serde_json::to_value(AckBatchRequest {
            consumer_group: None,
            acknowledgments: &acks,
        })
        .unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "consumerGroup": null,
                "acknowledgments": [{
                    "transactionId": "t1", "partitionId": "p1",
                    "leaseId": "l1", "status": "completed"
                }]
            })
        );
    }

    #[test]
    fn ack_batch_response_accepts_array_and_error_object() {
        let items: AckBatchResponse =
            serde_json::from_str(r#"[{"index":0,"success":true,"error":null}]"#).unwrap();
        assert!(matches!(items, AckBatchResponse::Items(v) if v.len() == 1));
        let obj: AckBatchResponse =
            serde_json::from_str(r#"{"success":false,"error":"db down"}"#).unwrap();
        assert!(
            matches!(obj, AckBatchResponse::Object(e) if e.error.as_deref() == Some("db down"))
        );
    }

    #[test]
    fn urls_keep_a_base_path_and_encode_segments() {
        let api = Api::new("http://127.0.0.1:6632", Duration::from_secs(1)).unwrap();
        let url = api.url(&["api", "v1", "pop", "queue", "a b"]).unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:6632/api/v1/pop/queue/a%20b");
        let api = Api::new("http://h:1/prefix/", Duration::from_secs(1)).unwrap();
        let url = api.url(&["health"]).unwrap();
        assert_eq!(url.as_str(), "http://h:1/prefix/health");
    }
}
