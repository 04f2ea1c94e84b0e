//! Every replica adds its activity counts to PostgreSQL (`Broker::flush_activity`):
//! every `STATS_INTERVAL_MS`, and just after each minute turns, so a scrape
//! early in a minute already finds the whole of the last one. The final
//! flush of a stopping broker is in `lib.rs`, after its last request.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;

use crate::broker::Broker;

/// After a minute turns, the flush waits this long so that requests counted
/// in the last instant of the minute are in.
const AFTER_MINUTE: Duration = Duration::from_millis(250);

/// The shortest pause between flushes, whatever `STATS_INTERVAL_MS` says.
const MIN_PERIOD: Duration = Duration::from_millis(100);

pub(super) async fn run(broker: Arc<Broker>, cancel: CancellationToken) {
    loop {
        let period = broker.config().jobs.stats_interval.max(MIN_PERIOD);
        tokio::select! {
            _ = tokio::time::sleep(period.min(until_next_minute(SystemTime::now()))) => {}
            _ = cancel.cancelled() => return,
        }
        if !broker.schema_ready() {
            continue;
        }
        if let Err(e) = broker.flush_activity().await {
            tracing::debug!(error = %e, "flushing the activity counts failed");
        }
    }
}

/// Time from `now` until [`AFTER_MINUTE`] past the next minute.
fn until_next_minute(now: SystemTime) -> Duration {
    let into = now
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis()
        % 60_000;
    Duration::from_millis(u64::try_from(60_000 - into).unwrap_or(0)) + AFTER_MINUTE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flush_after_a_minute_comes_just_after_it_turns() {
        let at = |ms: u64| UNIX_EPOCH + Duration::from_millis(ms);
        assert_eq!(
            until_next_minute(at(120_000)),
            Duration::from_millis(60_250)
        );
        assert_eq!(until_next_minute(at(179_900)), Duration::from_millis(350));
        assert_eq!(
            until_next_minute(at(150_000)),
            Duration::from_millis(30_250)
        );
    }
}
