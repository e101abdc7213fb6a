//! Numbered families of names — `step_0`, `step_1`, ... or `layer.3`,
//! `request 17`, whatever the prefix — detected generically: names that end in
//! a number and share what comes before it form a family once at least
//! [`MIN_MEMBERS`] distinct members exist. Answers list such a family as one
//! pattern (`step_*`, a glob that `aisp_profile_search` accepts) instead of
//! one row per member.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// Fewest distinct numbered names that make a family.
pub const MIN_MEMBERS: usize = 3;

/// The families found among a set of names.
#[derive(Debug, Default)]
pub struct Families {
    /// Head (name without its trailing number) → the members' numbers.
    heads: BTreeMap<String, BTreeSet<u64>>,
}

/// `step_12` → (`step_`, 12); names without a trailing number, or only a number, → None.
fn split(name: &str) -> Option<(&str, u64)> {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 12 {
        return None;
    }
    let (head, num) = name.split_at(name.len() - digits);
    if head
        .trim_end_matches(['_', '-', ' ', '#', ':', '.', '/'])
        .is_empty()
    {
        return None;
    }
    Some((head, num.parse().ok()?))
}

impl Families {
    /// Families among `names` (duplicates count once).
    pub fn detect<'a>(names: impl IntoIterator<Item = &'a str>) -> Families {
        let mut heads: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
        for name in names {
            if let Some((head, n)) = split(name) {
                heads.entry(head.to_string()).or_default().insert(n);
            }
        }
        heads.retain(|_, nums| nums.len() >= MIN_MEMBERS);
        Families { heads }
    }

    /// The name a member is listed under (`step_*`); other names unchanged.
    pub fn key<'a>(&self, name: &'a str) -> Cow<'a, str> {
        match split(name) {
            Some((head, _)) if self.heads.contains_key(head) => Cow::Owned(format!("{head}*")),
            _ => Cow::Borrowed(name),
        }
    }

    /// One sentence per family: `step_*` stands for 40 names, step_0 … step_39.
    pub fn describe(&self) -> Vec<String> {
        self.heads
            .iter()
            .map(|(head, nums)| {
                let lo = nums.first().copied().unwrap_or(0);
                let hi = nums.last().copied().unwrap_or(0);
                format!(
                    "`{head}*` groups {} numbered ranges ({head}{lo} … {head}{hi})",
                    nums.len()
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_names_group_by_their_prefix() {
        let names = [
            "step_0", "step_1", "step_2", "iter 7", "iter 8", "forward", "layer.3", "42",
        ];
        let f = Families::detect(names);
        assert_eq!(f.key("step_17"), "step_*");
        assert_eq!(f.key("forward"), "forward");
        // Two members are not a family.
        assert_eq!(f.key("iter 7"), "iter 7");
        assert_eq!(f.key("layer.3"), "layer.3");
        assert_eq!(f.key("42"), "42");
        assert_eq!(
            f.describe(),
            vec!["`step_*` groups 3 numbered ranges (step_0 … step_2)".to_string()]
        );
        assert!(Families::detect(["a1", "b2", "c3"]).describe().is_empty());
    }
}
