//! Proves the house's two import rules (docs/ARCHITECTURE.md, "Layers"), read
//! from the source as it stands, so a change that breaks one fails the build:
//!
//! 1. **Layers import downward, through the public API only.** The layers, from
//!    the ground up: `engine`, `remote`, `run` (the library), `ui`, `demo`,
//!    `cli` (modules of the binary, src/main.rs). A file of one layer names
//!    another layer (`crate::LAYER::…`, or `runlog::LAYER::…` from the binary's
//!    layers to the library's) only if that layer is below it, and then only
//!    items the layer makes public: never one of its private or crate-private
//!    modules (`crate::engine::frame::…`). The one exception is a declared seam
//!    ([`SEAMS`]): `engine::wire`, what the remote tier needs of the log's
//!    bytes. (The compiler holds the binary to the library's public API too;
//!    this also catches a layer named out of order.) The web view (`ui`)
//!    names no `engine` path at all: it takes what it needs from the run
//!    model.
//! 2. **No import cycle among the files of a layer.** Each `super::PATH`,
//!    `self::PATH` or `crate::LAYER::PATH` inside a layer is an edge from the
//!    file to the deepest module file the path names (`crate::engine::log::frame::x`
//!    is `engine/log/frame.rs`; a module is `NAME.rs` or `NAME/mod.rs`); the
//!    graph has no cycle.
//!
//! The source is read as text: `use` lines (braces included) and paths in
//! code. Comments and doc comments are skipped, so a path named in prose does
//! not count.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, from the ground up: the library's three, then the binary's.
const LAYERS: [&str; 6] = ["engine", "remote", "run", "ui", "demo", "cli"];

/// The layers that are modules of the binary (src/main.rs), not the library's:
/// they reach the library's layers as `runlog::LAYER::…`.
const BINARY_LAYERS: [&str; 3] = ["ui", "demo", "cli"];

/// Crate-private modules that are a layer's deliberate seam to the layers
/// above, and may be named by them: the remote tier ships the log's frames
/// byte for byte, so it reads and writes them through `engine::wire`.
const SEAMS: [(&str, &str); 1] = [("engine", "wire")];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its comments (line comments and `/* */`),
/// keeping line breaks so line numbers stay true. String literals are kept:
/// a path inside one is rare and, if it appears, worth a look.
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let (mut i, mut in_str) = (0, false);
    while i < b.len() {
        if in_str {
            if b[i] == b'\\' && i + 1 < b.len() {
                out.push(b[i] as char);
                out.push(b[i + 1] as char);
                i += 2;
                continue;
            }
            if b[i] == b'"' {
                in_str = false;
            }
            out.push(b[i] as char);
            i += 1;
        } else if text[i..].starts_with("//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if text[i..].starts_with("/*") {
            while i < b.len() && !text[i..].starts_with("*/") {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else {
            // A char literal holding a quote ('"') must not open a string.
            if text[i..].starts_with("'\"'") {
                out.push_str("'\"'");
                i += 3;
                continue;
            }
            if b[i] == b'"' {
                in_str = true;
            }
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Every path the code names after `prefix` (`crate::` or `super::`), with
/// the line: `crate::engine::frame::x` gives `engine::frame::x`; a brace
/// group `crate::engine::{a, b::c}` gives `engine::a` and `engine::b::c`.
fn paths_after(code: &str, prefix: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(prefix) {
        let start = from + at;
        from = start + prefix.len();
        // `xcrate::` or `a::crate::` is not this prefix.
        if code[..start]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
        {
            continue;
        }
        let line = code[..start].matches('\n').count() + 1;
        expand(&code[from..], String::new(), line, &mut out);
    }
    out
}

/// Reads one path (or brace group) at the start of `rest`, prefixed by `head`.
fn expand(rest: &str, head: String, line: usize, out: &mut Vec<(usize, String)>) {
    let ident: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let after = &rest[ident.len()..];
    let joined = if head.is_empty() {
        ident.clone()
    } else if ident.is_empty() {
        head.clone()
    } else {
        format!("{head}::{ident}")
    };
    if let Some(next) = after.strip_prefix("::") {
        if let Some(group) = next.strip_prefix('{') {
            // Split the group's top level on commas.
            let (mut depth, mut part) = (0usize, String::new());
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(part.trim_start(), joined.clone(), line, out);
                        part.clear();
                        continue;
                    }
                    _ => {}
                }
                part.push(c);
            }
            if !part.trim().is_empty() {
                expand(part.trim_start(), joined, line, out);
            }
        } else {
            expand(next, joined, line, out);
        }
    } else if !joined.is_empty() {
        out.push((line, joined));
    }
}

