//! The `runlog` binary: the command line (`cli`), the demonstration (`demo`)
//! and the web view (`ui`), built over the library's public API only
//! (`runlog::engine`, `runlog::run`, `runlog::remote`). These modules belong to
//! the binary, not the library: an embedder's `cargo add runlog` compiles none
//! of them, nor clap, indicatif, tokio or axum (feature `cli` builds this).

// Layers of the binary, from the ground up (docs/ARCHITECTURE.md): `sys`
// (signals and the terminal), `ui`, `demo`, `cli`.
mod cli;
mod demo;
#[path = "main_sys.rs"]
mod sys;
mod ui;

fn main() -> std::process::ExitCode {
    cli::main()
}
