//! Fuzz target `tail_decode`: see `checks::tail_decode`.
#![no_main]

mod cap_alloc;
mod checks;

#[global_allocator]
static ALLOC: cap_alloc::CapAlloc = cap_alloc::CapAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::tail_decode(data));
