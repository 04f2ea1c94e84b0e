//! Traces: `POST /api/v1/traces` and the three trace readers.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use queen_proto::admin::{
    FailureBody, MessageTraces, NamedTraceEvent, Pagination, TraceCreated, TraceEvent,
    TraceNameCount, TraceNames, TracesByName,
};
use queen_proto::time::format_millis;
use serde_json::Value;
use uuid::Uuid;

use super::consumer_group;
use super::dlq::payload_json;
use crate::app::AppState;
use crate::http::body::{
    opt_str, parse_object, path_uuid, query_page, read_bytes, Query as Params,
};
use crate::http::error::ApiError;
use crate::store::{NewTrace, Trace};

pub async fn create(State(app): State<AppState>, body: Body) -> Result<Response, ApiError> {
    let map = parse_object(&read_bytes(body, app.broker.config().max_body_bytes).await?)?;
    let missing = "transactionId and partitionId are required";
    let transaction_id = opt_str(&map, "transactionId", missing)?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::bad_request(missing))?;
    let partition_id = opt_str(&map, "partitionId", missing)?
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::bad_request(missing))?;
    let partition_id = path_uuid(partition_id, "partitionId")?;
    let data = match map.get("data") {
        None | Some(Value::Null) => return Err(ApiError::bad_request("data is required")),
        Some(d) => d.to_string(),
    };
    let names: Vec<String> = match map.get("traceNames") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| ApiError::bad_request("traceNames must be strings"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ApiError::bad_request(
                "traceNames must be a string or an array",
            ))
        }
    };
    let event_type = opt_str(&map, "eventType", "eventType must be a string")?.unwrap_or("info");
    let group = consumer_group(opt_str(
        &map,
        "consumerGroup",
        "consumerGroup must be a string",
    )?)?;
    let id = Uuid::now_v7();
    let stored = app
        .broker
        .record_trace(&NewTrace {
            id,
            partition_id,
            transaction_id,
            consumer_group: group.as_str(),
            event_type,
            data: &data,
            names: &names,
            worker_id: &app.broker.config().server_id,
        })
        .await?;
    if !stored {
        // the contract's (odd) status for an unknown message; clients ignore trace failures
        return Ok((
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(FailureBody::new("Message not found")),
        )
            .into_response());
    }
    Ok((
        StatusCode::CREATED,
        Json(TraceCreated {
            success: true,
            trace_id: id.to_string(),
        }),
    )
        .into_response())
}

fn trace_event(t: &Trace) -> TraceEvent {
    TraceEvent {
        id: t.id.to_string(),
        event_type: t.event_type.clone(),
        data: serde_json::from_str(&t.data).unwrap_or(Value::Null),
        consumer_group: t.consumer_group.clone(),
        worker_id: t.worker_id.clone(),
        created_at: format_millis(t.created_at),
        trace_names: t.trace_names.clone(),
    }
}

pub async fn of_message(
    State(app): State<AppState>,
    Path((partition_id, transaction_id)): Path<(String, String)>,
) -> Result<Json<MessageTraces>, ApiError> {
    let partition_id = path_uuid(&partition_id, "partitionId")?;
    let traces = app
        .broker
        .traces_of_message(partition_id, &transaction_id)
        .await?;
    Ok(Json(MessageTraces {
        traces: traces.iter().map(trace_event).collect(),
    }))
}

pub async fn by_name(
    State(app): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<Params>,
) -> Result<Json<TracesByName>, ApiError> {
    let (limit, offset) = query_page(&q, 100);
    let (traces, total) = app.broker.traces_by_name(&name, limit, offset).await?;
    let traces = traces
        .into_iter()
        .map(|t| NamedTraceEvent {
            event: trace_event(&t),
            transaction_id: t.transaction_id,
            partition_id: t.partition_id.to_string(),
            queue_name: t.queue,
            partition_name: t.partition,
            message_payload: t.message_payload.map(payload_json),
        })
        .collect();
    Ok(Json(TracesByName {
        traces,
        total,
        pagination: Pagination { limit, offset },
    }))
}

pub async fn names(
    State(app): State<AppState>,
    Query(q): Query<Params>,
) -> Result<Json<TraceNames>, ApiError> {
    let (limit, offset) = query_page(&q, 50);
    let (names, total) = app.broker.trace_names(limit, offset).await?;
    Ok(Json(TraceNames {
        trace_names: names
            .into_iter()
            .map(|n| TraceNameCount {
                trace_name: n.name,
                trace_count: n.trace_count,
                message_count: n.message_count,
                last_seen: format_millis(n.last_seen),
            })
            .collect(),
        total,
        pagination: Pagination { limit, offset },
    }))
}
