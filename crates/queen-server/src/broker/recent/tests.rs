use super::*;

/// The two halves of [`RecentPartitions::learn`], one at a time.
impl RecentPartitions {
    fn mark_drained(&self, queue: &str, group: &str, partitions: &[String], as_of: u64) {
        self.with_list(queue, |list| list.mark_drained(group, partitions, as_of));
    }

    fn walk_result(&self, queue: &str, group: &str, walked: &[&str]) {
        self.with_list(queue, |list| list.walked(group, walked));
    }
}

fn hints(r: &RecentPartitions, group: &str) -> Vec<String> {
    r.hints_for_pop("q", group).names
}

#[test]
fn oldest_write_first_without_repeats_and_bounded() {
    let r = RecentPartitions::default();
    for p in ["a", "b", "a", "c"] {
        r.record("q", p);
    }
    assert_eq!(hints(&r, "g"), ["b", "a", "c"]);
    for i in 0..PER_QUEUE + 10 {
        r.record("q", &format!("p{i}"));
    }
    let list = hints(&r, "g");
    assert_eq!(list.len(), HINTS_PER_POP);
    // a, b, c and p0..p9 fell off the front
    assert_eq!(list[0], "p10");
    assert!(hints(&r, "other-queue-group").len() == HINTS_PER_POP);
    assert!(r.hints_for_pop("other", "g").names.is_empty());
    r.forget("q");
    assert!(hints(&r, "g").is_empty());
    assert_eq!(r.inner.lock().unwrap().total, 0);
}

#[test]
fn drained_partitions_drop_out_until_written_again() {
    let r = RecentPartitions::default();
    for p in ["a", "b", "c"] {
        r.record("q", p);
    }
    let h = r.hints_for_pop("q", "g1");
    assert_eq!(h.names, ["a", "b", "c"]);
    r.mark_drained("q", "g1", &["a".to_owned(), "c".to_owned()], h.as_of);
    assert_eq!(hints(&r, "g1"), ["b"]);
    // another group still sees everything
    assert_eq!(hints(&r, "g2"), ["a", "b", "c"]);
    // a write after the hints were taken brings the partition back
    let h = r.hints_for_pop("q", "g1");
    r.record("q", "c");
    r.mark_drained("q", "g1", &["b".to_owned(), "c".to_owned()], h.as_of);
    assert_eq!(hints(&r, "g1"), ["c"]);
    r.record("q", "a");
    assert_eq!(hints(&r, "g1"), ["c", "a"]);
}

#[test]
fn each_group_goes_to_the_walk_once_per_interval() {
    let r = RecentPartitions::default();
    r.record("q", "a");
    let t0 = Instant::now();
    let mut inner = r.inner.lock().unwrap();
    let list = inner.queues.get_mut("q").unwrap();
    assert_eq!(list.hints("g", t0).names, ["a"]);
    assert_eq!(list.hints("g", t0 + FLOOR_INTERVAL / 2).names, ["a"]);
    assert!(list.hints("g", t0 + FLOOR_INTERVAL).names.is_empty());
    assert_eq!(list.hints("g", t0 + FLOOR_INTERVAL * 3 / 2).names, ["a"]);
    assert_eq!(list.hints("h", t0 + FLOOR_INTERVAL).names, ["a"]);
}

#[test]
fn pops_walk_while_walks_find_work_and_at_the_floor_interval() {
    let r = RecentPartitions::default();
    assert!(
        r.hints_for_pop("unlisted", "g").walk,
        "nothing listed: walk"
    );
    r.record("q", "a");
    let t0 = Instant::now();
    {
        let mut inner = r.inner.lock().unwrap();
        assert!(inner.queues.get_mut("q").unwrap().hints("g", t0).walk);
    }
    // a walk that found only listed partitions (or nothing) stops the walks
    r.walk_result("q", "g", &["a"]);
    let mut inner = r.inner.lock().unwrap();
    let list = inner.queues.get_mut("q").unwrap();
    let h = list.hints("g", t0 + FLOOR_INTERVAL / 2);
    assert!(!h.walk && h.names == ["a"]);
    let h = list.hints("g", t0 + FLOOR_INTERVAL);
    assert!(h.walk && h.names.is_empty(), "the floor walks regardless");
    assert!(list.hints("other", t0).walk, "per group");
    drop(inner);
    r.walk_result("q", "g", &["a", "unlisted"]);
    assert!(r.hints_for_pop("q", "g").walk);
    r.walk_result("q", "g", &[]);
    assert!(!r.hints_for_pop("q", "g").walk);
}

