//! Shared state handed to every request handler.

use std::sync::Arc;

use crate::broker::Broker;

/// What every handler sees.
#[derive(Debug)]
pub struct App {
    pub broker: Arc<Broker>,
}

/// The axum state: a cheap clone of the shared [`App`].
pub type AppState = Arc<App>;
