//! Shared state handed to every request handler.

use std::sync::Arc;

use crate::broker::Broker;

/// What every handler sees.
#[derive(Debug)]
pub struct App {
    pub broker: Arc<Broker>,
    /// The database copy of `/api/v1/migration/*`.
    pub db_copy: Arc<crate::dbcopy::DbCopy>,
}

/// The axum state: a cheap clone of the shared [`App`].
pub type AppState = Arc<App>;
