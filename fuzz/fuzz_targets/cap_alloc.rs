//! A global allocator that aborts on any single allocation over 64 MiB, so a
//! length field trusted before it is checked shows up as a crash, not an OOM.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};

/// The largest single allocation a decoder may make on fuzzed input.
pub const MAX_ALLOC: usize = 64 << 20;

/// Aborts on allocations above [`MAX_ALLOC`], else defers to the system allocator.
pub struct CapAlloc;

fn check(size: usize) {
    if size > MAX_ALLOC {
        eprintln!("allocation of {size} bytes exceeds the fuzzing cap of {MAX_ALLOC}");
        std::process::abort();
    }
}

// SAFETY: every method checks the size and then forwards its arguments unchanged
// to `System`, which upholds the `GlobalAlloc` contract.
unsafe impl GlobalAlloc for CapAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: forwarded unchanged (see above).
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: forwarded unchanged (see above).
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged (see above).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        // SAFETY: forwarded unchanged (see above).
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
