//! The run model's tests (`runlog::run`): rules, resume sets, the run table, and
//! the integrity guarantees seen through runs.

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

mod damage_run_table_in_store;
mod integrity_full_disk;
mod integrity_retryable_create;
mod integrity_schema_version;
mod run_archive_lock;
mod run_checkpoint_undecodable;
mod run_delta_tail;
mod run_health;
mod run_model_rules;
mod run_resume_set;
mod run_served_same_as_direct;
mod run_start_units;
mod run_table_state;
mod run_tail_cache;