/// The modules a layer declares that are not plainly `pub` (private,
/// `pub(crate)`, or crate-private unless the `sim` feature: `internal_mods!`).
fn private_modules(layer: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(src().join(layer).join("mod.rs")).unwrap();
    let code = code_of(&text);
    let mut private = BTreeSet::new();
    let mut in_internal = false;
    for line in code.lines() {
        let t = line.trim();
        if t.starts_with("internal_mods!") {
            in_internal = true;
            continue;
        }
        if in_internal {
            if t.starts_with('}') {
                in_internal = false;
            } else if let Some(name) = t.strip_suffix(';') {
                // `room::name;` re-exports a room's module at `name`.
                let name = name.rsplit("::").next().unwrap_or(name);
                private.insert(name.trim().to_string());
            }
            continue;
        }
        for lead in ["mod ", "pub(crate) mod ", "pub(super) mod "] {
            if let Some(name) = t.strip_prefix(lead).and_then(|n| n.strip_suffix(';')) {
                private.insert(name.trim().to_string());
            }
        }
    }
    private
}

fn layer_of(file: &Path) -> Option<&'static str> {
    let rel = file.strip_prefix(src()).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    LAYERS.iter().copied().find(|l| *l == first)
}

fn rank(layer: &str) -> usize {
    LAYERS.iter().position(|l| *l == layer).unwrap()
}

