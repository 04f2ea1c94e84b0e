//! `GET /api/v1/dlq`: dead letters with filters, pagination and a total.

use axum::extract::{Query, State};
use axum::Json;
use queen_proto::admin::{DeadLetterMessage, DeadLetters, Pagination};
use queen_proto::time::format_millis;
use serde_json::value::RawValue;

use crate::app::AppState;
use crate::http::body::{query_page, query_str, query_time, Query as Params};
use crate::http::error::ApiError;
use crate::store::DeadLetterFilter;

/// Parses stored payload text back into JSON for an answer. Text that is
/// not JSON (written by hand, or before pushes were checked) is answered as
/// `null`, so that one bad row cannot fail a whole listing or pop.
pub fn payload_json(text: String) -> Box<RawValue> {
    RawValue::from_string(text).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "stored payload is not JSON; answered as null");
        RawValue::NULL.to_owned()
    })
}

/// [`payload_json`] without the copy: the stored text itself when it is
/// JSON (surrounding whitespace left out, as `payload_json` does), else `null`.
pub fn payload_raw(text: &str) -> &RawValue {
    serde_json::from_str::<&RawValue>(text).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "stored payload is not JSON; answered as null");
        RawValue::NULL
    })
}

pub async fn list(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<DeadLetters>, ApiError> {
    let (limit, offset) = query_page(&q, 100);
    let filter = DeadLetterFilter {
        queue: query_str(&q, "queue").map(str::to_owned),
        consumer_group: query_str(&q, "consumerGroup").map(str::to_owned),
        partition: query_str(&q, "partition").map(str::to_owned),
        from: query_time(&q, "from")?,
        to: query_time(&q, "to")?,
        limit,
        offset,
    };
    let (entries, total) = app.broker.dead_letters(&filter).await?;
    let messages = entries
        .into_iter()
        .map(|d| DeadLetterMessage {
            id: d.message_id.to_string(),
            transaction_id: d.transaction_id,
            partition_id: d.partition_id.to_string(),
            queue: d.queue,
            partition: d.partition,
            consumer_group: d.consumer_group,
            error_message: d.error_message,
            retry_count: d.retry_count,
            data: payload_json(d.payload),
            producer_sub: d.producer_sub,
            created_at: format_millis(d.created_at),
            failed_at: format_millis(d.failed_at),
        })
        .collect();
    Ok(Json(DeadLetters {
        messages,
        pagination: Pagination { limit, offset },
        total,
    }))
}
