//! The I/O seam: every byte the engine reads or writes, every fsync,
//! rename, unlink and lock goes through [`Vfs`](vfs::Vfs) (`vfs.rs`). Behind
//! it the real filesystem (`realfs.rs`) and, for tests, the simulated one
//! with crashes and faults (`sim.rs`, feature `sim`). Above it, the file
//! operations the engine's writers share: the store directory's check and
//! durable creation (`dir.rs`), an atomic install and a torn tail's
//! quarantine (`files.rs`).

internal_mods! {
    vfs;
}
pub(crate) mod dir;
pub(crate) mod files;
pub(crate) mod realfs;
/// The simulated filesystem (test support under the `sim` feature).
#[cfg(feature = "sim")]
pub mod sim;
