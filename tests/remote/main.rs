//! Shipping runs to object storage (`remote` feature): local backends, injected
//! faults, and a Ceph gateway (skipped unless `RUNLOG_REQUIRE_S3=1` or a gateway
//! is configured).
#![cfg(feature = "remote")]

#[path = "../depth/mod.rs"]
mod depth;
#[path = "../remote_support/mod.rs"]
mod remote_support;
#[path = "../skip_support/mod.rs"]
mod skip_support;

mod demo_lose_host;
mod remote_ceph;
mod remote_ceph_delayed;
mod remote_ceph_kill;
mod remote_ceph_outage;
mod remote_cli;
mod remote_compact_ships_snapshot;
mod remote_delta_tables;
mod remote_faults;
mod remote_inflight_rule_model;
mod remote_inline;
mod remote_lag;
mod remote_local_backends;
mod remote_parallel_restore;
mod remote_rounds_in_flight;
mod remote_run_fenced;
mod remote_status_deadline;
