//! Command lines as stored in a run's summary: a flag and its value taken out, whichever way
//! it was written (`--flag VALUE` or `--flag=VALUE`), so a stored command can be made into
//! another run's (a repeat's, a merged run's).

/// `tokens` without `flag VALUE` and `flag=VALUE`.
pub fn strip(tokens: &[String], flag: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = tokens.iter();
    while let Some(t) = it.next() {
        if t == flag {
            it.next();
        } else if !t.strip_prefix(flag).is_some_and(|rest| rest.starts_with('=')) {
            out.push(t.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_goes_with_its_value_either_way_it_was_written() {
        let argv: Vec<String> = "run --out a --seed=7 --outer x --out=b".split(' ').map(String::from).collect();
        assert_eq!(strip(&argv, "--out"), ["run", "--seed=7", "--outer", "x"]);
        assert_eq!(strip(&argv, "--seed"), ["run", "--out", "a", "--outer", "x", "--out=b"]);
    }
}
