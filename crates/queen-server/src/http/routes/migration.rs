//! `/api/v1/migration/*` (admin only): copy this broker's database to another
//! PostgreSQL (`crate::dbcopy`). Bodies name the target as `{host, port,
//! database, user, password, ssl}`; the password is never logged nor echoed.

use axum::body::Body;
use axum::extract::State;
use axum::Json;
use queen_proto::migration::{
    ConnectionTested, MigrationAck, MigrationStatus, TableMatch, Validation,
};
use serde_json::{Map, Value};

use crate::app::AppState;
use crate::dbcopy::{self, CopyError, Request};
use crate::http::body::{parse_object, read_bytes};
use crate::http::error::ApiError;
use crate::store::dbcopy::PgEndpoint;

/// Longest host, database, user or schema name accepted.
const MAX_NAME: usize = 255;

impl From<CopyError> for ApiError {
    fn from(e: CopyError) -> Self {
        match e {
            CopyError::Busy => ApiError::conflict(e.to_string()),
            CopyError::NoTarget => ApiError::bad_request(e.to_string()),
            CopyError::Store(s) => target_error(s),
        }
    }
}

/// A failure to reach or read the target is the caller's input: 400 with
/// the driver's text (which carries no password).
fn target_error(e: crate::store::StoreError) -> ApiError {
    ApiError::bad_request(format!("Connection failed: {e}"))
}

async fn object(app: &AppState, body: Body) -> Result<Map<String, Value>, ApiError> {
    let bytes = read_bytes(body, app.broker.config().max_body_bytes).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    parse_object(&bytes)
}

fn name(map: &Map<String, Value>, key: &str, required: bool) -> Result<Option<String>, ApiError> {
    match map.get(key) {
        None | Some(Value::Null) if !required => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => {
            if s.len() > MAX_NAME || s.contains('\0') || s.starts_with('-') {
                return Err(ApiError::bad_request(format!("{key} is not a valid name")));
            }
            Ok(Some(s.clone()))
        }
        _ => Err(ApiError::bad_request(format!(
            "{key} (non-empty string) is required"
        ))),
    }
}

/// The target of a body, or `None` when the body names no host.
fn endpoint(map: &Map<String, Value>, required: bool) -> Result<Option<PgEndpoint>, ApiError> {
    if !required && !map.contains_key("host") {
        return Ok(None);
    }
    let host = name(map, "host", true)?.unwrap_or_default();
    let port = match map.get("port") {
        None | Some(Value::Null) => 5432,
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p > 0)
            .ok_or_else(|| ApiError::bad_request("port must be 1..65535"))?,
        Some(Value::String(s)) => s
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| ApiError::bad_request("port must be 1..65535"))?,
        _ => return Err(ApiError::bad_request("port must be 1..65535")),
    };
    let database = name(map, "database", true)?.unwrap_or_default();
    let user = name(map, "user", true)?.unwrap_or_default();
    let password = match map.get("password") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.contains('\0') => {
            return Err(ApiError::bad_request("password is not valid"))
        }
        Some(Value::String(s)) => Some(s.clone()),
        _ => return Err(ApiError::bad_request("password must be a string")),
    };
    let ssl = match map.get("ssl") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        _ => return Err(ApiError::bad_request("ssl must be a boolean")),
    };
    Ok(Some(PgEndpoint {
        host,
        port,
        database,
        user,
        password,
        ssl,
    }))
}

fn schema(map: &Map<String, Value>) -> Result<Option<String>, ApiError> {
    let s = name(map, "schema", false)?;
    if let Some(s) = &s {
        if !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(ApiError::bad_request(
                "schema must be letters, digits and _",
            ));
        }
    }
    Ok(s)
}

pub async fn test_connection(
    State(app): State<AppState>,
    body: Body,
) -> Result<Json<ConnectionTested>, ApiError> {
    let map = object(&app, body).await?;
    let target = endpoint(&map, true)?.expect("required");
    let version = dbcopy::test_connection(&app.broker.config().db, &target)
        .await
        .map_err(target_error)?;
    Ok(Json(ConnectionTested {
        success: true,
        message: format!(
            "Connected to {}:{}/{}",
            target.host, target.port, target.database
        ),
        version,
    }))
}

pub async fn start(
    State(app): State<AppState>,
    body: Body,
) -> Result<Json<MigrationAck>, ApiError> {
    let map = object(&app, body).await?;
    let target = endpoint(&map, true)?.expect("required");
    let schema = schema(&map)?.unwrap_or_else(|| "queen".to_owned());
    let exclude_table_data = match map.get("excludeTableData") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for v in items {
                match v.as_str() {
                    Some(t)
                        if !t.is_empty()
                            && t.len() <= MAX_NAME
                            && t.chars()
                                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') =>
                    {
                        out.push(t.to_owned())
                    }
                    _ => {
                        return Err(ApiError::bad_request(
                            "excludeTableData must list table names",
                        ))
                    }
                }
            }
            out
        }
        _ => {
            return Err(ApiError::bad_request(
                "excludeTableData must list table names",
            ))
        }
    };
    // refuse an unreachable target before anything starts
    dbcopy::test_connection(&app.broker.config().db, &target)
        .await
        .map_err(target_error)?;
    let message = format!(
        "Migration of schema {schema} to {}:{}/{} started",
        target.host, target.port, target.database
    );
    app.broker
        .start_db_copy(
            &app.db_copy,
            Request {
                target,
                schema,
                exclude_table_data,
            },
        )
        .await?;
    Ok(Json(MigrationAck {
        status: "started",
        message,
    }))
}

pub async fn status(State(app): State<AppState>) -> Json<MigrationStatus> {
    let s = app.db_copy.status();
    Json(MigrationStatus {
        status: s.phase.as_str(),
        current_step: s.current_step,
        elapsed_seconds: s.elapsed_seconds,
        error: s.error,
        dump_output: s.dump_output,
        restore_output: s.restore_output,
    })
}

pub async fn validate(
    State(app): State<AppState>,
    body: Body,
) -> Result<Json<Validation>, ApiError> {
    let map = object(&app, body).await?;
    let target = endpoint(&map, false)?;
    let schema = schema(&map)?;
    let counts = app
        .broker
        .validate_db_copy(&app.db_copy, target, schema)
        .await?;
    let tables: Vec<TableMatch> = counts
        .into_iter()
        .map(|t| TableMatch {
            matches: t.target == Some(t.source),
            table: t.table,
            source_count: t.source,
            target_count: t.target,
            excluded: t.excluded,
        })
        .collect();
    Ok(Json(Validation {
        success: true,
        all_match: tables.iter().all(|t| t.matches || t.excluded),
        tables,
    }))
}

pub async fn reset(State(app): State<AppState>) -> Result<Json<MigrationAck>, ApiError> {
    app.db_copy.reset()?;
    Ok(Json(MigrationAck {
        status: "idle",
        message: "Migration state reset".to_owned(),
    }))
}
