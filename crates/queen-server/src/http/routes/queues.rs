//! `POST /api/v1/configure` and `DELETE /api/v1/resources/queues/:queue`.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::Json;
use queen_proto::admin::{Configured, QueueDeleted};
use queen_proto::QueueOptions;
use serde_json::{Map, Value};

use super::queue_name;
use crate::app::AppState;
use crate::http::body::{opt_str, parse_object, read_bytes};
use crate::http::error::ApiError;
use crate::http::limits::{check_text, MAX_NAME_CHARS};
use crate::http::record_target;

pub async fn configure(
    State(app): State<AppState>,
    body: Body,
) -> Result<Json<Configured>, ApiError> {
    let map = parse_object(&read_bytes(body, app.broker.config().max_body_bytes).await?)?;
    let queue = opt_str(&map, "queue", "queue is required")?
        .ok_or_else(|| ApiError::bad_request("queue is required"))?;
    let queue = queue_name(queue)?;
    record_target(Some(queue.as_str()), None, None);
    let namespace = opt_str(&map, "namespace", "namespace must be a string")?.unwrap_or("");
    let task = opt_str(&map, "task", "task must be a string")?.unwrap_or("");
    check_text("namespace", namespace, MAX_NAME_CHARS)?;
    check_text("task", task, MAX_NAME_CHARS)?;
    let empty = Map::new();
    let options = match map.get("options") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(o)) => o,
        Some(_) => return Err(ApiError::bad_request("options must be an object")),
    };
    let options =
        QueueOptions::from_json(options).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let (row, partition_id) = app
        .broker
        .configure(&queue, namespace, task, &options)
        .await?;
    Ok(Json(Configured {
        configured: true,
        queue_id: row.id.to_string(),
        partition_id: partition_id.to_string(),
        queue: row.name,
        namespace: row.namespace,
        task: row.task,
        options: row.options,
    }))
}

pub async fn delete_queue(
    State(app): State<AppState>,
    Path(queue): Path<String>,
) -> Result<Json<QueueDeleted>, ApiError> {
    let name = queue_name(&queue)?;
    record_target(Some(name.as_str()), None, None);
    let existed = app.broker.delete_queue(&name).await?;
    Ok(Json(QueueDeleted {
        deleted: true,
        queue,
        existed,
    }))
}
