use super::*;

fn refused(v: Value) -> (u16, String) {
    let e = parse_ops(&[v], None).unwrap_err();
    (e.status.as_u16(), e.reason)
}

#[test]
fn bad_timer_operations_are_refused() {
    let p = base64::engine::general_purpose::STANDARD.encode(b"{\"a\":1}");
    let ok = json!({"op": "schedule", "queue": "q", "timerKey": "k", "payload": p, "delayMs": 5});
    assert!(parse_ops(std::slice::from_ref(&ok), None).is_ok());
    let with = |k: &str, v: Value| {
        let mut o = ok.clone();
        o[k] = v;
        o
    };
    assert_eq!(refused(with("op", json!("frob"))).1, "timers_unknown_op");
    assert_eq!(
        refused(with("deliverAt", json!("x"))).1,
        "timers_server_owned_field"
    );
    assert_eq!(refused(with("_x", json!(1))).1, "timers_server_owned_field");
    assert_eq!(
        refused(with("payload", json!("%%%"))).1,
        "timers_payload_not_base64"
    );
    assert_eq!(refused(with("delayMs", json!("5"))).1, "timers_bad_delay");
    assert_eq!(
        refused(with("delayMs", json!(HORIZON_MS + 1))),
        (403, "timers_horizon".into())
    );
    assert_eq!(
        refused(with("partition", json!(""))).1,
        "timers_bad_partition"
    );
    assert_eq!(refused(with("timerKey", json!(""))).1, "timers_bad_key");
    for key in ["d/./x", "..", "a/", "/a", "a//b", "%2e%2E/x"] {
        assert_eq!(refused(with("timerKey", json!(key))).1, "timers_bad_key");
    }
    assert_eq!(refused(with("queue", json!("."))).1, "timers_bad_queue");
    assert_eq!(refused(with("txn", json!("t\u{0}x"))).1, "timers_bad_txn");
    for delay in [json!(-1_000_000_000_000_000_i64), json!(i64::MIN)] {
        let Ok(reqs) = parse_ops(&[with("delayMs", delay)], None) else {
            panic!("a negative delay is clamped, not refused");
        };
        assert!(matches!(reqs[0], TimerReq::Schedule { delay_ms: 0, .. }));
    }
    let raw = base64::engine::general_purpose::STANDARD.encode(b"not json");
    assert_eq!(
        refused(with("payload", json!(raw))).1,
        "timers_payload_not_json"
    );
    let twice = [ok.clone(), ok];
    assert_eq!(
        parse_ops(&twice, None).unwrap_err().reason,
        "timers_duplicate_in_call"
    );
}

#[test]
fn recurring_schedules_are_parsed_and_bad_ones_refused_naming_the_field() {
    let p = base64::engine::general_purpose::STANDARD.encode(b"{\"a\":1}");
    let base = json!({"op": "schedule", "queue": "q", "timerKey": "k", "payload": p});
    let with = |pairs: &[(&str, Value)]| {
        let mut o = base.clone();
        for (k, v) in pairs {
            o[*k] = v.clone();
        }
        o
    };
    // an interval without delayMs: the first fire one interval on
    let reqs = parse_ops(&[with(&[("intervalMs", json!(1500))])], None).unwrap();
    let TimerReq::Schedule {
        delay_ms,
        first_at,
        recurrence: Some(r),
        ..
    } = &reqs[0]
    else {
        panic!("a recurring schedule")
    };
    assert_eq!((*delay_ms, *first_at), (1500, None));
    assert_eq!(r.catch_up, CatchUp::One);
    // a cron in a zone without delayMs: its first tick, absolutely
    let cron = with(&[
        ("cron", json!("0 9 * * *")),
        ("timezone", json!("Asia/Tokyo")),
        ("catchUp", json!("none")),
    ]);
    let reqs = parse_ops(&[cron], None).unwrap();
    let TimerReq::Schedule {
        first_at: Some(first),
        recurrence: Some(r),
        ..
    } = &reqs[0]
    else {
        panic!("a cron schedule")
    };
    assert_eq!(first.format("%H:%M:%S").to_string(), "00:00:00");
    assert_eq!(r.catch_up, CatchUp::None);
    // delayMs sets the first fire of a recurring timer
    let reqs = parse_ops(
        &[with(&[("cron", json!("@hourly")), ("delayMs", json!(10))])],
        None,
    )
    .unwrap();
    assert!(matches!(
        reqs[0],
        TimerReq::Schedule {
            delay_ms: 10,
            first_at: None,
            ..
        }
    ));
    for (pairs, reason, field) in [
        (
            vec![("intervalMs", json!(50))],
            "timers_bad_interval",
            "intervalMs",
        ),
        (
            vec![("intervalMs", json!("1000"))],
            "timers_bad_interval",
            "intervalMs",
        ),
        (
            vec![("intervalMs", json!(1.5))],
            "timers_bad_interval",
            "intervalMs",
        ),
        (
            vec![("intervalMs", json!(HORIZON_MS + 1))],
            "timers_bad_interval",
            "intervalMs",
        ),
        (vec![("cron", json!("* * *"))], "timers_bad_cron", "cron"),
        (
            vec![("cron", json!("0 0 31 2 *"))],
            "timers_bad_cron",
            "cron",
        ),
        (vec![("cron", json!(5))], "timers_bad_cron", "cron"),
        (
            vec![
                ("cron", json!("* * * * *")),
                ("timezone", json!("Nowhere/Else")),
            ],
            "timers_bad_timezone",
            "timezone",
        ),
        (
            vec![("intervalMs", json!(1000)), ("timezone", json!("UTC"))],
            "timers_bad_timezone",
            "timezone",
        ),
        (
            vec![("intervalMs", json!(1000)), ("cron", json!("* * * * *"))],
            "timers_bad_schedule",
            "cron",
        ),
        (
            vec![("intervalMs", json!(1000)), ("catchUp", json!("all"))],
            "timers_bad_catch_up",
            "catchUp",
        ),
        (
            vec![("catchUp", json!("one")), ("delayMs", json!(5))],
            "timers_bad_catch_up",
            "catchUp",
        ),
        (
            vec![("intervalMs", json!(1000)), ("txn", json!("t".repeat(230)))],
            "timers_bad_txn",
            "txn",
        ),
        (vec![], "timers_delay_required", "delayMs"),
    ] {
        let e = parse_ops(&[with(&pairs)], None).unwrap_err();
        assert_eq!(
            (e.status.as_u16(), e.reason.as_str()),
            (400, reason),
            "{pairs:?}"
        );
        assert!(e.detail.contains(field), "{pairs:?}: {}", e.detail);
    }
}
