//! The safety rules, written once, for every checker.
//!
//! Four checkers judge what happened, each in its own world: the elector
//! simulation (`lease_sim::elector`), the product simulation
//! (`lease_sim::clients`), the model (`lease-core/tests/model.rs`) and
//! the fleet lab (`lease-tests`' `lab::check`, over real processes and a
//! real store). Each gathers its facts (who held or ran work when, which
//! tokens acquisitions handed out, what the store applied) and asks these
//! rules; each keeps only its own excuses (a node whose clock lagged, a
//! process frozen past its deadline whose writes the token refused).
//!
//! Built with the feature `verify` (the simulator, the `lease-sim` crate,
//! turns it on), never part of a product build. `docs/verification.md` lists the rules
//! each checker adds to these.

/// Rule 1, one holder at a time: the pairs of `spans` (each `[start, end)`,
/// in any order, in one time unit) that overlap, as `(a, b, from)`: `a`
/// starts no later than `b`, and both run from `from` (the start of `b`).
/// Empty spans overlap nothing. A checker drops the pairs its rule allows
/// (the same node, say).
pub fn overlaps(spans: &[(u64, u64)]) -> Vec<(usize, usize, u64)> {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    // Unstable is enough: the index in the key makes the order total.
    order.sort_unstable_by_key(|&i| (spans[i].0, i));
    overlaps_in(spans, &order)
}

/// [`overlaps`] for spans already in order of their starts (a checker
/// that keeps them so need not sort them again).
pub fn overlaps_sorted(spans: &[(u64, u64)]) -> Vec<(usize, usize, u64)> {
    debug_assert!(
        spans.windows(2).all(|w| w[0].0 <= w[1].0),
        "spans not in order"
    );
    let order: Vec<usize> = (0..spans.len()).collect();
    overlaps_in(spans, &order)
}

fn overlaps_in(spans: &[(u64, u64)], order: &[usize]) -> Vec<(usize, usize, u64)> {
    let order: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&i| spans[i].0 < spans[i].1)
        .collect();
    let mut found = Vec::new();
    for (x, &a) in order.iter().enumerate() {
        for &b in &order[x + 1..] {
            if spans[b].0 >= spans[a].1 {
                break;
            }
            found.push((a, b, spans[b].0));
        }
    }
    found
}

/// Rule 2, fencing tokens strictly increase: whether an acquisition may
/// hand out `token` when `highest` is the greatest token handed out before
/// it (`None`: the first).
pub fn token_follows(highest: Option<u64>, token: u64) -> bool {
    highest.is_none_or(|h| token > h)
}

/// Rule 2 over acquisitions in the order they happened: the index of each
/// whose token is not greater than every earlier one, with the highest
/// before it.
pub fn tokens_not_increasing(tokens: impl IntoIterator<Item = u64>) -> Vec<(usize, u64)> {
    let mut highest = None;
    let mut found = Vec::new();
    for (i, token) in tokens.into_iter().enumerate() {
        if !token_follows(highest, token) {
            found.push((i, highest.unwrap_or_default()));
        }
        highest = Some(highest.map_or(token, |h: u64| h.max(token)));
    }
    found
}

/// Rule 3, a token the store holds never goes down (the lease record's,
/// and the protected object's under fenced writes): whether a write of
/// `token` may follow `highest`, the greatest applied before it.
pub fn not_lowered(highest: u64, token: u64) -> bool {
    token >= highest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_spans_are_paired_once_in_start_order() {
        let spans = [(10, 20), (0, 5), (15, 30), (20, 25), (3, 3)];
        assert_eq!(overlaps(&spans), [(0, 2, 15), (2, 3, 20)]);
        assert!(overlaps(&[(0, 10), (10, 20)]).is_empty(), "back to back");
        assert_eq!(overlaps_sorted(&[(0, 5), (3, 3), (4, 9)]), [(0, 2, 4)]);
    }

    #[test]
    fn tokens_must_exceed_every_earlier_one() {
        assert!(token_follows(None, 1) && token_follows(Some(1), 2));
        assert!(!token_follows(Some(2), 2));
        assert_eq!(tokens_not_increasing([1, 3, 2, 3, 4]), [(2, 3), (3, 3)]);
        assert!(not_lowered(3, 3) && !not_lowered(3, 2));
    }
}
