//! The engine's tests: the store, its files, recovery, damage, tampering, group
//! commit, permissions and the readers (`runlog::engine`), one module per scenario.
//! Run one with `cargo test --test engine MODULE` (e.g. `open_lock_wait`).
//!
//! The whole binary runs under the fuzz targets' capping allocator
//! (fuzz/fuzz_targets/cap_alloc.rs): any single allocation over 64 MiB aborts,
//! so a trusted length field shows up as a crash here as in fuzzing
//! (`hardening_permissions`, `fuzz_corpus_replay`).

#[path = "../cli_support/mod.rs"]
mod cli_support;
#[path = "../common/mod.rs"]
mod common;
#[path = "../depth/mod.rs"]
mod depth;
#[path = "../open_counting_vfs/mod.rs"]
mod open_counting_vfs;
#[path = "../skip_support/mod.rs"]
mod skip_support;

#[path = "../../fuzz/fuzz_targets/cap_alloc.rs"]
mod cap_alloc;
#[global_allocator]
static ALLOC: cap_alloc::CapAlloc = cap_alloc::CapAlloc;

mod backlog_bounds_memory_while_compaction_lags;
mod bug_failed_rotation_fsync_left_preallocated_zeros;
mod bug_jsonl_header_first_byte;
mod bug_jsonl_lost_newline_before_last_record;
mod bug_jsonl_resync_lookalike_line;
mod bug_lock_file_mode_under_umask;
mod bug_one_shot_catch_up;
mod bug_torn_header_of_only_segment;
mod damage_flip_every_bit;
mod damage_keyed_store;
mod damage_snapshot;
mod damage_snapshot_fallback_then_compact;
mod damage_truncate_every_offset;
mod engine_basics;
mod errors_print_once;
mod fixtures_read;
mod format_doc_examples;
mod fsyncgate_reopen_after_failed_fsync;
mod fuzz_corpus_replay;
mod group_commit_rotation_writes_staged_records;
mod group_commit_schedules;
mod group_commit_wakeups;
mod hardening_permissions;
mod hardening_symlinks;
mod integrity_errors_not_swallowed;
mod integrity_lock_follows_directory;
mod integrity_reader_during_append;
mod integrity_reader_during_rotation;
mod integrity_snapshot_limit;
mod integrity_verify_open_verdict;
mod integrity_wrong_key;
mod many_writer_schedules;
mod many_writers;
mod open_deferred_crash;
mod open_lock_wait;
mod open_one_shot_fsyncs;
mod open_reads_after_snapshot;
mod preallocated_segments;
mod prop_model;
mod readers_records_after;
mod realfs_reads;
mod recovery_partial_unlinks_after_compaction;
mod table_damage;
mod table_paged_open;
mod table_roundtrip;
mod table_scan_memory;
mod tamper_tagged_store;
