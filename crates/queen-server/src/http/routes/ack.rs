//! `POST /api/v1/ack` and `POST /api/v1/ack/batch`: arrays of per-item results.

use axum::body::Body;
use axum::extract::State;
use axum::Json;
use queen_proto::responses::AckResult;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::consumer_group;
use crate::app::AppState;
use crate::broker::AckRequest;
use crate::http::body::{opt_str, opt_uuid, parse_object, read_bytes};
use crate::http::error::ApiError;
use crate::http::record_target;
use crate::store::{AckItem, AckStatus};

/// Reads the fields of one acknowledgement; `messages` are the errors for a
/// missing transactionId and partitionId.
pub fn parse_ack_item(
    map: &Map<String, Value>,
    missing_txn: &str,
    missing_partition: &str,
) -> Result<AckItem, ApiError> {
    let transaction_id = opt_str(map, "transactionId", missing_txn)?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::bad_request(missing_txn))?;
    let partition_id = opt_str(map, "partitionId", missing_partition)?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::bad_request(missing_partition))?;
    let partition_id = Uuid::parse_str(partition_id)
        .map_err(|_| ApiError::bad_request("partitionId must be a valid UUID"))?;
    let status = AckStatus::parse(opt_str(map, "status", "status must be a string")?);
    let error = opt_str(map, "error", "error must be a string")?.map(str::to_owned);
    Ok(AckItem {
        partition_id,
        transaction_id: transaction_id.to_owned(),
        lease_id: opt_uuid(map, "leaseId")?,
        status,
        error,
    })
}

async fn respond(app: &AppState, req: AckRequest) -> Result<Json<Vec<AckResult>>, ApiError> {
    record_target(None, None, Some(req.group.as_str()));
    let outcomes = app.broker.ack(&req).await?;
    Ok(Json(
        outcomes
            .into_iter()
            .map(|o| AckResult {
                index: o.index,
                transaction_id: req.items[o.index].transaction_id.clone(),
                success: o.success,
                error: o.error,
                queue_name: o.queue_name,
                partition_name: o.partition_name,
                lease_released: o.lease_released,
                dlq: o.dlq,
            })
            .collect(),
    ))
}

pub async fn ack(
    State(app): State<AppState>,
    body: Body,
) -> Result<Json<Vec<AckResult>>, ApiError> {
    let map = parse_object(&read_bytes(body, app.broker.config().max_body_bytes).await?)?;
    let item = parse_ack_item(
        &map,
        "transactionId is required",
        "partitionId is required to ensure message uniqueness",
    )?;
    let group = consumer_group(opt_str(
        &map,
        "consumerGroup",
        "consumerGroup must be a string",
    )?)?;
    respond(
        &app,
        AckRequest {
            group,
            items: vec![item],
        },
    )
    .await
}

pub async fn ack_batch(
    State(app): State<AppState>,
    body: Body,
) -> Result<Json<Vec<AckResult>>, ApiError> {
    let map = parse_object(&read_bytes(body, app.broker.config().max_body_bytes).await?)?;
    let Some(Value::Array(acks)) = map.get("acknowledgments") else {
        return Err(ApiError::bad_request("acknowledgments array is required"));
    };
    let group = consumer_group(opt_str(
        &map,
        "consumerGroup",
        "consumerGroup must be a string",
    )?)?;
    let items = acks
        .iter()
        .map(|a| {
            let obj = a
                .as_object()
                .ok_or_else(|| ApiError::bad_request("Each acknowledgment must be an object"))?;
            parse_ack_item(
                obj,
                "Each acknowledgment must have a valid transactionId string",
                "Each acknowledgment must have a valid partitionId string to ensure message uniqueness",
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    respond(&app, AckRequest { group, items }).await
}
