//! Fingerprint syntax (`name=value[,name=value…]`) and what changed between two.

use super::doc::Fingerprint;
use super::transition::InitSpec;

impl InitSpec {
    /// Parses a fingerprint, `name=value[,name=value…]` (the CLI's
    /// `--fingerprint`). Names are non-empty and unique; values may
    /// be empty but contain no `,`. An empty string is the empty fingerprint.
    pub fn parse_fingerprint(s: &str) -> Result<Fingerprint, String> {
        let mut f = Fingerprint::new();
        if s.is_empty() {
            return Ok(f);
        }
        for part in s.split(',') {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| format!("fingerprint part {part:?} is not name=value"))?;
            let name = name.trim();
            if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
                return Err(format!("fingerprint part {part:?} has an invalid name"));
            }
            if f.insert(name.to_string(), value.to_string()).is_some() {
                return Err(format!("fingerprint part {name:?} is given twice"));
            }
        }
        Ok(f)
    }
}

/// Formats a fingerprint as `name=value,…`.
pub(crate) fn format_parts(f: &Fingerprint) -> String {
    let parts: Vec<String> = f.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join(",")
}

/// The names of the parts that differ (changed, added or removed), sorted.
pub(crate) fn changed_parts(old: &Fingerprint, new: &Fingerprint) -> Vec<String> {
    let mut names: Vec<String> = old
        .keys()
        .chain(new.keys())
        .filter(|k| old.get(*k) != new.get(*k))
        .cloned()
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_diffs() {
        let a = InitSpec::parse_fingerprint("size=10,mtime=5,params=x").unwrap();
        let b = InitSpec::parse_fingerprint("size=10,mtime=6,extra=").unwrap();
        assert_eq!(changed_parts(&a, &b), ["extra", "mtime", "params"]);
        assert!(changed_parts(&a, &a).is_empty());
        assert_eq!(format_parts(&a), "mtime=5,params=x,size=10");
        assert!(InitSpec::parse_fingerprint("a").is_err());
        assert!(InitSpec::parse_fingerprint("a=1,a=2").is_err());
        assert!(InitSpec::parse_fingerprint("=1").is_err());
    }
}
