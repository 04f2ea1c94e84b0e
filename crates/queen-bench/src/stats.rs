//! Request latency recording and percentiles.
//!
//! Samples are kept as whole microseconds in a plain `Vec`; a baseline run
//! records at most a few hundred thousand requests, so sorting once at the end
//! is cheaper and simpler than a histogram.

use std::time::Duration;

/// Latency samples of one kind of request (push, pop, ack, ...).
#[derive(Debug, Default, Clone)]
pub struct Latencies {
    micros: Vec<u64>,
}

impl Latencies {
    pub fn record(&mut self, elapsed: Duration) {
        self.micros
            .push(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
    }

    /// Moves every sample of `other` into `self` (used to combine per-task recorders).
    pub fn merge(&mut self, other: Latencies) {
        self.micros.extend(other.micros);
    }

    pub fn record_micros(&mut self, micros: u64) {
        self.micros.push(micros);
    }

    pub fn len(&self) -> usize {
        self.micros.len()
    }

    /// Sorts once and answers the percentile queries of the report.
    pub fn summary(mut self) -> LatencySummary {
        self.micros.sort_unstable();
        let ms = |p: f64| percentile(&self.micros, p).map(|us| us as f64 / 1000.0);
        LatencySummary {
            count: self.micros.len(),
            p50_ms: ms(50.0),
            p99_ms: ms(99.0),
            p999_ms: ms(99.9),
            max_ms: ms(100.0),
        }
    }
}

/// Percentiles of one recorder, in milliseconds (`None` when nothing was recorded).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencySummary {
    pub count: usize,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p999_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// Nearest-rank percentile of an ascending slice: the smallest sample such that
/// at least `p` percent of all samples are `<=` it. `p` is clamped to `0..=100`;
/// `p = 0` yields the minimum. `None` for an empty slice.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let p = if p.is_nan() {
        100.0
    } else {
        p.clamp(0.0, 100.0)
    };
    let n = sorted.len();
    // Rank is 1-based; ceil(p/100 * n), at least 1.
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    let index = rank.clamp(1, n) - 1;
    Some(sorted[index])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_of_empty_is_none() {
        assert_eq!(percentile(&[], 50.0), None);
        let s = Latencies::default().summary();
        assert_eq!(s.count, 0);
        assert_eq!(s.p50_ms, None);
    }

    #[test]
    fn nearest_rank_on_one_to_hundred() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 99.5), Some(100));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&v, 250.0), Some(100));
    }

    #[test]
    fn small_sets() {
        assert_eq!(percentile(&[7], 50.0), Some(7));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        // Two samples: p50 is the lower one, p99 the upper one.
        assert_eq!(percentile(&[1, 9], 50.0), Some(1));
        assert_eq!(percentile(&[1, 9], 99.0), Some(9));
    }

    #[test]
    fn summary_sorts_merged_samples_and_converts_to_ms() {
        let mut a = Latencies::default();
        let mut b = Latencies::default();
        for us in [4000, 1000, 3000] {
            a.record(Duration::from_micros(us));
        }
        b.record(Duration::from_micros(2000));
        a.merge(b);
        assert_eq!(a.len(), 4);
        let s = a.summary();
        assert_eq!(s.count, 4);
        assert_eq!(s.p50_ms, Some(2.0));
        assert_eq!(s.p99_ms, Some(4.0));
        assert_eq!(s.max_ms, Some(4.0));
    }
}
