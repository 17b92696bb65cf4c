//! Sorting the few items a request or a report holds.
//!
//! An insertion sort: there are a handful (a request's headers or query
//! parameters, a probe's checks; at most a listing page's older epochs,
//! when there are more than the epochs protocol deletes at once), and
//! each type the standard library's sorts are used on links a driftsort
//! or an ipnsort of its own, about 3 KB of wasm each in the demo and the
//! Worker.

/// Sorts `items` in ascending order (stable).
pub(crate) fn small<T: Ord>(items: &mut [T]) {
    small_by(items, |a, b| a < b)
}

/// Sorts `items` so that no item is `less` than one before it (stable:
/// items neither is `less` than the other keep their order).
pub(crate) fn small_by<T>(items: &mut [T], less: impl Fn(&T, &T) -> bool) {
    for i in 1..items.len() {
        let mut j = i;
        while j > 0 && less(&items[j], &items[j - 1]) {
            items.swap(j - 1, j);
            j -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    /// Against the standard library's stable sort, on every ordering of
    /// short lists with repeated keys.
    #[test]
    fn sorts_as_the_standard_library_does() {
        for n in 0..7u32 {
            for code in 0..4u32.pow(n) {
                let items: Vec<(u32, u32)> =
                    (0..n).map(|i| ((code / 4u32.pow(i)) % 4, i)).collect();
                let mut ours = items.clone();
                super::small_by(&mut ours, |a, b| a.0 < b.0);
                let mut std = items.clone();
                std.sort_by_key(|p| p.0);
                assert_eq!(ours, std);
                let mut all = items.clone();
                super::small(&mut all);
                std.sort();
                assert_eq!(all, std);
            }
        }
    }
}
