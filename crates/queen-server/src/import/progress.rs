//! Progress on a terminal: queues and partitions done, messages read and
//! their rate (indicatif, on stderr; nothing drawn when stderr is not a
//! terminal or with `--json`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The progress of one run.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    messages: AtomicU64,
    started: Instant,
}

impl Progress {
    /// A bar over `partitions` partitions of `queues` queues; hidden when `quiet`.
    pub fn new(queues: usize, partitions: usize, quiet: bool) -> Self {
        let bar = ProgressBar::with_draw_target(
            Some(partitions as u64),
            if quiet {
                ProgressDrawTarget::hidden()
            } else {
                ProgressDrawTarget::stderr()
            },
        );
        if let Ok(style) = ProgressStyle::with_template(&format!(
            "{{spinner}} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} partitions of {queues} queues, queue {{prefix}}: {{msg}}"
        )) {
            bar.set_style(style);
        }
        Self {
            bar,
            messages: AtomicU64::new(0),
            started: Instant::now(),
        }
    }

    /// `n` more messages read.
    pub fn messages(&self, n: u64) {
        let total = self.messages.fetch_add(n, Ordering::Relaxed) + n;
        let secs = self.started.elapsed().as_secs_f64().max(0.001);
        self.bar.set_message(format!(
            "{total} messages, {:.0} msg/s",
            total as f64 / secs
        ));
    }

    /// One more partition done, of queue `queue`.
    pub fn partition_done(&self, queue: &str) {
        self.bar.inc(1);
        self.bar.set_prefix(queue.to_owned());
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
