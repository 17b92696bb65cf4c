//! The simulator driven by hand, as the browser demo drives it: faults
//! injected at the current instant, store faults armed for the next call,
//! nodes added and released, and the safety checker read while running.

use lease_core::variants::Variant;
use lease_core::Protocol;
use lease_sim::elector::{ElectorFault, ElectorViolation, Happening, SimConfig, SimError, World};
use lease_sim::world::faults::FaultKind;
use std::time::Duration;

/// Three quiet nodes with a timeline, run until one of them holds.
fn world(variant: Variant, protocol: Protocol) -> World {
    let mut world = World::new(SimConfig {
        record_timeline: true,
        protocol,
        duration: Duration::from_secs(3600),
        ..SimConfig::quiet(7, 3, variant)
    });
    run_until(&mut world, 30_000, |w| leader(w).is_some());
    world
}

/// Runs in 100 ms slices until `done` or `limit_ms` more have passed.
fn run_until(world: &mut World, limit_ms: u64, done: impl Fn(&World) -> bool) -> bool {
    let end = world.now_ms() + limit_ms;
    while world.now_ms() < end {
        if done(world) {
            return true;
        }
        world.run_until(world.now_ms() + 100);
    }
    done(world)
}

/// (node, token) of the node that believes it holds, if exactly one does.
fn leader(world: &World) -> Option<(usize, u64)> {
    let holding: Vec<_> = world
        .nodes()
        .iter()
        .enumerate()
        .filter_map(|(i, n)| n.holding.map(|b| (i, b.token)))
        .collect();
    match holding[..] {
        [one] => Some(one),
        _ => None,
    }
}

fn faults(world: &World) -> Vec<(Option<usize>, String)> {
    world
        .timeline()
        .iter()
        .filter_map(|e| match &e.what {
            Happening::Fault(what) => Some((e.node, what.clone())),
            _ => None,
        })
        .collect()
}

/// A zombie's write landed over a newer holder's.
fn assert_fence_token_went_down(violations: &[ElectorViolation]) {
    assert!(
        violations
            .iter()
            .any(|v| matches!(v, ElectorViolation::FenceTokenDecreased { .. })),
        "{violations:?}"
    );
}

#[test]
fn killing_the_leader_hands_over_with_the_next_token() {
    for protocol in [Protocol::Cas, Protocol::Epochs] {
        let mut world = world(Variant::Safe, protocol);
        let (old, token) = leader(&world).expect("a leader");
        let killed_at = world.now_ms();
        world
            .inject(ElectorFault::Crash {
                node: old,
                at_ms: 0,
                restart_after: None,
            })
            .unwrap();
        assert!(
            run_until(&mut world, 30_000, |w| leader(w)
                .is_some_and(|(n, _)| n != old)),
            "{protocol:?}: nobody took over"
        );
        let (new, new_token) = leader(&world).unwrap();
        assert_ne!(new, old);
        match protocol {
            Protocol::Cas => assert_eq!(new_token, token + 1),
            // Each renewal is a new epoch: only "greater" is promised.
            _ => assert!(new_token > token, "{new_token} after {token}"),
        }
        // ttl 10 s + poll 3.3 s + margins.
        let took = world.now_ms() - killed_at;
        assert!(took < 16_000, "{protocol:?}: took over after {took} ms");
        assert!(!world.nodes()[old].alive);
        assert_eq!(world.violations(), vec![], "{protocol:?}");
        // Brought back, the old leader campaigns again (as a follower).
        world.restart(old).unwrap();
        world.run_until(world.now_ms() + 5_000);
        assert!(world.nodes()[old].alive);
        assert_eq!(leader(&world).map(|(n, _)| n), Some(new));
        // The injected crash is on record, at the instant it was injected.
        assert!(world.config().node_faults.contains(&ElectorFault::Crash {
            node: old,
            at_ms: killed_at,
            restart_after: None,
        }));
    }
}

#[test]
fn a_clock_step_breaks_only_the_naive_variant() {
    for variant in [Variant::Safe, Variant::Naive] {
        let mut world = world(variant, Protocol::Cas);
        let (holder, _) = leader(&world).unwrap();
        let other = (holder + 1) % 3;
        // Another node's wall clock jumps 25 s (2.5 ttl) ahead.
        world.set_clock_offset(other, 25_000).unwrap();
        assert_eq!(world.nodes()[other].offset_ms, 25_000);
        world.run_until(world.now_ms() + 30_000);
        let violations = world.violations();
        match variant {
            Variant::Safe => assert_eq!(violations, vec![]),
            _ => {
                assert!(
                    violations
                        .iter()
                        .any(|v| matches!(v, ElectorViolation::TwoHolders { .. })),
                    "{violations:?}"
                );
                // The old holder's plain PUT lands over the new holder's.
                assert_fence_token_went_down(&violations);
            }
        }
    }
}

