//! Giving the heap back after a compaction.
//!
//! A compaction rebuilds a second copy of the state from disk (compact.rs) and
//! frees it when the snapshot is written. glibc keeps freed small allocations in
//! its arenas, so without a trim the process stays at about twice the state's
//! resident size after its first compaction (docs/PERFORMANCE.md, "Memory":
//! 2.00× after `compact()`, 1.00× after a trim). `malloc_trim(0)` returns the free
//! pages to the kernel. Other allocators return memory on their own; there this
//! does nothing.

/// Returns free heap pages to the kernel where the allocator keeps them (glibc).
pub(crate) fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes no pointers and only walks glibc's own arenas
        // under their locks; it is safe to call from any thread at any time.
        #[allow(unsafe_code)]
        unsafe {
            libc::malloc_trim(0);
        }
    }
}
