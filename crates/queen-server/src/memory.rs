//! Giving memory back to the system after bursts of big requests.
//!
//! glibc's allocator keeps what it freed: a 12 MiB body is first `mmap`ed and
//! returned on free, but glibc then raises its mmap threshold to that size, so
//! the next big buffers come from the heap and stay; freed heap pages are only
//! returned from the top of each arena, and there are eight arenas per core.
//! Measured (docs/benchmarks.md, "Memory after big requests"), a run of big pushes left 110 MiB
//! of heap behind. So, with glibc:
//!
//! - [`tune`], at start: a fixed mmap threshold (128 KiB, glibc's initial
//!   one), so big buffers always go back on free, and one arena per core;
//!   each only unless the operator set glibc's own `MALLOC_MMAP_THRESHOLD_` /
//!   `MALLOC_ARENA_MAX`, which then win;
//! - [`run_trim`], every `MEMORY_TRIM_INTERVAL_MS`: `malloc_trim(0)`, which
//!   returns the free pages inside every arena too.
//!
//! The only `unsafe` of the workspace: two calls into glibc, neither of which
//! touches memory of ours.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Trims done since the process started.
static TRIMS: AtomicU64 = AtomicU64::new(0);

/// The mmap threshold [`tune`] fixes: glibc's own initial value.
const MMAP_THRESHOLD: i32 = 128 * 1024;

/// How many trims ran (the job's progress, for tests and diagnostics).
pub fn trims() -> u64 {
    TRIMS.load(Ordering::Relaxed)
}

/// Fixes the allocator's mmap threshold and arena count (see the module
/// documentation); a no-op without glibc. Call once, early.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
        let arenas = i32::try_from(cores).unwrap_or(i32::MAX);
        if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
            // SAFETY: mallopt only sets a parameter of the allocator; any value is accepted or refused
            unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
        }
        if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
            // SAFETY: as above
            unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) };
        }
    }
}

/// Returns the allocator's free pages to the system (glibc); counts the trim.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator; it takes the allocator's locks
    unsafe {
        libc::malloc_trim(0);
    }
    TRIMS.fetch_add(1, Ordering::Relaxed);
}

/// Trims every `interval` until `cancel`; `None` (`MEMORY_TRIM_INTERVAL_MS=0`)
/// never. A trim walks every arena under its lock: it runs on a blocking thread.
pub async fn run_trim(interval: Option<Duration>, cancel: CancellationToken) {
    let Some(interval) = interval else { return };
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {
                let _ = tokio::task::spawn_blocking(trim).await;
            }
            () = cancel.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_trim_job_runs_at_its_interval_and_stops() {
        tune();
        let cancel = CancellationToken::new();
        let before = trims();
        let job = tokio::spawn(run_trim(Some(Duration::from_millis(20)), cancel.clone()));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(trims() >= before + 3, "{} trims", trims() - before);
        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(2), job)
            .await
            .expect("the job stops at cancel")
            .expect("no panic");
        // off: returns at once
        tokio::time::timeout(
            Duration::from_secs(1),
            run_trim(None, CancellationToken::new()),
        )
        .await
        .expect("an unset interval runs nothing");
    }
}
