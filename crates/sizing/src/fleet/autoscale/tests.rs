use super::*;

fn rule() -> Rule {
    Rule {
        signal: Signal::Requests,
        target: 10.0,
        min: 1,
        max: 8,
        interval: Duration::from_secs(15),
        cooldown: Duration::from_secs(60),
        startup: Duration::from_secs(120),
        stabilization: Duration::ZERO,
    }
}

fn at(s: u64) -> Stamp {
    Stamp(s * 1_000_000_000)
}

#[test]
fn the_desired_count_is_the_hpa_ratio_within_bounds() {
    let s = Scaler::new(rule(), 8, 2);
    // 2 serving at 25 requests each for a target of 10: ⌈2 × 25 / 10⌉ = 5.
    assert_eq!(s.desired(2, 25.0), 5);
    assert_eq!(s.desired(2, 0.0), 1, "never below min");
    assert_eq!(s.desired(2, 100.0), 8, "never above max");
    assert_eq!(s.desired(3, 10.0), 3, "at the target nothing changes");
}

#[test]
fn replicas_start_after_their_start_up_drain_and_are_billed_throughout() {
    let mut s = Scaler::new(rule(), 8, 2);
    // t = 0: 25 requests per replica → 5; three start, serving at 120 s.
    assert!(s.evaluate(at(0), 25.0, &[0; 8]).is_empty());
    assert_eq!((s.up(), s.state[2]), (5, State::Starting(at(120))));
    assert_eq!(s.next_event(), at(15));
    // Within the cooldown nothing changes, whatever the signal.
    assert!(s.evaluate(at(30), 1.0, &[0; 8]).is_empty());
    assert_eq!(s.up(), 5);
    let on = s.advance(at(120), |_| false);
    assert_eq!(on, [(2, true), (3, true), (4, true)]);
    // t = 180: 5 serving at 2 requests → 1; the four emptiest drain.
    let off = s.evaluate(at(180), 2.0, &[3, 9, 0, 1, 2, 0, 0, 0]);
    assert_eq!(off, [(2, false), (3, false), (4, false), (0, false)]);
    assert_eq!(s.up(), 1);
    // Drained at 200 s (replica 0 at 240 s), then off.
    s.advance(at(200), |r| r != 0);
    s.advance(at(240), |_| true);
    s.close(at(300));
    // Billed: replica 0 for 240 s, replica 1 for 300 s, replicas 2–4 from 0 to 200 s.
    assert!((s.billed_s - (240.0 + 300.0 + 3.0 * 200.0)).abs() < 1e-9, "{}", s.billed_s);
    assert_eq!(s.events.len(), 2);
}

#[test]
fn a_shrink_goes_only_to_the_most_asked_within_the_stabilization_window() {
    let r = Rule { cooldown: Duration::ZERO, stabilization: Duration::from_secs(300), ..rule() };
    let mut s = Scaler::new(r, 8, 2);
    // t = 0: asked 6; up at once.
    s.evaluate(at(0), 30.0, &[0; 8]);
    assert_eq!(s.up(), 6);
    // The signal collapses: asked 1 at 60 s and 240 s, but 6 was asked within 300 s.
    s.evaluate(at(60), 0.0, &[0; 8]);
    s.evaluate(at(240), 0.0, &[0; 8]);
    assert_eq!(s.up(), 6);
    // At 301 s the 6 left the window; the most asked within it is 1.
    s.evaluate(at(301), 0.0, &[0; 8]);
    assert_eq!(s.up(), 1);
    // Without a window the first collapse shrinks it.
    let mut plain = Scaler::new(Rule { cooldown: Duration::ZERO, ..rule() }, 8, 2);
    plain.evaluate(at(0), 30.0, &[0; 8]);
    plain.evaluate(at(60), 0.0, &[0; 8]);
    assert_eq!(plain.up(), 1);
}
