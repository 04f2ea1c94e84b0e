//! The shapes of the state-reporting bodies, checked as JSON.

use super::*;
use serde_json::json;

#[test]
fn zeros_stay_integers_and_rates_floats() {
    let p = ThroughputPoint {
        timestamp: "t".into(),
        ingested: 60,
        processed: 0,
        ingested_per_second: 1.0,
        processed_per_second: 0,
    };
    assert_eq!(
        serde_json::to_string(&p).unwrap(),
        r#"{"timestamp":"t","ingested":60,"processed":0,"ingestedPerSecond":1.0,"processedPerSecond":0}"#
    );
    let totals = StatusQueueTotals {
        totals: MessageTotals {
            total: 1,
            ..MessageTotals::default()
        },
        messages: MessageTotals::default(),
    };
    let v = serde_json::to_value(totals).unwrap();
    assert_eq!(v["total"], 1);
    assert_eq!(v["messages"]["deadLetter"], 0);
    let tasks = QueueGroupSummary {
        namespace: None,
        task: Some("t".into()),
        queues: 1,
        partitions: 2,
        messages: PendingCounts {
            total: 3,
            pending: 1,
        },
    };
    assert_eq!(
        serde_json::to_value(tasks).unwrap(),
        json!({"task": "t", "queues": 1, "partitions": 2, "messages": {"total": 3, "pending": 1}})
    );
}
