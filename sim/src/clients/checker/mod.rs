//! The checker: the rules (see the module docs of [`super`]) applied to
//! what the store held and when work ran.

mod facts;
mod ops;
mod rules;

use super::report::{Report, Violation};
use super::state::Inner;
use facts::lagged;
use ops::check_ops;
#[cfg(feature = "trace")]
use rules::check_traces;
use rules::{
    check_jobs, check_liveness, check_quiet_acquires, check_services, check_shards, check_ticks,
};

pub(super) fn check(w: &mut Inner, end: u64) -> Report {
    w.settle_owned();
    let mut found = std::mem::take(&mut w.violations);
    let mut excused = Vec::new();
    check_jobs(w, end, &mut found, &mut excused);
    check_ops(w, end, &mut found);
    check_liveness(w, end, &mut found);
    check_quiet_acquires(w, &mut found);
    check_ticks(w, &mut found);
    check_services(w, &mut found, &mut excused);
    check_shards(w, end, &mut found);
    #[cfg(feature = "trace")]
    check_traces(w, end, &mut found);
    let (lag, mut violations): (Vec<Violation>, Vec<Violation>) = found
        .into_iter()
        .partition(|v| v.node.is_some_and(|n| lagged(w, n, v.at_ms)));
    excused.extend(lag);
    violations.sort_by_key(|a| (a.at_ms, a.rule));
    excused.sort_by_key(|a| (a.at_ms, a.rule));
    Report {
        config: (*w.cfg).clone(),
        violations,
        excused,
        counts: w.counts.clone(),
        timeline: std::mem::take(&mut w.timeline),
    }
}
