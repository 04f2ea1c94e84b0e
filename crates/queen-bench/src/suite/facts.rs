//! Facts about the machine and the build, recorded in the report.

use crate::pg::Monitor;

pub(super) fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

pub(super) async fn machine_facts(monitor: &Monitor) -> std::collections::BTreeMap<String, String> {
    let mut m = std::collections::BTreeMap::new();
    m.insert(
        "cpus".into(),
        std::thread::available_parallelism().map_or_else(|_| "?".into(), |n| n.to_string()),
    );
    if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
        if let Some(model) = info
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        {
            m.insert("cpuModel".into(), model);
        }
    }
    if let Ok(info) = std::fs::read_to_string("/proc/meminfo") {
        if let Some(l) = info.lines().next() {
            m.insert(
                "memTotal".into(),
                l.trim_start_matches("MemTotal:").trim().into(),
            );
        }
    }
    for s in [
        "server_version",
        "max_connections",
        "shared_buffers",
        "synchronous_commit",
        "fsync",
        "wal_level",
        "commit_delay",
    ] {
        if let Ok(v) = monitor.server_setting(s).await {
            m.insert(format!("pg.{s}"), v);
        }
    }
    m
}
