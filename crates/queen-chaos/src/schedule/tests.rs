use super::*;
use crate::rng::Rng;

#[test]
fn durations_parse_and_format_back() {
    assert_eq!(parse_duration("60s").unwrap(), Duration::from_secs(60));
    assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
    assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
    assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    assert_eq!(parse_duration("7").unwrap(), Duration::from_secs(7));
    assert!(parse_duration("7y").is_err());
    for d in ["3s", "1500ms", "0s"] {
        assert_eq!(format_duration(parse_duration(d).unwrap()), d);
    }
}

#[test]
fn short_plan_round_trips() {
    let s = short(Duration::from_secs(60), PgMode::Shared).unwrap();
    assert!(s.steps.len() > 10);
    assert_eq!(Schedule::parse(&s.to_string()).unwrap(), s);
    let half = short(Duration::from_secs(30), PgMode::Shared).unwrap();
    assert_eq!(half.steps[0].at, Duration::from_millis(1800));
}

#[test]
fn random_plan_stays_inside_and_round_trips() {
    let d = Duration::from_secs(600);
    let s = random(d, &mut Rng::new(3), 2, 3, PgMode::Private);
    assert!(s.steps.iter().all(|st| st.at <= d));
    assert!(s.steps.windows(2).all(|w| w[0].at <= w[1].at));
    assert_eq!(Schedule::parse(&s.to_string()).unwrap(), s);
}

#[test]
fn bad_lines_name_their_line() {
    let e = Schedule::parse("at 1s kill 7").unwrap_err();
    assert!(format!("{e:#}").contains("line 1"), "{e:#}");
}

#[test]
fn failover_steps_round_trip() {
    let text = "duration 20s\nat 2s kill-primary\nat 3s promote\nat 9s freeze-primary\nat 10500ms promote\n";
    let s = Schedule::parse(text).unwrap();
    assert_eq!(
        s.steps.iter().map(|s| s.action).collect::<Vec<_>>(),
        [
            Action::KillPrimary,
            Action::Promote,
            Action::FreezePrimary,
            Action::Promote
        ]
    );
    assert_eq!(s.to_string(), text);
    assert_eq!(Schedule::parse(&s.to_string()).unwrap(), s);
    assert!(s.needs_standby());
    assert!(!short(Duration::from_secs(60), PgMode::Private)
        .unwrap()
        .needs_standby());
}

#[test]
fn a_promote_without_a_lost_primary_or_a_loss_without_a_promote_is_refused() {
    for bad in [
        "at 1s promote",
        "at 1s kill-primary\nat 2s freeze-primary\nat 3s promote",
        "at 1s kill-primary\nat 2s promote\nat 3s promote",
        "at 1s freeze-primary",
    ] {
        assert!(Schedule::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn scaling_keeps_the_promote_one_second_after_the_loss() {
    let s = short(Duration::from_secs(30), PgMode::Standby).unwrap();
    assert!(s.needs_standby());
    assert_eq!(Schedule::parse(&s.to_string()).unwrap(), s);
    let half = short(Duration::from_secs(15), PgMode::Standby).unwrap();
    let at = |plan: &Schedule, a: Action| -> Vec<Duration> {
        plan.steps
            .iter()
            .filter(|s| s.action == a)
            .map(|s| s.at)
            .collect()
    };
    let (losses, promotes) = (at(&half, Action::KillPrimary), at(&half, Action::Promote));
    assert_eq!(losses, [Duration::from_millis(2_500)]);
    assert_eq!(promotes[0], Duration::from_millis(3_500));
    assert_eq!(
        promotes[1] - at(&half, Action::FreezePrimary)[0],
        Duration::from_secs(1)
    );
}

#[test]
fn random_plans_with_a_standby_fail_over_and_promote_every_loss() {
    let d = Duration::from_secs(1800);
    let s = random(d, &mut Rng::new(30), 2, 3, PgMode::Standby);
    let losses = s
        .steps
        .iter()
        .filter(|st| Schedule::loses_primary(st.action))
        .count();
    assert!(losses >= 2, "{losses} failovers in 30 min");
    // parse checks that a promote follows every loss before the next one
    assert_eq!(Schedule::parse(&s.to_string()).unwrap(), s);
    let shared = random(d, &mut Rng::new(30), 2, 3, PgMode::Shared);
    assert!(!shared.needs_standby());
    assert!(!shared.steps.iter().any(|st| st.action == Action::RestartPg));
}

#[test]
fn the_pg_auto_failover_plan_only_acts_on_the_formation() {
    let s = short(Duration::from_secs(60), PgMode::AutoFailover).unwrap();
    assert!(s.needs_auto_failover());
    assert!(!s.touches_private_servers());
    assert_eq!(Schedule::parse(&s.to_string()).unwrap(), s);
    let kinds: Vec<Action> = s.steps.iter().map(|st| st.action).collect();
    assert_eq!(
        kinds,
        [
            Action::Switchover,
            Action::KillPrimaryNode,
            Action::RestartNode
        ]
    );
    assert!(!short(Duration::from_secs(60), PgMode::Standby)
        .unwrap()
        .needs_auto_failover());
}
