//! Process and machine counters read from `/proc` (Linux only).
//!
//! CPU times come from `/proc/<pid>/stat` (utime + stime, in clock ticks),
//! memory from `/proc/<pid>/status` (`VmRSS`, `VmHWM`). PostgreSQL's CPU is the
//! sum over the `postgres` processes that work for the measured database, plus
//! what its children that exited meanwhile spent (the postmaster's cutime +
//! cstime): a broker that closes and reopens connections leaves no process
//! behind for the work its closed ones did.

use std::collections::HashMap;
use std::fs;
use std::sync::OnceLock;

/// Clock ticks per second (`getconf CLK_TCK`; 100 on every common Linux build).
pub fn clk_tck() -> f64 {
    static TCK: OnceLock<f64> = OnceLock::new();
    *TCK.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|v| *v > 0.0)
            .unwrap_or(100.0)
    })
}

/// utime + stime of a process in seconds; `None` when it is gone.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu_ticks(&stat).map(|t| t as f64 / clk_tck())
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    stat_field_pair(stat, 14)
}

/// cutime + cstime (fields 16 and 17): what the process's children that
/// exited and were waited for spent, in ticks.
pub fn parse_stat_children_ticks(stat: &str) -> Option<u64> {
    stat_field_pair(stat, 16)
}

/// The sum of fields `first` and `first + 1` (numbered from 1, as in
/// proc(5)). The command name (field 2) may contain spaces and parentheses,
/// so fields are counted after the last `)`, where field 3 begins.
fn stat_field_pair(stat: &str, first: usize) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let a: u64 = fields.nth(first - 3)?.parse().ok()?;
    let b: u64 = fields.next()?.parse().ok()?;
    Some(a + b)
}

/// Resident set size and its high-water mark in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    pub rss: u64,
    pub hwm: u64,
}

pub fn memory(pid: u32) -> Option<Memory> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(parse_status_memory(&status))
}

pub fn parse_status_memory(status: &str) -> Memory {
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |v| v * 1024)
    };
    Memory {
        rss: kb("VmRSS:"),
        hwm: kb("VmHWM:"),
    }
}

/// Resets `VmHWM` to the current RSS (`echo 5 > /proc/<pid>/clear_refs`), so a
/// scenario's peak is its own. Needs to own the process (or root); best effort.
pub fn reset_peak_rss(pid: u32) -> bool {
    fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// The pids of the live processes whose `comm` is `comm` (e.g. `beam.smp`).
pub fn pids_named(comm: &str) -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == comm)
        })
        .collect()
}

/// CPU ticks of the live `postgres` processes that work for `db`, by pid:
/// the server's shared background processes (WAL writer, checkpointer, ...)
/// and the backends and autovacuum workers of `db`, but not backends of other
/// databases (other work on a shared server). `None` counts every process.
pub fn postgres_ticks(db: Option<&str>) -> HashMap<u32, u64> {
    let mut out = HashMap::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let is_pg = stat
            .find('(')
            .zip(stat.rfind(')'))
            .is_some_and(|(a, b)| stat[a + 1..b].starts_with("postgres"));
        if !is_pg {
            continue;
        }
        let title = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if db.is_some_and(|db| !serves(&String::from_utf8_lossy(&title), db)) {
            continue;
        }
        // the postmaster's title is its command line; its children's are "postgres: ..."
        let children = if title.starts_with(b"postgres:") {
            Some(0)
        } else {
            parse_stat_children_ticks(&stat)
        };
        if let Some(t) = parse_stat_cpu_ticks(&stat).zip(children) {
            out.insert(pid, t.0 + t.1);
        }
    }
    out
}

/// Whether a postgres process title belongs to `db`'s work: a backend
/// (`postgres: 15/main: user db 127.0.0.1(5000) idle`) or autovacuum worker
/// of `db`, or a shared background process.
pub fn serves(title: &str, db: &str) -> bool {
    let words: Vec<&str> = title.split_whitespace().collect();
    let is_backend = words
        .iter()
        .any(|w| w.contains('(') && w.ends_with(')') || *w == "[local]");
    let is_av_worker = title.contains("autovacuum worker");
    if is_backend || is_av_worker {
        words.contains(&db)
    } else {
        true
    }
}

