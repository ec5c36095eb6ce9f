//! The `runlog` binary's tests: commands, output, refusals, exit codes, the
//! examples and the docs' front pages. Tests that need tmux, python or a C
//! compiler skip, printing a `SKIPPED` line the harness does not capture,
//! unless `RUNLOG_REQUIRE_TMUX=1` / `RUNLOG_REQUIRE_PYTHON=1` /
//! `RUNLOG_REQUIRE_CC=1` makes that a failure.

#[path = "../cli_support/mod.rs"]
mod cli_support;
#[path = "../depth/mod.rs"]
mod depth;
#[path = "../cli_support/faultshim.rs"]
mod faultshim;
#[path = "../skip_support/mod.rs"]
mod skip_support;

mod cli_acknowledged_never_torn;
mod cli_apply_kill9;
mod cli_closed_stdout;
mod cli_demo_cleanup;
mod cli_errors_in_runlogs_words;
mod cli_fault_soak;
mod cli_get_unit;
mod cli_help;
mod cli_item_refusal_shows_the_shape;
mod cli_lock_wait_visible;
mod cli_many_writers_kill9;
mod cli_nothing_silent;
mod cli_output_consistent;
mod cli_parallel_writers;
mod cli_readers_live;
mod cli_rebuild_damaged_says_next_step;
mod cli_refusals;
mod cli_resume_set;
mod cli_run_ids;
mod cli_serve;
mod cli_start_fingerprint;
mod cli_status_watch;
mod cli_tagged;
mod cli_ui_browser;
mod cli_ui_view;
mod cli_verify_beside_writers;
mod cli_watch_tmux;
mod demo_main_job;
mod docs_commands;
mod docs_front_pages;
mod example_args_validated;
mod example_driver_py;
mod example_orchestrator;
mod example_pipeline;
mod example_scale;
mod house_layers;
