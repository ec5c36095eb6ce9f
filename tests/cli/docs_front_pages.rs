//! Proves the front pages read as written: README's Rust block is a whole
//! program inside `fn main` (no hidden `# Ok::<…>` line, which GitHub shows),
//! the crate's front page links the tour and needs no dev-dependency, and the
//! README's and the guide's Rust blocks are compiled as doctests.
const README: &str = include_str!("../../README.md");
const LIB: &str = include_str!("../../src/lib.rs");

#[test]
fn readme_rust_block_is_a_program_and_the_crate_page_links_the_tour() {
    let start = README.find("```rust").expect("README has a Rust block");
    let block = &README[start..];
    let block = &block[..block[3..].find("```").unwrap() + 3];
    assert!(block.contains("fn main()"), "{block}");
    assert!(
        !block.lines().any(|l| l.trim_start().starts_with("# ")),
        "{block}"
    );
    let front: String = LIB
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        front.contains("](crate::tour)"),
        "the front page does not link the tour"
    );
    assert!(
        !front.contains("tempfile"),
        "the front page example needs a dev-dependency"
    );
    assert!(LIB.contains("include_str!(\"../docs/TOUR.md\")"));
    assert!(LIB.contains("include_str!(\"../README.md\")"));
    assert!(LIB.contains("include_str!(\"../docs/GUIDE.md\")"));
}
