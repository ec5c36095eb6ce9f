//! The `runlog` binary: everything lives in the library's `cli` module.

fn main() -> std::process::ExitCode {
    runlog::cli::main()
}
