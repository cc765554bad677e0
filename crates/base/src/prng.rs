//! The one pseudo-random generator: workload trees (`ringio bench gen`), `ringio write`'s
//! random fill, the load generator's actions and the tests' seeded trees all draw from it. The
//! same seed gives the same sequence on every machine, so a seed names one tree.

/// xorshift64*: fast, small, and good enough to make file content and pick shapes; bytes need
/// only be incompressible, not secret.
#[derive(Debug, Clone)]
pub struct Prng(u64);

impl Prng {
    /// Seeded; the same seed gives the same sequence (any seed, zero included).
    pub fn new(seed: u64) -> Self {
        Prng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0); the modulo bias is irrelevant here.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Fills `buf`.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let tail = chunks.into_remainder();
        let last = self.next_u64().to_le_bytes();
        tail.copy_from_slice(&last[..tail.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sequence is part of the contract: `ringio bench gen --seed N` trees, and so the
    /// benchmark figures, depend on it.
    #[test]
    fn the_sequence_is_fixed() {
        let mut r = Prng::new(1);
        let first: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        let mut again = Prng::new(1);
        assert_eq!(first, (0..3).map(|_| again.next_u64()).collect::<Vec<_>>());
        let mut buf = [0u8; 11];
        Prng::new(1).fill(&mut buf);
        assert_eq!(buf[..8], first[0].to_le_bytes());
        assert_eq!(buf[8..], first[1].to_le_bytes()[..3]);
    }
}