#[test]
fn layers_import_downward_through_public_items_only() {
    let private: BTreeMap<&str, BTreeSet<String>> =
        LAYERS.iter().map(|l| (*l, private_modules(l))).collect();
    assert!(
        private["engine"].contains("frame") && private["run"].contains("transition"),
        "the mod.rs reader found no private modules: {private:?}"
    );
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut wrong = Vec::new();
    let mut seen_cross = 0;
    for f in &files {
        let Some(layer) = layer_of(f) else { continue };
        let code = code_of(&std::fs::read_to_string(f).unwrap());
        let mut paths: Vec<(usize, String, &str)> = paths_after(&code, "crate::")
            .into_iter()
            .map(|(l, p)| (l, p, "crate::"))
            .collect();
        if BINARY_LAYERS.contains(&layer) {
            paths.extend(
                paths_after(&code, "runlog::")
                    .into_iter()
                    .map(|(l, p)| (l, p, "runlog::")),
            );
        }
        for (line, path, prefix) in paths {
            let mut segs = path.split("::");
            let Some(target) = segs.next().and_then(|t| LAYERS.iter().find(|l| **l == t)) else {
                continue;
            };
            if *target == layer {
                continue;
            }
            seen_cross += 1;
            let at = format!(
                "{}:{line}: {prefix}{path}",
                f.strip_prefix(src()).unwrap().display()
            );
            if rank(target) > rank(layer) {
                wrong.push(format!("{at} (`{layer}` is below `{target}`)"));
            } else if let (Some(m), Some(_)) = (segs.next(), segs.next()) {
                // `crate::remote::gc` is the function the layer re-exports;
                // `crate::remote::gc::x` would be its private module's item.
                if private[target].contains(m) && !SEAMS.contains(&(*target, m)) {
                    wrong.push(format!("{at} (`{target}::{m}` is private to `{target}`)"));
                }
            }
        }
    }
    assert!(seen_cross > 50, "only {seen_cross} cross-layer paths read");
    assert!(
        wrong.is_empty(),
        "{} import(s) break the layering:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The web view reaches the engine only through the run model
/// (docs/ARCHITECTURE.md): no file of `ui` names `runlog::engine`.
#[test]
fn the_web_view_reaches_the_engine_only_through_the_run_model() {
    let mut files = Vec::new();
    rust_files(&src().join("ui"), &mut files);
    assert!(files.len() > 5, "only {} files under src/ui", files.len());
    let mut wrong = Vec::new();
    for f in &files {
        let code = code_of(&std::fs::read_to_string(f).unwrap());
        for (line, path) in paths_after(&code, "runlog::") {
            if path == "engine" || path.starts_with("engine::") {
                let f = f.strip_prefix(src()).unwrap().display();
                wrong.push(format!("{f}:{line}: runlog::{path}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the web view names the engine (take it from the run model):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_layer_has_an_import_cycle_among_its_files() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for f in &files {
        let Some(layer) = layer_of(f) else { continue };
        let code = code_of(&std::fs::read_to_string(f).unwrap());
        let dir = f.parent().unwrap();
        // `super::x` from `a/b.rs` is `a/x`; from `a/mod.rs` it is `a/../x`.
        let super_dir = if f.file_name().unwrap() == "mod.rs" {
            dir.parent().unwrap()
        } else {
            dir
        };
        // `self::x` from `a/mod.rs` is `a/x`; from `a/b.rs`, `a/b/x`.
        let self_dir = if f.file_name().unwrap() == "mod.rs" {
            dir.to_path_buf()
        } else {
            dir.join(f.file_stem().unwrap())
        };
        let mut targets = BTreeSet::new();
        for (_, path) in paths_after(&code, "super::") {
            let segs: Vec<&str> = path.split("::").collect();
            targets.extend(module_file(super_dir, &segs));
        }
        for (_, path) in paths_after(&code, "self::") {
            let segs: Vec<&str> = path.split("::").collect();
            targets.extend(module_file(&self_dir, &segs));
        }
        for (_, path) in paths_after(&code, "crate::") {
            let segs: Vec<&str> = path.split("::").collect();
            if segs.first() == Some(&layer) {
                targets.extend(module_file(&src().join(layer), &segs[1..]));
            }
        }
        targets.remove(f);
        edges.insert(f.clone(), targets);
    }
    let total: usize = edges.values().map(BTreeSet::len).sum();
    assert!(total > 100, "only {total} edges read");
    // Depth-first search for a back edge.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark: BTreeMap<&PathBuf, Mark> = edges.keys().map(|k| (k, Mark::New)).collect();
    fn visit<'a>(
        n: &'a PathBuf,
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        mark: &mut BTreeMap<&'a PathBuf, Mark>,
        stack: &mut Vec<&'a PathBuf>,
    ) -> Option<Vec<String>> {
        mark.insert(n, Mark::Open);
        stack.push(n);
        for m in edges.get(n).into_iter().flatten() {
            match mark.get(m).copied().unwrap_or(Mark::Done) {
                Mark::Open => {
                    let from = stack.iter().position(|s| *s == m).unwrap();
                    let show = |p: &PathBuf| p.strip_prefix(src()).unwrap().display().to_string();
                    let mut cycle: Vec<String> = stack[from..].iter().map(|p| show(p)).collect();
                    cycle.push(show(m));
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(c) = visit(m, edges, mark, stack) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
        }
        stack.pop();
        mark.insert(n, Mark::Done);
        None
    }
    let keys: Vec<&PathBuf> = edges.keys().collect();
    for k in keys {
        if mark[k] == Mark::New
            && let Some(cycle) = visit(k, &edges, &mut mark, &mut Vec::new())
        {
            panic!("an import cycle: {}", cycle.join(" -> "));
        }
    }
}

/// The deepest module file the path `segs` names from `dir` (whose modules
/// its first segment names): each segment a module `NAME.rs` or
/// `NAME/mod.rs` inside the previous one; a leading `super` goes up from
/// `dir`. `None` when the first segment is no module (an item).
fn module_file(dir: &Path, segs: &[&str]) -> Option<PathBuf> {
    let mut dir = dir.to_path_buf();
    let mut segs = segs;
    while let Some((&"super", rest)) = segs.split_first() {
        dir = dir.parent()?.to_path_buf();
        segs = rest;
    }
    let mut found = None;
    for name in segs {
        if name.is_empty() {
            break;
        }
        let file = [
            dir.join(format!("{name}.rs")),
            dir.join(name).join("mod.rs"),
        ]
        .into_iter()
        .find(|p| p.exists());
        match file {
            Some(file) => {
                found = Some(file);
                dir = dir.join(name);
            }
            None => break,
        }
    }
    found
}

/// The layers whose messages speak of the library: they never name a command
/// of the CLI (the CLI adds those where it reports an error).
const LIBRARY_LAYERS: [&str; 3] = ["engine", "remote", "run"];

/// The CLI's commands, read from the binary's own help (`Commands:` section).
fn cli_commands() -> Vec<String> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--help")
        .output()
        .expect("run runlog --help");
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let section = help
        .split("Commands:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Commands: section in runlog --help:\n{help}"));
    section
        .lines()
        .skip(1) // the rest of the `Commands:` line
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| *w != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn library_messages_name_no_cli_command() {
    let commands = cli_commands();
    assert!(
        commands.len() > 15 && commands.iter().any(|c| c == "archive"),
        "read too few commands from --help: {commands:?}"
    );
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut wrong = Vec::new();
    let mut read = 0;
    for f in &files {
        if !layer_of(f).is_some_and(|l| LIBRARY_LAYERS.contains(&l)) {
            continue;
        }
        read += 1;
        let code = code_of(&std::fs::read_to_string(f).unwrap());
        // Inside the layer's own unit tests a command may be named (as input).
        let code = code.split("#[cfg(test)]").next().unwrap_or("");
        for (n, line) in code.lines().enumerate() {
            let named = line.contains("`runlog")
                || commands
                    .iter()
                    .any(|c| line.contains(&format!("runlog {c} ")))
                || commands
                    .iter()
                    .any(|c| line.contains(&format!("runlog {c}`")));
            if named {
                wrong.push(format!(
                    "{}:{}: {}",
                    f.strip_prefix(src()).unwrap().display(),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(read > 60, "only {read} library files read");
    assert!(
        wrong.is_empty(),
        "library messages name CLI commands (the CLI adds those):\n{}",
        wrong.join("\n")
    );
}

/// The files that hold an `unsafe` block or function, from the source.
fn files_with_unsafe() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files
        .iter()
        .filter(|f| {
            let code = code_of(&std::fs::read_to_string(f).unwrap());
            code.contains("unsafe {") || code.contains("unsafe fn")
        })
        .map(|f| format!("src/{}", f.strip_prefix(src()).unwrap().display()))
        .collect()
}

#[test]
fn architecture_lists_every_file_that_holds_unsafe() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md"))
            .unwrap();
    let section = doc
        .split("## Where the unsafe is")
        .nth(1)
        .expect("docs/ARCHITECTURE.md has a \"Where the unsafe is\" section");
    let section = section.split("\n## ").next().unwrap();
    let listed: BTreeSet<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `src/"))
        .filter_map(|l| l.split('`').next())
        .map(|f| format!("src/{f}"))
        .collect();
    let found = files_with_unsafe();
    assert!(
        found.contains("src/sys.rs"),
        "the scan found no unsafe: {found:?}"
    );
    assert_eq!(
        listed, found,
        "docs/ARCHITECTURE.md's unsafe table (left) must name exactly the files holding unsafe (right)"
    );
}

/// docs/ARCHITECTURE.md's file map: every file under `src/` but a `mod.rs`,
/// named in backticks in its layer's section (the section whose heading
/// names `src/LAYER/`), by its path from the layer or from `src/`; a file at
/// the top of `src/`, anywhere on the page.
#[test]
fn architecture_names_every_source_file_in_its_layers_section() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md"))
            .unwrap();
    let sections: Vec<&str> = doc.split("\n## ").collect();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut missing = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(src())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel.ends_with("mod.rs") {
            continue;
        }
        let named = match rel.split_once('/') {
            None => doc.contains(&format!("`{rel}`")) || doc.contains(&format!("`src/{rel}`")),
            Some((layer, in_layer)) => {
                let heading = format!("`src/{layer}/`");
                let section = sections
                    .iter()
                    .find(|s| s.lines().next().is_some_and(|h| h.contains(&heading)))
                    .unwrap_or_else(|| {
                        panic!("docs/ARCHITECTURE.md has no section headed with {heading}")
                    });
                [
                    format!("`{in_layer}`"),
                    format!("`{rel}`"),
                    format!("`src/{rel}`"),
                ]
                .iter()
                .any(|n| section.contains(n.as_str()))
            }
        };
        if !named {
            missing.push(format!("src/{rel}"));
        }
    }
    assert!(
        files.len() > 100,
        "the scan found only {} files",
        files.len()
    );
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md's file map does not name these files in their layer's section: {missing:?}"
    );
}

#[test]
fn the_path_reader_expands_groups_and_skips_comments() {
    let code = code_of(
        "use crate::engine::{a, b::{c, d}, e::f};\n// crate::run::x\nlet s = \"//\"; crate::run::y();\n",
    );
    let got = paths_after(&code, "crate::");
    assert_eq!(
        got,
        vec![
            (1, "engine::a".to_string()),
            (1, "engine::b::c".to_string()),
            (1, "engine::b::d".to_string()),
            (1, "engine::e::f".to_string()),
            (3, "run::y".to_string()),
        ]
    );
}

/// The longest a function in `src/` may be, in lines from its `fn` to its
/// closing brace (issue 49): longer ones are split into named steps. A
/// function whose body is a single `match` over cases is the exception.
const MAX_FUNCTION_LINES: usize = 150;

/// Every function of `text` (rustfmt's layout: a body closes with `}` at
/// the indentation of its `fn` line) longer than [`MAX_FUNCTION_LINES`]
/// and not a single `match`: (line of its `fn`, name, lines).
fn long_functions(text: &str) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let indent = &l[..l.len() - t.len()];
        let after_vis = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        let after_kw = ["const ", "async ", "unsafe "]
            .iter()
            .fold(after_vis, |s, k| s.strip_prefix(k).unwrap_or(s));
        let Some(rest) = after_kw.strip_prefix("fn ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The line that opens the body; a declaration without one is skipped.
        let Some(open) = (i..lines.len()).find(|&j| {
            let e = lines[j].trim_end();
            e.ends_with('{') || e.ends_with(';')
        }) else {
            continue;
        };
        if lines[open].trim_end().ends_with(';') {
            continue;
        }
        let close_line = format!("{indent}}}");
        let Some(close) = (open + 1..lines.len()).find(|&j| lines[j] == close_line) else {
            continue;
        };
        let n = close - i + 1;
        let body: Vec<&str> = lines[open + 1..close]
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .collect();
        let one_match = body.first().is_some_and(|f| f.starts_with("match "))
            && lines[close - 1] == format!("{indent}    }}");
        if n > MAX_FUNCTION_LINES && !one_match {
            out.push((i + 1, name, n));
        }
    }
    out
}

#[test]
fn the_function_finder_sees_long_bodies_and_spares_a_single_match() {
    let long = |head: &str, body: &str| {
        let mut s = format!("    {head} {{\n");
        for _ in 0..MAX_FUNCTION_LINES {
            s.push_str(&format!("        {body}\n"));
        }
        s.push_str("    }\n");
        s
    };
    let f = long("pub(crate) fn steps(x: u8) -> u8", "let x = x + 1;");
    assert_eq!(
        long_functions(&f),
        [(1, "steps".to_string(), MAX_FUNCTION_LINES + 2)]
    );
    let m = format!(
        "    fn cases(x: u8) -> u8 {{\n        match x {{\n{}        }}\n    }}\n",
        "            0 => 1,\n".repeat(MAX_FUNCTION_LINES)
    );
    assert!(long_functions(&m).is_empty(), "a single match");
    assert!(long_functions("fn short() {\n    1;\n}\n").is_empty());
}

#[test]
fn no_function_in_src_is_longer_than_its_limit() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut long = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, name, n) in long_functions(&text) {
            let rel = f.strip_prefix(src()).unwrap().display().to_string();
            long.push(format!("src/{rel}:{line} {name}: {n} lines"));
        }
    }
    assert!(
        files.len() > 100,
        "the scan found only {} files",
        files.len()
    );
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split them into named steps): {long:#?}"
    );
}

/// The engine's rooms in the order ARCHITECTURE.md gives them: a file of a
/// room imports (through `crate::engine::ROOM::…`) only its own room and the
/// rooms before it.
const ENGINE_ROOMS: [&str; 7] = ["io", "log", "snapshot", "load", "read", "shared", "store"];

#[test]
fn engine_rooms_import_only_their_own_and_earlier_rooms() {
    let engine = src().join("engine");
    let mut files = Vec::new();
    rust_files(&engine, &mut files);
    let room_of = |f: &Path| {
        let rel = f.strip_prefix(&engine).ok()?;
        let first = rel.components().next()?.as_os_str().to_str()?;
        ENGINE_ROOMS.iter().position(|r| *r == first)
    };
    let mut read = 0;
    let mut upward = Vec::new();
    for f in &files {
        let Some(mine) = room_of(f) else { continue };
        let code = code_of(&std::fs::read_to_string(f).unwrap());
        for (line, path) in paths_after(&code, "crate::engine::") {
            let Some(theirs) = ENGINE_ROOMS
                .iter()
                .position(|r| path == *r || path.starts_with(&format!("{r}::")))
            else {
                continue;
            };
            read += 1;
            if theirs > mine {
                upward.push(format!(
                    "src/engine/{}:{line} ({}) imports crate::engine::{path} ({})",
                    f.strip_prefix(&engine).unwrap().display(),
                    ENGINE_ROOMS[mine],
                    ENGINE_ROOMS[theirs]
                ));
            }
        }
    }
    assert!(read > 50, "only {read} imports between rooms read");
    assert!(
        upward.is_empty(),
        "an engine room imports a later one (docs/ARCHITECTURE.md gives their order): {upward:#?}"
    );
}
