//! The dashboard: four static files from `dashboard/` at the repository
//! root, compiled into the binary (feature `dashboard`, on by default).
//! `GET /` and `GET /dashboard` serve the page; it reads the API v1 from the
//! browser, with the token the user types when JWT auth is on.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::app::AppState;

const INDEX: &str = include_str!("../../../../dashboard/index.html");
const APP_JS: &str = include_str!("../../../../dashboard/app.js");
const CHART_JS: &str = include_str!("../../../../dashboard/chart.js");
const STYLE: &str = include_str!("../../../../dashboard/style.css");

/// The dashboard's routes, all public (non-API `GET`s).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/dashboard", get(index))
        .route("/assets/app.js", get(app_js))
        .route("/assets/chart.js", get(chart_js))
        .route("/assets/style.css", get(style))
}

async fn index() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX)
}

async fn app_js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        APP_JS,
    )
}

async fn chart_js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        CHART_JS,
    )
}

async fn style() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE)
}
