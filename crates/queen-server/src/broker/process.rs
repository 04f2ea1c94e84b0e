//! This process's CPU time and thread count from `/proc/self/stat` (in
//! USER_HZ, 100 per second on Linux whatever the kernel's own tick), for the
//! System view and the per-replica health rows; zeros where `/proc` is absent.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Clock ticks per second of `/proc/<pid>/stat`'s times (the kernel's
/// USER_HZ, fixed at 100 for user space).
const USER_HZ: f64 = 100.0;

/// CPU seconds (user, system) and threads of this process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    pub user_seconds: f64,
    pub system_seconds: f64,
    pub threads: u64,
}

impl CpuTimes {
    pub fn total(&self) -> f64 {
        self.user_seconds + self.system_seconds
    }
}

/// Parses the text of `/proc/<pid>/stat`: the fields after the command name
/// (which may hold spaces and parentheses, so the last `)` ends it).
pub fn parse_stat(stat: &str) -> Option<CpuTimes> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime 15, num_threads 20
    let num = |field: usize| fields.get(field - 3)?.parse::<u64>().ok();
    Some(CpuTimes {
        user_seconds: num(14)? as f64 / USER_HZ,
        system_seconds: num(15)? as f64 / USER_HZ,
        threads: num(20)?,
    })
}

/// This process's CPU times now.
pub fn cpu_times() -> CpuTimes {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| parse_stat(&s))
        .unwrap_or_default()
}

/// CPU use between reads: each [`CpuMeter::percent`] answers the share of
/// one core used since the previous read that is at least `min_gap` old
/// (100 = one core busy); the first read answers the average over the
/// process's life.
#[derive(Debug, Default)]
pub struct CpuMeter {
    last: Mutex<Option<(Instant, f64, f64)>>,
}

impl CpuMeter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Percent of one core since the previous read (see the type);
    /// `uptime_secs` is the process's age, for the first read.
    pub fn percent(&self, now: CpuTimes, uptime_secs: f64, min_gap: Duration) -> f64 {
        let at = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let (used, wall) = match *last {
            Some((_, _, answered)) if last.is_some_and(|l| at.duration_since(l.0) < min_gap) => {
                return answered;
            }
            Some((then, cpu_then, _)) => (
                now.total() - cpu_then,
                at.duration_since(then).as_secs_f64(),
            ),
            None => (now.total(), uptime_secs),
        };
        let percent = (used.max(0.0) / wall.max(1e-3) * 1000.0).round() / 10.0;
        *last = Some((at, now.total(), percent));
        percent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_times_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (queen (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 75 0 0 20 0 17 0 123 456 789";
        let t = parse_stat(stat).expect("parsed");
        assert_eq!(t.user_seconds, 2.5);
        assert_eq!(t.system_seconds, 0.75);
        assert_eq!(t.threads, 17);
        assert_eq!(parse_stat("4242 (queen) S 1 2"), None);
    }

    #[test]
    fn this_process_has_spent_cpu_and_runs_threads() {
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert_ne!(x, 1);
        let t = cpu_times();
        assert!(t.threads >= 1, "{t:?}");
        assert!(t.total() > 0.0, "{t:?}");
        let meter = CpuMeter::new();
        // the first read: the lifetime average (here over a pretended second)
        let p = meter.percent(t, 1.0, Duration::from_millis(500));
        assert!(
            (p - (t.total() * 1000.0).round() / 10.0).abs() < 1e-9,
            "{p} {t:?}"
        );
        // a second read within the gap answers the same figure
        assert_eq!(meter.percent(cpu_times(), 1.0, Duration::from_secs(60)), p);
        // past the gap: what was used since, over the wall time since
        let later = CpuTimes {
            user_seconds: t.user_seconds + 0.5,
            ..t
        };
        std::thread::sleep(Duration::from_millis(20));
        let busy = meter.percent(later, 1.0, Duration::from_millis(10));
        assert!(busy > 100.0, "0.5 s of CPU in about 20 ms: {busy}");
    }
}
