//! Variables set in the environment that this broker does not read: the
//! reference broker's tuning knobs that mean nothing here (one WARN each,
//! saying why), and `QUEEN_*`/`PG_*`/`DB_*` names nobody reads (a typo: a
//! WARN with the closest known name).

use super::Config;

/// Variables of the reference broker (http-api.md section 7) that have no
/// meaning here, and why.
const IGNORED: &[(&str, &str)] = &[
    ("NUM_WORKERS", "the reference's HTTP worker threads; here the runtime runs one thread per CPU (TOKIO_WORKER_THREADS sets it)"),
    ("DB_THREAD_POOL_SERVICE_THREADS", "a thread pool of the reference's C++ engine; database calls here are asynchronous"),
    ("QUEUE_BACKOFF_CLEANUP_THRESHOLD", "the reference's long-poll bookkeeping; parked pops here are woken by pushes"),
    ("RESPONSE_TIMER_INTERVAL_MS", "the reference's response pump; answers here leave as soon as they are ready"),
    ("RESPONSE_BATCH_SIZE", "the reference's response pump; answers here leave as soon as they are ready"),
    ("RESPONSE_BATCH_MAX", "the reference's response pump; answers here leave as soon as they are ready"),
    ("LIBQUEEN_INFLIGHT_DEADLINE_MS", "libqueen's stuck-slot watchdog; here every database call has its own deadline (DB_STATEMENT_TIMEOUT + 5 s) and the liveness probe (DB_PROBE_TIMEOUT_MS) abandons calls to a hung server"),
    ("PARTITION_LOOKUP_RECONCILE_INTERVAL_MS", "the reference's index repair job; this schema keeps no index that needs repair"),
    ("PARTITION_LOOKUP_RECONCILE_LOOKBACK_SECONDS", "the reference's index repair job; this schema keeps no index that needs repair"),
    ("QUEEN_CONCURRENCY_MODE", "libqueen's adaptive concurrency; pushes here share transactions by group commit, without tuning"),
    ("METRICS_SAMPLE_INTERVAL_MS", "the reference's process-metrics sampler; /metrics here is computed when asked"),
    ("METRICS_AGGREGATE_INTERVAL_S", "the reference's process-metrics sampler; /metrics here is computed when asked"),
    ("STATS_RECONCILE_INTERVAL_MS", "the reference's stats reconciliation; the counts here are read from the tables"),
    ("STATS_HISTORY_RETENTION_DAYS", "the reference's stats history; per-replica rows here go with METRICS_RETENTION_DAYS"),
    ("WEBAPP_ROOT", "the reference's dashboard files; the dashboard here is built into the binary"),
];

/// Prefixes of reference variables with no meaning here, and why.
const IGNORED_PREFIXES: &[(&str, &str)] = &[
    ("SIDECAR_", "the reference's sidecar connection pool; this broker has one pool (DB_POOL_SIZE)"),
    ("QUEEN_VEGAS_", "libqueen's Vegas concurrency control; pushes here share transactions by group commit"),
    ("QUEEN_CACHE_", "the reference's distributed cache; replicas here share only PostgreSQL and the mesh hints"),
    ("QUEEN_PUSH_", "libqueen's per-operation micro-batching; pushes here share transactions by group commit"),
    // QUEEN_POP_AUTOPILOT* is read (the pop autopilot): known names are never warned about
    ("QUEEN_POP_", "libqueen's per-operation micro-batching; concurrent pops here can share one statement by group commit, without tuning"),
    ("QUEEN_ACK_", "libqueen's per-operation micro-batching; concurrent acks here can share one statement by group commit, without tuning"),
    ("QUEEN_TRANSACTION_", "libqueen's per-operation micro-batching; each transaction here is one database transaction"),
    ("QUEEN_RENEW_LEASE_", "libqueen's per-operation micro-batching; each lease renewal here is one database call"),
];

