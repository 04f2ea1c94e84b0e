//! Bodies of `/api/v1/migration/*` (docs/http-api.md, "Database migration").

use serde::Serialize;

/// `POST /api/v1/migration/test-connection`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionTested {
    pub success: bool,
    pub message: String,
    pub version: String,
}

/// `POST /api/v1/migration/start` and `/reset`.
#[derive(Debug, Clone, Serialize)]
pub struct MigrationAck {
    pub status: &'static str,
    pub message: String,
}

/// `GET /api/v1/migration/status`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationStatus {
    pub status: &'static str,
    pub current_step: String,
    pub elapsed_seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dump_output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restore_output: Option<String>,
}

/// One table of `POST /api/v1/migration/validate`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TableMatch {
    pub table: String,
    pub source_count: i64,
    /// `null` when the table is missing on the target.
    pub target_count: Option<i64>,
    #[serde(rename = "match")]
    pub matches: bool,
    /// Its rows were skipped on purpose (`excludeTableData`); not counted in `allMatch`.
    pub excluded: bool,
}

/// `POST /api/v1/migration/validate`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Validation {
    pub success: bool,
    pub all_match: bool,
    pub tables: Vec<TableMatch>,
}
