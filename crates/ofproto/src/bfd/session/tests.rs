use super::*;
use std::collections::BTreeMap;

fn cfg(kv: &[(&str, &str)]) -> Config {
    let mut m: BTreeMap<String, String> = kv
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    m.insert("enable".into(), "true".into());
    Config::from_column(&m).unwrap()
}

/// Runs `a` and `b` against each other from `from` to `to`, every packet delivered.
fn exchange(a: &mut Session, b: &mut Session, from: i64, to: i64) {
    for now in from..to {
        step(a, b, now);
        step(b, a, now);
    }
}

/// `x`'s timers at `now`, and its packet to `y` if one is due.
fn step(x: &mut Session, y: &mut Session, now: i64) {
    x.run(now, Some(0));
    if x.should_send(now) {
        let m = x.compose(now, 7);
        let m = Msg::decode(&m.encode()).unwrap();
        y.receive(&m, 255, now).unwrap();
    }
}

#[test]
fn two_sessions_come_up_and_negotiate_their_intervals() {
    let mut a = Session::new("a", 1, 49152, cfg(&[]), 0);
    let mut b = Session::new("b", 2, 49153, cfg(&[("min_rx", "500")]), 0);
    assert_eq!(a.status(0)[1], ("state", "down".into()));
    exchange(&mut a, &mut b, 0, 5000);
    assert_eq!((a.state, b.state), (State::Up, State::Up));
    assert!(a.forwarding(5000) && b.forwarding(5000));
    assert_eq!((a.rmt_disc, b.rmt_disc), (2, 1));
    // Up, the poll sequence brought min_tx down to 100ms, the peer's min_rx holds a to 500.
    assert_eq!((a.local_min_tx(), a.tx_interval()), (100, 500));
    assert_eq!(b.tx_interval(), 1000);
    assert_eq!(a.flags & (FLAG_POLL | FLAG_FINAL), 0);
    assert_eq!(a.flap_count, 1);
}

#[test]
fn silence_expires_the_session_with_ovs_s_diagnostic() {
    let mut a = Session::new("a", 1, 49152, cfg(&[]), 0);
    let mut b = Session::new("b", 2, 49153, cfg(&[]), 0);
    exchange(&mut a, &mut b, 0, 5000);
    assert_eq!(a.state, State::Up);
    let detect = a.detect_time;
    a.run(detect - 1, Some(0));
    assert_eq!(a.state, State::Up);
    a.run(detect, Some(0));
    let st: BTreeMap<_, _> = a.status(detect).into_iter().collect();
    assert_eq!(st["state"], "down");
    assert_eq!(st["diagnostic"], "Control Detection Time Expired");
    assert_eq!(st["forwarding"], "false");
    assert_eq!(st["flap_count"], "2");
    assert_eq!(st["remote_state"], "down");
}

#[test]
fn a_peer_going_down_is_neighbor_signaled() {
    let mut a = Session::new("a", 1, 49152, cfg(&[]), 0);
    let mut b = Session::new("b", 2, 49153, cfg(&[]), 0);
    exchange(&mut a, &mut b, 0, 5000);
    b.configure(cfg(&[("cpath_down", "true")]), 5000);
    // cpath_down keeps the state, changes the diagnostic: a stops forwarding.
    exchange(&mut a, &mut b, 5000, 7000);
    assert_eq!(a.state, State::Up);
    assert_eq!(a.rmt_diag, diag::CPATH_DOWN);
    assert!(!a.forwarding(7000));
    let mut m = b.compose(7000, 0);
    m.state = State::Down;
    a.receive(&m, 255, 7000).unwrap();
    assert_eq!((a.state, a.diag), (State::Down, diag::RMT_DOWN));
}

#[test]
fn wrong_ttl_or_discriminator_is_ignored() {
    let mut a = Session::new("a", 1, 49152, cfg(&[]), 0);
    let mut b = Session::new("b", 2, 49153, cfg(&[]), 0);
    let m = b.compose(0, 0);
    assert_eq!(a.receive(&m, 254, 0), Err("TTL is not 255"));
    let mut m2 = m;
    m2.your_disc = 99;
    assert_eq!(a.receive(&m2, 255, 0), Err("Incorrect your_disc"));
    assert_eq!(a.state, State::Down);
    a.receive(&m, 255, 0).unwrap();
    assert_eq!(a.state, State::Init);
}

#[test]
fn override_and_details() {
    let mut a = Session::new("p0", 0xabc, 49152, cfg(&[]), 0);
    a.forwarding_override = Some(true);
    assert!(a.forwarding(0));
    let d = a.details(0);
    assert!(
        d.starts_with("  Forwarding: true\n  Detect Multiplier: 3\n"),
        "{d}"
    );
    assert!(d.contains("  Local Discriminator: 0xabc\n"), "{d}");
    assert!(d.contains("  Local Minimum TX Interval: 1000ms\n"), "{d}");
    assert!(d.ends_with("  Remote Detect Multiplier: 0\n"), "{d}");
}

#[test]
fn a_quiet_interface_decays_its_receive_interval() {
    let mut a = Session::new("a", 1, 49152, cfg(&[("decay_min_rx", "3000")]), 0);
    let mut b = Session::new("b", 2, 49153, cfg(&[]), 0);
    exchange(&mut a, &mut b, 0, 2500);
    assert_eq!((a.state, a.min_rx), (State::Up, 1000));
    // Nothing but control packets arrives (rx_packets stays 0): past the decay detection
    // time (3 s after coming up), a polls for the decayed interval, which b's Final puts in
    // force.
    exchange(&mut a, &mut b, 2500, 12000);
    assert_eq!((a.state, a.min_rx), (State::Up, 3000));
    assert_eq!(b.rx_interval(), 1000);
    assert_eq!(b.tx_interval(), 3000);
    assert_eq!(a.flags & FLAG_POLL, 0);
}

#[test]
fn an_interface_without_a_count_never_decays() {
    let mut a = Session::new("a", 1, 49152, cfg(&[("decay_min_rx", "3000")]), 0);
    let mut b = Session::new("b", 2, 49153, cfg(&[]), 0);
    for now in 0..12000 {
        a.run(now, None);
        if a.should_send(now) {
            let m = a.compose(now, 7);
            b.receive(&m, 255, now).unwrap();
        }
        step(&mut b, &mut a, now);
    }
    assert_eq!((a.state, a.min_rx), (State::Up, 1000));
}

#[test]
fn forwarding_if_rx_forwards_while_data_arrives() {
    let mut a = Session::new("a", 1, 49152, cfg(&[("forwarding_if_rx", "true")]), 0);
    let mut b = Session::new("b", 2, 49153, cfg(&[]), 0);
    exchange(&mut a, &mut b, 0, 5000);
    assert_eq!(a.state, State::Up);
    // b falls silent, data keeps arriving: a is down and still forwards.
    let mut rx = 0;
    for now in 5000..9000 {
        rx += 1;
        a.run(now, Some(rx));
    }
    assert_eq!((a.state, a.diag), (State::Down, diag::EXPIRED));
    assert!(a.forwarding(9000));
    // The data stops too: forwarding ends once its detection time passes.
    for now in 9000..13000 {
        a.run(now, Some(rx));
    }
    assert!(!a.forwarding(13000));
}