/// Names other programs set that share our prefixes (PostgreSQL's container
/// images, this project's test tools).
const FOREIGN: &[&str] = &[
    "PG_MAJOR",
    "PG_VERSION",
    "PG_SHA256",
    "QUEEN_TEST_PG",
    "QUEEN_PG_BIN",
];

/// The warnings for the variable names set in the environment, one line each.
pub fn unused_variable_warnings<'a>(set: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let known = Config::variable_names();
    let mut names: Vec<&str> = set.into_iter().collect();
    names.sort_unstable();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        if known.contains(&name) || FOREIGN.contains(&name) {
            continue;
        }
        if let Some((_, why)) = IGNORED.iter().find(|(n, _)| *n == name) {
            out.push(format!("{name} is ignored: {why}"));
            continue;
        }
        if let Some((_, why)) = IGNORED_PREFIXES.iter().find(|(p, _)| name.starts_with(p)) {
            out.push(format!("{name} is ignored: {why}"));
            continue;
        }
        if ["QUEEN_", "PG_", "DB_"].iter().any(|p| name.starts_with(p)) {
            match closest(name, &known) {
                Some(k) => out.push(format!(
                    "{name} is not a variable this broker reads; did you mean {k}?"
                )),
                None => out.push(format!(
                    "{name} is not a variable this broker reads (docs/configuration.md lists them)"
                )),
            }
        }
    }
    out
}

/// The known name nearest to `name`, when it is near enough to be a typo.
fn closest<'k>(name: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (distance(name, k), *k))
        .filter(|(d, _)| *d <= 3.max(name.len() / 5))
        .min()
        .map(|(_, k)| k)
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_knobs_are_named_ignored_and_typos_get_the_closest_name() {
        let w = unused_variable_warnings([
            "NUM_WORKERS",
            "SIDECAR_POOL_SIZE",
            "QUEEN_PUSH_BATCH_SIZE",
            "DB_POOL_SIZ",
            "PG_HOTS",
            "QUEEN_ZZZZZZZZZZZZ",
            "DB_POOL_SIZE",
            "PG_MAJOR",
            "PATH",
            "HOME",
        ]);
        assert_eq!(w.len(), 6, "{w:#?}");
        assert!(
            w[0].starts_with("DB_POOL_SIZ is not") && w[0].ends_with("did you mean DB_POOL_SIZE?"),
            "{w:#?}"
        );
        assert!(
            w.iter().any(|l| l.starts_with("NUM_WORKERS is ignored: ")),
            "{w:#?}"
        );
        assert!(
            w.iter()
                .any(|l| l.starts_with("SIDECAR_POOL_SIZE is ignored: ")),
            "{w:#?}"
        );
        assert!(
            w.iter()
                .any(|l| l.starts_with("QUEEN_PUSH_BATCH_SIZE is ignored: ")),
            "{w:#?}"
        );
        assert!(
            w.iter().any(|l| l.ends_with("did you mean PG_HOST?")),
            "{w:#?}"
        );
        assert!(
            w.iter()
                .any(|l| l.starts_with("QUEEN_ZZZZZZZZZZZZ is not") && !l.contains("did you mean")),
            "{w:#?}"
        );
    }

    #[test]
    fn no_known_variable_is_called_ignored() {
        for name in Config::variable_names() {
            assert!(!IGNORED.iter().any(|(n, _)| *n == name), "{name}");
            // a prefix of the reference's knobs may cover a name this broker
            // reads (QUEEN_POP_AUTOPILOT under QUEEN_POP_): it is not warned about
            assert_eq!(
                unused_variable_warnings([name]),
                Vec::<String>::new(),
                "{name}"
            );
        }
        assert!(unused_variable_warnings(["QUEEN_POP_BATCH_SIZE"])
            .iter()
            .any(|w| w.starts_with("QUEEN_POP_BATCH_SIZE is ignored")));
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "ab"), 2);
    }
}