/// CPU seconds PostgreSQL spent between two [`postgres_ticks`] snapshots. A
/// process that exited in between is in the postmaster's children's time with
/// its whole life, so what it had spent by the first snapshot comes off. (The
/// short-lived backends of other databases that exited count too: on a shared
/// server, a few milliseconds each.)
pub fn postgres_cpu_between(before: &HashMap<u32, u64>, after: &HashMap<u32, u64>) -> f64 {
    let grown: u64 = after
        .iter()
        .map(|(pid, t)| t.saturating_sub(before.get(pid).copied().unwrap_or(0)))
        .sum();
    let gone: u64 = before
        .iter()
        .filter(|(pid, _)| !after.contains_key(pid))
        .map(|(_, t)| *t)
        .sum();
    grown.saturating_sub(gone) as f64 / clk_tck()
}

/// Whole-machine CPU from the first line of `/proc/stat`: (busy, total) ticks.
pub fn machine_ticks() -> Option<(u64, u64)> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    parse_machine_ticks(stat.lines().next()?)
}

pub fn parse_machine_ticks(line: &str) -> Option<(u64, u64)> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = fields.filter_map(|f| f.parse().ok()).collect();
    if v.len() < 5 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest is inside user)
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v[4];
    Some((total - idle, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_cpu_fields_after_a_tricky_comm() {
        let line = "1234 (a b) c) S 1 1 1 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 1 1 1";
        assert_eq!(parse_stat_cpu_ticks(line), Some(300));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
        // cutime 7, cstime 3
        let line = "1234 (a b) c) S 1 1 1 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 8 0 1 1 1";
        assert_eq!(parse_stat_children_ticks(line), Some(10));
    }

    #[test]
    fn an_exited_backend_counts_once_through_the_postmaster() {
        // postmaster 1 (own 5 + children 100), backends 2 and 3 live
        let before = HashMap::from([(1, 105), (2, 40), (3, 10)]);
        // backend 2 exited at 70 ticks in all: the postmaster's children grew by 70
        let after = HashMap::from([(1, 175), (3, 30)]);
        // 2 spent 30 in between, 3 spent 20, the postmaster nothing of its own
        assert_eq!(postgres_cpu_between(&before, &after) * clk_tck(), 50.0);
    }

    #[test]
    fn status_memory_in_bytes() {
        let m = parse_status_memory("Name:\tx\nVmHWM:\t   2048 kB\nVmRSS:\t    1024 kB\n");
        assert_eq!(m.rss, 1024 * 1024);
        assert_eq!(m.hwm, 2048 * 1024);
        assert_eq!(parse_status_memory("").rss, 0);
    }

    #[test]
    fn process_titles_by_database() {
        let b = "postgres: 15/main: postgres mydb 127.0.0.1(5000) idle";
        assert!(serves(b, "mydb"));
        assert!(!serves(b, "other"));
        assert!(serves("postgres: 15/main: walwriter ", "mydb"));
        assert!(serves("postgres: 15/main: autovacuum worker mydb", "mydb"));
        assert!(!serves("postgres: 15/main: autovacuum worker x", "mydb"));
    }

    #[test]
    fn machine_line() {
        let (busy, total) = parse_machine_ticks("cpu  10 0 5 80 5 0 0 0 0 0").unwrap();
        assert_eq!((busy, total), (15, 100));
        assert!(parse_machine_ticks("cpu0 1 2 3 4 5").is_none());
    }

    #[test]
    fn own_process_is_found_by_name() {
        let me = fs::read_to_string("/proc/self/comm").unwrap();
        assert!(pids_named(me.trim_end()).contains(&std::process::id()));
        assert!(pids_named("no-such-process-name").is_empty());
    }

    #[test]
    fn own_process_is_readable() {
        let pid = std::process::id();
        assert!(cpu_seconds(pid).is_some());
        assert!(memory(pid).is_some_and(|m| m.rss > 0));
    }
}
