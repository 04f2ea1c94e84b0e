//! `POST /api/v1/transaction`: acks and pushes, all applied or none.

use axum::body::Body;
use axum::extract::State;
use axum::Json;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::ack::parse_ack_item;
use super::consumer_group;
use super::push::parse_items;
use crate::app::AppState;
use crate::broker::TxOp;
use crate::http::body::{opt_str, parse_object, read_bytes};
use crate::http::error::ApiError;
use crate::store::{AckStatus, TxOutcome};

pub async fn transaction(
    State(app): State<AppState>,
    caller: Option<axum::Extension<crate::http::auth::Caller>>,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let map = parse_object(&read_bytes(body, app.broker.config().max_body_bytes).await?)?;
    if map.contains_key("kv") || map.contains_key("timers") {
        return Err(ApiError::bad_request(
            "kv/timers operations are not supported",
        ));
    }
    let Some(Value::Array(operations)) = map.get("operations") else {
        return Err(ApiError::bad_request("operations array required"));
    };
    if operations.is_empty() {
        return Err(ApiError::bad_request("operations array cannot be empty"));
    }
    let mut ops = Vec::new();
    for op in operations {
        let op = op
            .as_object()
            .ok_or_else(|| ApiError::bad_request("Each operation must be an object"))?;
        match opt_str(op, "type", "operation type must be a string")? {
            Some("push") => {
                let items = op.get("items").cloned().unwrap_or(Value::Null);
                let raw = RawValue::from_string(items.to_string())
                    .map_err(|e| ApiError::bad_request(format!("Invalid JSON: {e}")))?;
                let mut items = parse_items(&raw, "{}")?;
                super::push::stamp_producer(&mut items, caller.as_ref().map(|e| &e.0));
                ops.extend(items.into_iter().map(TxOp::Push));
            }
            Some("ack") => {
                let item = parse_ack_item(
                    op,
                    "transactionId is required",
                    "partitionId is required to ensure message uniqueness",
                )?;
                if !matches!(
                    item.status,
                    AckStatus::Completed | AckStatus::Failed | AckStatus::Dlq
                ) {
                    return Err(ApiError::bad_request(format!(
                        "Invalid ack status in transaction: {}",
                        item.status
                    )));
                }
                let group = consumer_group(opt_str(
                    op,
                    "consumerGroup",
                    "consumerGroup must be a string",
                )?)?;
                ops.push(TxOp::Ack { group, item });
            }
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "Unknown operation type: {other}"
                )))
            }
            None => return Err(ApiError::bad_request("Unknown operation type: none")),
        }
    }
    let result = app.broker.transaction(ops).await?;
    let entry = |index: usize, o: &TxOutcome| match o {
        TxOutcome::Acked(a) => json!({
            "index": index, "type": "ack", "success": a.success,
            "transactionId": result.transaction_ids[index], "error": a.error, "dlq": a.dlq,
        }),
        TxOutcome::Pushed(p) => json!({
            "index": index, "type": "push", "success": true,
            "transactionId": result.transaction_ids[index],
            "messageId": p.message_id.to_string(), "partitionId": p.partition_id.to_string(),
            "queueName": result.queues.get(index).cloned().flatten(),
        }),
    };
    match &result.failure {
        None => Ok(Json(json!({
            "transactionId": result.transaction_id.to_string(),
            "success": true,
            "results": result.outcomes.iter().enumerate().map(|(i, o)| entry(i, o)).collect::<Vec<_>>(),
        }))),
        Some(f) => {
            let mut results: Vec<Value> = f
                .done
                .iter()
                .enumerate()
                .map(|(i, o)| entry(i, o))
                .collect();
            results.push(json!({
                "index": f.failed_at, "success": false,
                "transactionId": result.transaction_ids.get(f.failed_at), "error": f.message,
            }));
            if let Some(e) = &f.store {
                tracing::warn!(error = %e, "transaction failed");
            }
            Ok(Json(json!({
                "transactionId": result.transaction_id.to_string(),
                "success": false,
                "error": f.message,
                "results": results,
            })))
        }
    }
}
