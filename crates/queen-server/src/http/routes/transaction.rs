//! `POST /api/v1/transaction`: acks and pushes, all applied or none; with
//! `kv` or `timers` riders see `transaction_riders.rs`. The body is JSON or
//! the binary `QTB1` body of the 2.6 clients: its head is the JSON body
//! without the pushes, which come as frames after it.

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use queen_proto::admin::{TransactionEntry, TransactionResponse};
use queen_proto::push_binary::{self, Kind};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::ack::parse_ack_item;
use super::consumer_group;
use super::push::{binary_items, binary_kind, binary_limits, parse_items};
use crate::app::AppState;
use crate::broker::{PushItem, TxOp};
use crate::http::body::{opt_str, parse_object, read_bytes};
use crate::http::error::ApiError;
use crate::store::{AckStatus, TxOutcome};

pub async fn transaction(
    State(app): State<AppState>,
    caller: Option<axum::Extension<crate::http::auth::Caller>>,
    headers: HeaderMap,
    body: Body,
) -> Result<axum::response::Response, ApiError> {
    let bytes = read_bytes(body, app.broker.config().max_body_bytes).await?;
    let caller = caller.as_ref().map(|e| &e.0);
    match binary_kind(&headers, &bytes)? {
        None => run(&app, caller, &parse_object(&bytes)?, None).await,
        Some(Kind::Transaction) => {
            let max = app.broker.config().limits.max_transaction_operations;
            let body = push_binary::decode_transaction(&bytes, &binary_limits(&app, max))?;
            if body.counts {
                return Err(ApiError::bad_request(
                    "binary body: flags 0x02 (counts) is not supported on a transaction; send 0x00",
                ));
            }
            let head = parse_object(body.head.as_bytes()).map_err(|mut e| {
                e.message = format!("binary body: head: {}", e.message);
                e
            })?;
            let mut pushes = binary_items(body.items);
            super::push::stamp_producer(&mut pushes, caller);
            run(&app, caller, &head, Some(pushes)).await
        }
        Some(Kind::Push) => Err(ApiError::bad_request(
            "a QPB1 body is a push: POST it to /api/v1/push",
        )),
    }
}

/// Runs a transaction body: the JSON one, or the head of a binary one with
/// its `pushes`, which follow the head's operations (client-dataplane-2.6
/// §4.3: the head's operations, then one result per pushed message in wire
/// order, then the riders). A binary head may leave `operations` out or empty.
async fn run(
    app: &AppState,
    caller: Option<&crate::http::auth::Caller>,
    map: &Map<String, Value>,
    pushes: Option<Vec<PushItem>>,
) -> Result<axum::response::Response, ApiError> {
    let riders = match super::transaction_riders::parse(map, caller) {
        Ok(r) => r,
        Err(coded) => return Ok(axum::response::IntoResponse::into_response(coded)),
    };
    let operations: &[Value] = match (map.get("operations"), &pushes) {
        (Some(Value::Array(operations)), _) => operations,
        (None, Some(_)) => &[],
        _ => return Err(ApiError::bad_request("operations array required")),
    };
    if operations.is_empty() && pushes.is_none() && riders.is_none() {
        return Err(ApiError::bad_request("operations array cannot be empty"));
    }
    let limits = &app.broker.config().limits;
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
                let mut items = parse_items(&raw, "{}", limits.max_payload_depth)?;
                super::push::stamp_producer(&mut items, caller);
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
    ops.extend(pushes.into_iter().flatten().map(TxOp::Push));
    if ops.len() > limits.max_transaction_operations {
        return Err(super::push::too_many(
            "transaction operations",
            ops.len(),
            limits.max_transaction_operations,
        ));
    }
    if let Some((kv, timers)) = riders {
        return super::transaction_riders::run(app, ops, kv, timers).await;
    }
    let result = app.broker.transaction(ops).await?;
    let body = render(&result);
    Ok(axum::response::IntoResponse::into_response(Json(body)))
}

/// One push or ack slot of a transaction answer.
pub(super) fn entry(
    index: usize,
    o: &TxOutcome,
    transaction_ids: &[String],
    queues: &[Option<String>],
) -> TransactionEntry {
    match o {
        TxOutcome::Acked(a) => TransactionEntry::Ack {
            index,
            kind: "ack",
            success: a.success,
            transaction_id: transaction_ids[index].clone(),
            error: a.error.clone(),
            dlq: a.dlq,
        },
        TxOutcome::Pushed(p) => TransactionEntry::Push {
            index,
            kind: "push",
            success: true,
            transaction_id: transaction_ids[index].clone(),
            message_id: p.message_id.to_string(),
            partition_id: p.partition_id.to_string(),
            queue_name: queues.get(index).cloned().flatten(),
        },
    }
}

fn render(result: &crate::broker::TxResult) -> TransactionResponse {
    let entries = |done: &[TxOutcome]| -> Vec<TransactionEntry> {
        done.iter()
            .enumerate()
            .map(|(i, o)| entry(i, o, &result.transaction_ids, &result.queues))
            .collect()
    };
    failure_or(
        result.transaction_id,
        &result.transaction_ids,
        result.failure.as_ref(),
        || entries(&result.outcomes),
        entries,
    )
}

/// The answer of a transaction: its entries, or the failure that undid it.
pub(super) fn failure_or(
    transaction_id: uuid::Uuid,
    transaction_ids: &[String],
    failure: Option<&crate::store::TxFailure>,
    ok: impl FnOnce() -> Vec<TransactionEntry>,
    entries: impl Fn(&[TxOutcome]) -> Vec<TransactionEntry>,
) -> TransactionResponse {
    match failure {
        None => TransactionResponse {
            transaction_id: transaction_id.to_string(),
            success: true,
            error: None,
            results: ok(),
        },
        Some(f) => {
            let mut results = entries(&f.done);
            results.push(TransactionEntry::Failed {
                index: f.failed_at,
                success: false,
                transaction_id: transaction_ids.get(f.failed_at).cloned(),
                error: f.message.clone(),
            });
            if let Some(e) = &f.store {
                tracing::warn!(error = %e, "transaction failed");
            }
            TransactionResponse {
                transaction_id: transaction_id.to_string(),
                success: false,
                error: Some(f.message.clone()),
                results,
            }
        }
    }
}