#[test]
fn a_pause_before_a_write_is_fenced_off_only_by_the_safe_protocol() {
    for variant in [Variant::Safe, Variant::Naive] {
        let mut world = world(variant, Protocol::Cas);
        let (holder, _) = leader(&world).unwrap();
        world
            .inject(ElectorFault::PauseBeforeWrite {
                node: holder,
                at_ms: 0,
                length: Duration::from_secs(15),
            })
            .unwrap();
        world.run_until(world.now_ms() + 30_000);
        let violations = world.violations();
        let refused = faults(&world)
            .iter()
            .any(|(n, what)| *n == Some(holder) && what.starts_with("fenced write refused"));
        assert!(
            faults(&world).iter().any(|(n, what)| *n == Some(holder)
                && what.starts_with("paused for 15000ms on its way to a write")),
            "{:?}",
            faults(&world)
        );
        match variant {
            Variant::Safe => {
                assert_eq!(violations, vec![]);
                assert!(refused, "the zombie's write was not refused");
            }
            _ => {
                assert!(!refused);
                assert_fence_token_went_down(&violations);
            }
        }
    }
}

#[test]
fn armed_store_faults_hit_the_next_matching_call() {
    let mut world = world(Variant::Safe, Protocol::Cas);
    for fault in [
        FaultKind::DropReply,
        FaultKind::Apply5xx,
        FaultKind::Conflict,
        FaultKind::Throttle { retry_after: None },
    ] {
        world.arm(fault);
    }
    assert_eq!(world.armed().count(), 4);
    assert_eq!(world.config().scripted.len(), 4);
    let before = world.report().faults;
    world.run_until(world.now_ms() + 30_000);
    assert_eq!(world.armed().count(), 0);
    assert_eq!(world.report().faults, before + 4);
    let seen: Vec<String> = faults(&world).into_iter().map(|(_, what)| what).collect();
    // The 429 takes the very next call (a follower's read comes before
    // the holder's next renewal); the others take three writes in turn.
    assert_eq!(
        seen,
        [
            "throttled",
            "write applied, reply lost",
            "write applied, answered 500",
            "answered 409",
        ]
    );
    assert_eq!(world.violations(), vec![]);
    assert!(leader(&world).is_some(), "the store faults left no leader");
}

#[test]
fn a_released_lease_is_taken_at_the_next_poll_and_the_node_campaigns_again() {
    let mut world = world(Variant::Safe, Protocol::Cas);
    let (holder, token) = leader(&world).unwrap();
    let released_at = world.now_ms();
    world
        .inject(ElectorFault::Release {
            node: holder,
            at_ms: 0,
        })
        .unwrap();
    assert!(run_until(&mut world, 10_000, |w| leader(w)
        .is_some_and(|(_, t)| t > token)));
    let (_, new_token) = leader(&world).unwrap();
    assert_eq!(new_token, token + 1);
    // A poll interval (3.3 s) and a few round trips, not a ttl.
    assert!(world.now_ms() - released_at < 5_000);
    let view = &world.nodes()[holder];
    assert!(view.alive && !view.resigned, "{view:?}");
    let seen: Vec<String> = faults(&world).into_iter().map(|(_, what)| what).collect();
    assert_eq!(seen, ["releasing", "campaigning again"]);
    assert_eq!(world.violations(), vec![]);
}

#[test]
fn an_added_node_takes_part_and_a_resigned_one_leaves() {
    let mut world = world(Variant::Safe, Protocol::Cas);
    let added = world.add_node();
    assert_eq!(added, 3);
    assert_eq!(world.config().nodes, 4);
    assert_eq!(world.nodes().len(), 4);
    for node in 0..3 {
        world
            .inject(ElectorFault::Resign { node, at_ms: 0 })
            .unwrap();
    }
    assert!(run_until(&mut world, 10_000, |w| leader(w)
        .is_some_and(|(n, _)| n == added)));
    let views = world.nodes();
    assert!(
        views[..3].iter().all(|v| v.resigned && !v.alive),
        "{views:?}"
    );
    assert_eq!(world.violations(), vec![]);
}

#[test]
fn single_steps_take_one_event_at_a_time() {
    let mut world = World::new(SimConfig::quiet(3, 2, Variant::Safe));
    let mut last = 0;
    for _ in 0..50 {
        let next = world.next_at().expect("an event pending");
        assert!(next >= last);
        assert_eq!(world.step_next(), Some(next));
        assert_eq!(world.now_ms(), next);
        last = next;
    }
    assert!(world.report().store_calls > 0);
}

#[test]
fn faults_for_a_node_that_does_not_exist_are_refused() {
    let mut world = World::new(SimConfig::quiet(3, 2, Variant::Safe));
    let err = world
        .inject(ElectorFault::Resign { node: 2, at_ms: 0 })
        .unwrap_err();
    assert_eq!(err, SimError::NoSuchNode(2));
    assert_eq!(err.to_string(), "there is no node 2");
    assert_eq!(world.set_clock_offset(5, 1), Err(SimError::NoSuchNode(5)));
    assert_eq!(world.restart(4), Err(SimError::NoSuchNode(4)));
    assert_eq!(world.restart(0), Err(SimError::Running(0)));
    assert_eq!(
        world.restart(0).unwrap_err().to_string(),
        "node 0 is running"
    );
    assert!(world.config().node_faults.is_empty());
}
