//! One machine's part of a run split over many (`goodput run --shard i/N`), as k6's execution
//! segments split a test: shard `i` of `N` sends request `j` of a level when `j mod N = i`.
//! Every shard computes the one schedule of the whole run (the same seed, the same arrival
//! times, the same prompts by request number) and sends its own slice of it, so the shards
//! are disjoint and together exactly the single process's run: the same ids, prompts and
//! intended send times, whatever machine sends them.

use std::fmt;
use std::str::FromStr;

/// The most shards a run splits into.
pub const MAX_SHARDS: u32 = 10_000;

/// Shard `index` (from 0) of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// Whether this shard sends request `j` of a level.
    pub fn takes(&self, j: u64) -> bool {
        j % u64::from(self.count) == u64::from(self.index)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = crate::ValueError;

    /// `i/N`: shard `i` (0 ≤ i < N) of `N` (1 ≤ N ≤ [`MAX_SHARDS`]); the index is a Kubernetes
    /// Indexed Job's completion index.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            crate::ValueError::new(s, format!("expected INDEX/COUNT with 0 ≤ INDEX < COUNT ≤ {MAX_SHARDS}, e.g. 0/4"))
        };
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if count == 0 || count > MAX_SHARDS || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parsed_by_name_and_refused_by_name() {
        assert_eq!("1/3".parse::<Shard>(), Ok(Shard { index: 1, count: 3 }));
        assert_eq!(Shard { index: 1, count: 3 }.to_string(), "1/3");
        for bad in ["3/3", "1/0", "x/2", "1", "-1/2", "0/10001"] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.value == bad && e.expected.contains("INDEX/COUNT"), "{e}");
        }
    }

    proptest! {
        /// The shards of a split take each request exactly once.
        #[test]
        fn the_shards_are_disjoint_and_cover_the_run(count in 1u32..50, requests in 0u64..500) {
            for j in 0..requests {
                let takers = (0..count).filter(|&index| Shard { index, count }.takes(j)).count();
                prop_assert_eq!(takers, 1);
            }
        }
    }
}
