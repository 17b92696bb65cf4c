//! Injected randomness: the core never draws from the environment.
//!
//! Adapters seed an [`Entropy`] from the operating system once per process;
//! the simulator seeds it from the schedule seed, so every run replays.

/// A small deterministic generator (xoshiro256**) for nonces, session ids
/// and backoff jitter. Not for cryptography: the values only need to be
/// unique, and a 128-bit seed from the OS makes collisions negligible.
#[derive(Clone, Debug)]
pub struct Entropy {
    s: [u64; 4],
}

impl Entropy {
    /// A generator from a seed. Equal seeds give equal sequences.
    ///
    /// In production, seed each process (or each operation) from the
    /// operating system's randomness (16 bytes from the OS, as
    /// `lease_lambda::os_entropy()` draws them).
    /// A fixed seed is for simulation and tests only: two clients seeded
    /// alike draw the same sessions and nonces, and only their holder names
    /// still tell their records apart.
    pub fn from_seed(seed: u128) -> Entropy {
        let mut sm = (seed as u64) ^ ((seed >> 64) as u64).rotate_left(32) ^ 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            sm = sm.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = sm;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let s = [next() ^ (seed >> 64) as u64, next(), next(), next()];
        Entropy { s }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// A fresh 128-bit identifier as 32 lowercase hex digits.
    pub fn id(&mut self) -> String {
        format!("{:016x}{:016x}", self.next_u64(), self.next_u64())
    }

    /// A uniform value in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The generator's whole state: a flight recorder
    /// ([`crate::trace`]) keeps it so that a replay draws the same
    /// nonces, session ids and jitter. It predicts every later draw, so it
    /// is as sensitive as the nonces themselves (no credential).
    pub fn state(&self) -> [u64; 4] {
        self.s
    }

    /// A generator in the state [`state`](Self::state) gave.
    pub fn from_state(s: [u64; 4]) -> Entropy {
        Entropy { s }
    }

    /// A new independent generator derived from this one.
    pub fn fork(&mut self) -> Entropy {
        Entropy::from_seed(((self.next_u64() as u128) << 64) | self.next_u64() as u128)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_distinct() {
        let mut a = Entropy::from_seed(42);
        let mut b = Entropy::from_seed(42);
        let mut c = Entropy::from_seed(43);
        let (x, y, z) = (a.id(), b.id(), c.id());
        assert_eq!(x, y);
        assert_ne!(x, z);
        assert_eq!(x.len(), 32);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            assert!(seen.insert(a.next_u64()));
            let u = a.unit();
            assert!((0.0..1.0).contains(&u));
        }
    }
}
