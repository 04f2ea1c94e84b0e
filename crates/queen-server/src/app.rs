//! Shared state handed to every request handler.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::broker::Broker;

/// What every handler sees.
#[derive(Debug)]
pub struct App {
    pub broker: Arc<Broker>,
    /// The database copy of `/api/v1/migration/*`.
    pub db_copy: Arc<crate::dbcopy::DbCopy>,
    /// Where the process is between start and exit.
    pub lifecycle: Lifecycle,
}

/// The axum state: a cheap clone of the shared [`App`].
pub type AppState = Arc<App>;

/// Whether the broker is draining: set once, at the stop signal, by `run`.
/// While it is, `/health` answers 503 `draining` (the load balancer takes the
/// broker out of rotation) and every answer carries `Connection: close`
/// (clients open their next connection elsewhere), but every route still
/// serves.
#[derive(Debug, Default)]
pub struct Lifecycle {
    draining: AtomicBool,
}

impl Lifecycle {
    /// Enters the drain; there is no way back.
    pub fn begin_drain(&self) {
        self.draining.store(true, Ordering::Release);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }
}

/// The status word of `/health` and of the readiness gate's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// The schema is not known to be migrated yet: nothing but `/health` and
    /// the metrics is served.
    Starting,
    /// Serving.
    Ready,
    /// Stopping: serving until the drain ends.
    Draining,
}

impl App {
    /// Where the broker is: draining wins over starting.
    pub fn readiness(&self) -> Readiness {
        if self.lifecycle.is_draining() {
            Readiness::Draining
        } else if !self.broker.schema_ready() {
            Readiness::Starting
        } else {
            Readiness::Ready
        }
    }
}
