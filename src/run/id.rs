//! What a run id may be: it names a directory under the runs root, so it is
//! checked before any path is made of it.

/// Longest run id, in bytes.
pub(crate) const MAX_RUN_ID_BYTES: usize = 128;

/// Checks a run id: 1–128 bytes of ASCII letters, digits, `-`, `_` and `.`,
/// starting with a letter or a digit, with no `..` and not ending in `.`.
/// So an id is never taken for an option (`-x`), never hidden (`.x`), never
/// a path step or path-like (`..`, `a/b`), never trimmed by a filesystem
/// (`x.`), and needs no quoting in a shell. docs/CLI.md states the rule.
pub fn check_run_id(id: &str) -> std::result::Result<(), String> {
    if id.is_empty() || id.len() > MAX_RUN_ID_BYTES {
        return Err(format!(
            "run id must be 1–{MAX_RUN_ID_BYTES} bytes, not {}",
            id.len()
        ));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "run id {id:?} contains {c:?}; use only letters, digits, '-', '_' and '.'"
        ));
    }
    if !id.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "run id {id:?} must start with a letter or a digit (an id starting with '-' reads as an option, one starting with '.' is hidden)"
        ));
    }
    if id.contains("..") || id.ends_with('.') {
        return Err(format!(
            "run id {id:?} must not contain \"..\" or end with '.'"
        ));
    }
    Ok(())
}

/// True when `name` can be the name of a directory under `archive/`: one
/// plain path step.
pub(crate) fn is_archive_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name.len() <= MAX_RUN_ID_BYTES + 64
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
}
