//! Fuzz target `apply_input`: see `checks::apply_input`.
#![no_main]

mod cap_alloc;
mod checks;

#[global_allocator]
static ALLOC: cap_alloc::CapAlloc = cap_alloc::CapAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::apply_input(data));
