//! Each broken variant of `lease_core::mutants` (a fix undone, compiled
//! only into this test build: `make test-mutants`, which builds with
//! `--cfg lease_mutants`) is caught: by the product simulation's random
//! schedules, which break a rule on a schedule the product keeps, or by a
//! deterministic scenario.
#![cfg(all(lease_mutants, feature = "sim"))]

use lease_core::config::Protocol;
use lease_core::mutants::{set, Mutant};
use lease_core::sim::clients::{run, ClientKind, ClientsConfig, Rule};

/// Seeds searched per protocol and client mix.
const SEEDS: u64 = 670;

/// The first schedule (seed, protocol, mix) on which `mutant` breaks a
/// rule that the product, on the same schedule, keeps; with the rules.
fn first_catch(
    mutant: Mutant,
    protocols: &[Protocol],
    mixes: &[&[ClientKind]],
) -> Option<(u64, Protocol, Vec<ClientKind>, Vec<Rule>)> {
    for seed in 0..SEEDS {
        for &protocol in protocols {
            for kinds in mixes {
                let cfg = ClientsConfig::random(seed, protocol, kinds);
                set(Some(mutant));
                let broken = run(cfg.clone());
                set(None);
                if broken.violations.is_empty() {
                    continue;
                }
                let safe = run(cfg);
                let mut new: Vec<Rule> = broken
                    .violations
                    .iter()
                    .map(|v| v.rule)
                    .filter(|r| !safe.has(*r))
                    .collect();
                new.dedup();
                if !new.is_empty() {
                    eprintln!(
                        "{mutant:?}: seed {seed} {protocol} {kinds:?} breaks {new:?}; first: {}",
                        broken.violations[0]
                    );
                    return Some((seed, protocol, kinds.to_vec(), new));
                }
            }
        }
    }
    None
}

use ClientKind::{Cli, Elector, Hold, Operator, Singleton};

#[test]
fn a_late_release_that_says_already_lost_is_caught() {
    let found = first_catch(
        Mutant::LateReleaseAlreadyLost,
        &[Protocol::Cas, Protocol::Mutex],
        &[&[Cli, Cli, Operator]],
    );
    let (.., rules) = found.expect("caught within the seeds");
    assert!(rules.contains(&Rule::AlreadyLostChanged), "{rules:?}");
}

#[test]
fn unconfirmed_epochs_releases_and_breaks_are_caught() {
    let found = first_catch(
        Mutant::UnconfirmedEpochWrites,
        &[Protocol::Epochs],
        &[
            &[Cli, Cli, Operator],
            &[Hold, Operator],
            &[Elector, Operator],
        ],
    );
    let (.., rules) = found.expect("caught within the seeds");
    assert!(
        rules.contains(&Rule::OutcomeMismatch) || rules.contains(&Rule::ReleasedAfterTakeover),
        "{rules:?}"
    );
}

#[test]
fn a_singleton_claiming_its_lease_as_first_acquired_is_caught() {
    let found = first_catch(
        Mutant::ClaimOfFirstLease,
        &[Protocol::Cas, Protocol::Epochs],
        &[&[Singleton]],
    );
    let (.., rules) = found.expect("caught within the seeds");
    assert!(rules.contains(&Rule::OwnRecord), "{rules:?}");
}

#[test]
fn claims_dropped_at_the_next_acquisition_are_caught() {
    let found = first_catch(
        Mutant::ForgetClaimsOnAcquire,
        &[Protocol::Mutex, Protocol::Cas],
        &[&[Singleton], &[Elector]],
    );
    let (.., rules) = found.expect("caught within the seeds");
    assert!(rules.contains(&Rule::OwnRecord), "{rules:?}");
}

#[test]
fn a_protocol_check_that_stops_after_ten_pages_is_caught() {
    let found = first_catch(
        Mutant::TenPageProtocolCheck,
        &[Protocol::Cas, Protocol::Mutex],
        &[&[Singleton], &[Hold], &[Singleton, Hold, Cli, Elector]],
    );
    let (.., rules) = found.expect("caught within the seeds");
    assert!(
        rules.contains(&Rule::JobsOverlap) || rules.contains(&Rule::OutcomeMismatch),
        "{rules:?}"
    );
}
