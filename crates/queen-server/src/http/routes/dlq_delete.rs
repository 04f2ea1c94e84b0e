//! `DELETE /api/v1/dlq/{partitionId}/{transactionId}?consumerGroup=`: removes
//! a message's dead-letter entries (of one group, or of every group).
//! 404 `{"error": "Dead letter not found"}` when there was none.

use axum::extract::{Path, Query, State};
use axum::Json;
use queen_proto::admin::DeadLetterDeleted;

use crate::app::AppState;
use crate::http::body::{path_uuid, query_str, Query as Params};
use crate::http::error::ApiError;

pub async fn delete(
    State(app): State<AppState>,
    Path((partition_id, transaction_id)): Path<(String, String)>,
    Query(q): Query<Params>,
) -> Result<Json<DeadLetterDeleted>, ApiError> {
    let pid = path_uuid(&partition_id, "partitionId")?;
    let group = query_str(&q, "consumerGroup");
    let deleted = app
        .broker
        .delete_dead_letters(pid, &transaction_id, group)
        .await?;
    if deleted == 0 {
        return Err(ApiError::not_found("Dead letter not found"));
    }
    Ok(Json(DeadLetterDeleted {
        success: true,
        partition_id,
        transaction_id,
        consumer_group: group.map(str::to_owned),
        deleted,
    }))
}
