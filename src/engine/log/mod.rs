//! The log: the bytes of its segments and records, and how writers make
//! them durable together. Framing (`frame.rs`) and a segment's scan
//! (`scan.rs`) are pure functions over bytes; the group commit (`group.rs`,
//! with `gather.rs`'s adaptive delay) shares one fsync among a process's
//! appenders; the durability mark (`mark.rs`), the writer lock (`lock.rs`)
//! and `SHARED` with the sync lock (`writers.rs`) are what writer processes
//! on one store agree through (FORMAT.md §5.7, §5.8). The log knows no
//! writer type: the writer's state (`shared/`) holds these parts.

internal_mods! {
    frame;
    group;
    mark;
    scan;
    writers;
}
pub(crate) mod gather;
pub(crate) mod lock;
