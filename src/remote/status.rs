//! The one status of a store's remote: what a shipping [`super::Replication`]
//! reports of itself ([`super::Replication::status`]), and what a reader of
//! the store's directory and the chain head sees without claiming or shipping
//! anything ([`RemoteStatus::read`]: `runlog status` and `runlog remote
//! status`).

use super::chain::latest_manifest;
use super::client::Remote;
use super::config::RemoteConfig;
use super::error::Result;
use crate::engine::RealFs;
use serde::Serialize;
use std::path::Path;
use std::time::Duration;

/// A store's remote: where it ships, what the chain holds and how far it lags
/// behind the local log. Under `async`, `lag` is what losing this host would
/// lose; under `sync` it is 0 once every acknowledged change returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteStatus {
    /// The remote's URL.
    pub url: String,
    /// `sync` or `async`.
    pub policy: String,
    /// The epoch this directory's last writer claimed (0: none yet).
    pub epoch: u64,
    /// The chain head's epoch as last seen (0: no chain yet); newer than
    /// `epoch` once this host is fenced.
    pub head_epoch: u64,
    /// The chain head's manifest number.
    pub manifest: u64,
    /// The highest seq durable locally.
    pub durable: u64,
    /// The highest seq the remote chain holds.
    pub shipped: u64,
    /// `durable - shipped` (0 when the chain is ahead).
    pub lag: u64,
    /// A newer epoch holds the chain: this host was fenced.
    pub fenced: bool,
    /// Ship rounds its writer keeps in flight at most (FORMAT.md §13.4).
    pub rounds_in_flight: u64,
    /// Manifests this handle landed (`None`: read from the directory and the
    /// chain head, not from a shipping handle).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u64>,
    /// Bytes this handle uploaded (`None` as for `rounds`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// This handle's last shipping error (async), cleared by the next round
    /// that lands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl RemoteStatus {
    /// The remote of the store in `dir` (its `REMOTE` file) whose local log is
    /// durable through `durable`, read from the chain head without claiming or
    /// shipping anything (`None` when the store has no remote). When `within`
    /// is set the remote must answer within it: past it, the pending request
    /// is dropped and the read fails with an error saying no answer came
    /// within `within` (nothing is left running). The store's own files are
    /// read before the clock matters.
    pub fn read(
        dir: &Path,
        durable: u64,
        within: Option<Duration>,
    ) -> Result<Option<RemoteStatus>> {
        let Some(config) = RemoteConfig::read(&RealFs, dir)? else {
            return Ok(None);
        };
        let remote = Remote::open(&config.url)?;
        let remote = match within {
            Some(d) => remote.with_deadline(d),
            None => remote,
        };
        let head = latest_manifest(&remote)?;
        let shipped = head.as_ref().map_or(0, |h| h.shipped);
        let head_epoch = head.as_ref().map_or(0, |h| h.epoch);
        Ok(Some(RemoteStatus {
            policy: config.policy.name().into(),
            epoch: config.epoch,
            head_epoch,
            manifest: head.as_ref().map_or(0, |h| h.number),
            durable,
            shipped,
            lag: durable.saturating_sub(shipped),
            // Another directory's head over an epoch this one held (§13.3.1).
            fenced: config.epoch > 0
                && head_epoch > config.epoch
                && !head
                    .as_ref()
                    .is_some_and(|h| h.held_by(&config.holder, config.epoch)),
            rounds_in_flight: config
                .rounds_in_flight
                .unwrap_or(super::layout::ROUNDS_IN_FLIGHT),
            url: config.url,
            rounds: None,
            bytes: None,
            last_error: None,
        }))
    }
}
