//! The dashboard: the static files of `dashboard/` at the repository root,
//! compiled into the binary (feature `dashboard`, on by default).
//! `GET /` and `GET /dashboard` serve the page, `GET /assets/<file>` its
//! scripts and stylesheet; it reads the API v1 from the browser, with the
//! token the user types when JWT auth is on.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::app::AppState;

const INDEX: &str = include_str!("../../../../dashboard/index.html");

const JS: &str = "text/javascript; charset=utf-8";

/// The files under `/assets/`: name, content type, content.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "chart.js",
        JS,
        include_str!("../../../../dashboard/chart.js"),
    ),
    ("lib.js", JS, include_str!("../../../../dashboard/lib.js")),
    (
        "views.js",
        JS,
        include_str!("../../../../dashboard/views.js"),
    ),
    (
        "actions.js",
        JS,
        include_str!("../../../../dashboard/actions.js"),
    ),
    (
        "system.js",
        JS,
        include_str!("../../../../dashboard/system.js"),
    ),
    (
        "stores.js",
        JS,
        include_str!("../../../../dashboard/stores.js"),
    ),
    ("app.js", JS, include_str!("../../../../dashboard/app.js")),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../../../dashboard/style.css"),
    ),
];

/// The dashboard's routes, all public (non-API `GET`s).
pub fn routes() -> Router<AppState> {
    let mut router = Router::new()
        .route("/", get(index))
        .route("/dashboard", get(index));
    for &(name, content_type, body) in ASSETS {
        router = router.route(
            &format!("/assets/{name}"),
            get(move || async move { ([(header::CONTENT_TYPE, content_type)], body) }),
        );
    }
    router
}

async fn index() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every script the page loads is served, and every served file is used.
    #[test]
    fn the_page_loads_exactly_the_served_assets() {
        let loaded: Vec<&str> = INDEX
            .split("/assets/")
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap_or(""))
            .collect();
        let mut served: Vec<&str> = ASSETS.iter().map(|a| a.0).collect();
        let mut sorted = loaded.clone();
        sorted.sort_unstable();
        served.sort_unstable();
        assert_eq!(sorted, served);
    }
}
