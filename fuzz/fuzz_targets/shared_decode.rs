//! Fuzz target `shared_decode`: see `checks::shared_decode`.
#![no_main]

mod cap_alloc;
mod checks;

#[global_allocator]
static ALLOC: cap_alloc::CapAlloc = cap_alloc::CapAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::shared_decode(data));