#[test]
fn work_in_a_drained_partition_or_a_forgotten_group_starts_the_view_over() {
    let r = RecentPartitions::default();
    r.record("q", "a");
    r.record("q", "b");
    let h = r.hints_for_pop("q", "g");
    r.mark_drained("q", "g", &h.names, h.as_of);
    r.walk_result("q", "g", &[]);
    let h = r.hints_for_pop("q", "g");
    assert!(h.names.is_empty() && !h.walk);
    // a seek through another replica: the floor walk claims from `a`
    r.walk_result("q", "g", &["a"]);
    let h = r.hints_for_pop("q", "g");
    assert!(h.walk && h.names == ["a", "b"], "{h:?}");
    // a seek through this replica
    r.mark_drained("q", "g", &h.names, h.as_of);
    r.walk_result("q", "g", &[]);
    r.forget_group(Some("q"), "g");
    let h = r.hints_for_pop("q", "g");
    assert!(h.walk && h.names == ["a", "b"], "{h:?}");
    r.mark_drained("q", "g", &h.names, h.as_of);
    r.forget_group(None, "g");
    assert_eq!(r.hints_for_pop("q", "g").names, ["a", "b"]);
}

fn claim_from(partitions: &[&str]) -> Claim {
    let messages = partitions
        .iter()
        .map(|p| crate::store::ClaimedMessage {
            partition_id: uuid::Uuid::nil(),
            partition_name: (*p).to_owned(),
            offset: 1,
            message_id: uuid::Uuid::nil(),
            transaction_id: String::new(),
            trace_id: None,
            payload: "{}".to_owned(),
            producer_sub: None,
            created_at: chrono::Utc::now(),
            attempt: 1,
        })
        .collect();
    Claim {
        messages,
        drained_hints: Vec::new(),
        lease_id: None,
        by_statement: false,
        retry_holds: Vec::new(),
    }
}

#[test]
fn partitions_a_walk_found_work_in_become_candidates() {
    let r = RecentPartitions::default();
    let (walked, unlisted) = (
        Learned {
            walked: true,
            unlisted: true,
        },
        Learned {
            walked: true,
            unlisted: false,
        },
    );
    // after a restart nothing is listed: the pops walk
    let h = r.hints_for_pop("q", "g");
    assert!(h.walk && h.names.is_empty());
    assert_eq!(r.learn("q", "g", &h, &claim_from(&["a"])), walked);
    let h = r.hints_for_pop("q", "g");
    assert!(h.walk && h.names == ["a"], "{h:?}");
    // a walk that finds unlisted work keeps the walks going and lists it
    assert_eq!(r.learn("q", "g", &h, &claim_from(&["b"])), walked);
    let h = r.hints_for_pop("q", "g");
    assert!(h.walk && h.names == ["a", "b"], "{h:?}");
    // claims from hinted partitions only: walking stops
    assert_eq!(
        r.learn("q", "g", &h, &claim_from(&[])),
        unlisted,
        "an empty walk"
    );
    let h = r.hints_for_pop("q", "g");
    assert!(!h.walk && h.names == ["a", "b"], "{h:?}");
    // a pop that was not allowed to walk teaches nothing about walks
    assert_eq!(
        r.learn("q", "g", &h, &claim_from(&["c"])),
        Learned::default()
    );
    let may_walk = Hints {
        names: vec!["a".to_owned()],
        as_of: h.as_of,
        walk: true,
    };
    assert_eq!(
        r.learn("q", "g", &may_walk, &claim_from(&["a"])),
        Learned::default(),
        "filled from the hints: no walk ran"
    );
    assert_eq!(hints(&r, "g"), ["a", "b"]);
}

#[test]
fn a_walk_outside_the_list_has_the_broker_look_up_more_once_per_interval() {
    let r = RecentPartitions::default();
    r.record("q", "a");
    let h = Hints {
        names: vec!["a".to_owned()],
        as_of: 1,
        walk: true,
    };
    // the walk claimed in b, which the list did not know
    assert!(r.learn("q", "g", &h, &claim_from(&["b", "a"])).unlisted);
    assert!(r.discovery_due("q", "g"));
    assert!(!r.discovery_due("q", "g"), "once per interval");
    assert!(r.discovery_due("q", "h"), "per group");
    assert!(
        !r.discovery_due("unknown", "g"),
        "no list, nothing to add to"
    );
    // what the lookup found joins the list after what it knew, once
    r.discovered("q", &["c".to_owned(), "a".to_owned(), "d".to_owned()]);
    assert_eq!(hints(&r, "g2"), ["a", "b", "c", "d"]);
    let mut inner = r.inner.lock().unwrap();
    let list = inner.queues.get_mut("q").unwrap();
    list.discovered
        .insert("g".to_owned(), Instant::now() - FLOOR_INTERVAL);
    drop(inner);
    assert!(r.discovery_due("q", "g"), "due again after the interval");
}

#[test]
fn the_total_is_bounded_over_queues() {
    let r = RecentPartitions::default();
    for q in 0..30 {
        for p in 0..PER_QUEUE {
            r.record(&format!("q{q}"), &format!("p{p}"));
        }
    }
    let total = r.inner.lock().unwrap().total;
    assert!(total <= MAX_TOTAL, "{total}");
    let counted: usize = r
        .inner
        .lock()
        .unwrap()
        .queues
        .values()
        .map(|l| l.written.len())
        .sum();
    assert_eq!(total, counted);
}
