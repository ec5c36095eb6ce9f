//! One function per command: call the library, print the result.

use super::args::{Command, NewRun, parse_amount, parse_budgets, parse_deps, parse_list};
use super::{EXIT_DONE, EXIT_FAILED};
use crate::engine::{self, Codec, Integrity, Keyed, RealFs};
use crate::run::fingerprint::parse_parts;
use crate::run::json::parse_json_limited;
use crate::run::ops::items_from_json;
use crate::run::render::{render_list, render_status, status_json};
use crate::run::{
    Change, InitSpec, Launch, PhaseStatus, RunError, RunKeyed, RunStatus, Runs, Transition,
    UnitStatus,
};
use serde::Serialize;
use serde_json::json;
use std::io::Write;

fn invalid(s: impl Into<String>) -> RunError {
    RunError::Invalid(s.into())
}

/// Prints `value` as one JSON line (or pretty when not `--json`).
fn print_json<T: Serialize>(value: &T, compact: bool) -> Result<(), RunError> {
    let text = if compact {
        serde_json::to_string(value)
    } else {
        serde_json::to_string_pretty(value)
    }
    .map_err(|e| invalid(format!("cannot print JSON: {e}")))?;
    println_out(&text)
}

/// Writes `value` as JSON straight to stdout (one line with `--json`, else
/// pretty), without building the text first: a large run's document streams.
fn write_json<T: Serialize>(value: &T, compact: bool) -> Result<(), RunError> {
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
    let r = if compact {
        serde_json::to_writer(&mut out, value)
    } else {
        serde_json::to_writer_pretty(&mut out, value)
    };
    let io = |e: std::io::Error| RunError::Io {
        op: "write stdout",
        path: "-".into(),
        source: e,
    };
    match r {
        Err(e) if e.is_io() => return Err(io(e.into())),
        Err(e) => return Err(invalid(format!("cannot print JSON: {e}"))),
        Ok(()) => {}
    }
    writeln!(out).and_then(|_| out.flush()).map_err(io)
}

fn println_out(text: &str) -> Result<(), RunError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|_| out.flush())
        .map_err(|e| RunError::Io {
            op: "write stdout",
            path: "-".into(),
            source: e,
        })
}

fn print_seq(json: bool, seq: u64) -> Result<u8, RunError> {
    if json {
        print_json(&json!({ "seq": seq }), true)?;
    } else {
        println_out(&format!("seq {seq}"))?;
    }
    Ok(EXIT_DONE)
}

fn parse_status<T: std::str::FromStr<Err = String>>(s: &str) -> Result<T, RunError> {
    s.parse().map_err(RunError::Invalid)
}

fn init_spec(
    id: String,
    task: String,
    fingerprint: Option<&str>,
    new: &NewRun,
) -> Result<(InitSpec, Codec), RunError> {
    let codec = match new.codec.as_str() {
        "jsonl" => Codec::Jsonl,
        "binary" => Codec::Binary,
        c => return Err(invalid(format!("unknown codec {c:?}; use jsonl or binary"))),
    };
    let launch = match &new.launch {
        Some(text) => {
            let v = parse_json_limited(text).map_err(|e| invalid(format!("--launch: {e}")))?;
            Some(Launch::from_json(&v).map_err(invalid)?)
        }
        None => None,
    };
    let spec = InitSpec {
        id,
        task,
        units: parse_list("unit", new.units.as_deref().unwrap_or(""))?,
        deps: parse_deps(&new.deps)?,
        launch,
        fingerprint: parse_parts(fingerprint.unwrap_or("")).map_err(invalid)?,
        budgets: parse_budgets(&new.budgets)?,
    };
    crate::run::check_init(&spec).map_err(|e| invalid(e.to_string()))?;
    Ok((spec, codec))
}

/// Runs one command.
pub fn dispatch(runs: &Runs, json: bool, command: Command) -> Result<u8, RunError> {
    match command {
        Command::Init {
            id,
            task,
            fingerprint,
            new,
        } => {
            let (spec, codec) = init_spec(id, task, fingerprint.as_deref(), &new)?;
            let run = runs.clone().with_codec(codec).init(spec)?;
            if json {
                print_json(
                    &json!({ "id": run.id(), "seq": run.store().last_seq() }),
                    true,
                )?;
            } else {
                println_out(&format!("created run {}", run.id()))?;
            }
            Ok(EXIT_DONE)
        }
        Command::Start {
            id,
            fingerprint,
            task,
            new,
        } => {
            let task = task.unwrap_or_else(|| id.clone());
            let (spec, codec) = init_spec(id, task, Some(&fingerprint), &new)?;
            let started = runs.clone().with_codec(codec).start(spec)?;
            for w in &started.warnings {
                eprintln!("runlog: warning {}: {}", w.code, w.message);
            }
            if json {
                let v = json!({
                    "id": started.run.id(),
                    "resumed": started.resumed,
                    "warnings": started.warnings,
                });
                print_json(&v, true)?;
            } else {
                let what = if started.resumed {
                    "resumed"
                } else {
                    "started"
                };
                println_out(&format!("{what} run {}", started.run.id()))?;
            }
            Ok(EXIT_DONE)
        }
        Command::Unit {
            run,
            unit,
            status,
            note,
            deps,
        } => {
            let status: UnitStatus = parse_status(&status)?;
            let deps = deps.map(|d| parse_list("dependency", &d)).transpose()?;
            let change = Change::Unit {
                unit,
                status,
                note,
                deps,
            };
            print_seq(json, runs.change(&run, change)?)
        }
        Command::Phase { run, phase, status } => {
            let status: PhaseStatus = parse_status(&status)?;
            print_seq(json, runs.change(&run, Change::Phase { phase, status })?)
        }
        Command::Item { run, item: text } => {
            let v = parse_json_limited(&text).map_err(invalid)?;
            let items = items_from_json(v).map_err(invalid)?;
            print_seq(json, runs.change(&run, Change::Items { items })?)
        }
        Command::Resolve { run, item_id, note } => {
            let change = Change::Resolve { id: item_id, note };
            print_seq(json, runs.change(&run, change)?)
        }
        Command::Budget {
            run,
            name,
            limit,
            owner,
        } => {
            if let Some(l) = limit {
                parse_amount(&l.to_string())?;
            }
            let spec = crate::run::BudgetSpec { limit, owner };
            print_seq(json, runs.change(&run, Change::Budget { name, spec })?)
        }
        Command::Spend {
            run,
            budget,
            amount,
        } => {
            let amount = parse_amount(&amount)?;
            print_seq(json, runs.change(&run, Change::Spend { budget, amount })?)
        }
        Command::Finalize {
            run,
            status,
            result,
        } => {
            let status: RunStatus = parse_status(&status)?;
            if !status.is_terminal() {
                return Err(invalid("finalize takes done, needs_attention or aborted"));
            }
            print_seq(
                json,
                runs.change(&run, Change::Finalize { status, result })?,
            )
        }
        Command::Apply { run } => super::apply::apply_stdin(runs, &run),
        Command::Get { run, unit: None } => {
            let id = runs.resolve(&run)?;
            let read = runs.read_run(&id)?;
            let doc = read.view().doc_streamed();
            // A damaged unit stops the output part-way: report the damage itself.
            write_json(&doc, json).map_err(|e| doc.take_damage().unwrap_or(e))?;
            Ok(EXIT_DONE)
        }
        Command::Get {
            run,
            unit: Some(name),
        } => {
            let id = runs.resolve(&run)?;
            let unit = runs
                .unit(&id, &name)?
                .ok_or_else(|| invalid(format!("run {id} has no unit {name:?}")))?;
            let mut value = serde_json::to_value(&unit)
                .map_err(|e| invalid(format!("cannot print JSON: {e}")))?;
            if let Some(fields) = value.as_object_mut() {
                fields.insert("name".into(), name.into());
            }
            print_json(&value, json)?;
            Ok(EXIT_DONE)
        }
        Command::Resume { run } => {
            let id = runs.resolve(&run)?;
            let read = runs.read_run(&id)?;
            let set = read.view().resume_streamed()?;
            write_json(&set, json).map_err(|e| set.take_damage().unwrap_or(e))?;
            Ok(EXIT_DONE)
        }
        Command::Status {
            run,
            list,
            watch,
            interval,
        } => {
            let watch = watch.then_some(interval);
            status(runs, json, run, list, watch)
        }
        Command::Verify {
            run,
            remote: Some(url),
        } => super::remote::verify(runs, json, &run, &url),
        Command::Verify { run, remote: None } => verify(runs, json, &run),
        Command::Restore { run, remote } => super::remote::restore_run(runs, json, &run, &remote),
        Command::Remote(cmd) => super::remote::dispatch(runs, json, cmd),
        Command::Gc {
            remote: Some(url),
            keep_manifests,
            ..
        } => super::remote::gc_remote(json, &url, keep_manifests),
        Command::Rebuild { run } => {
            let id = runs.resolve(&run)?;
            let dir = runs.run_dir(&id)?;
            let opts = engine::Options {
                lock_wait: Some(crate::run::DEFAULT_LOCK_WAIT),
                key: runs.key().cloned(),
                ..engine::Options::default()
            };
            let (rec, c) =
                engine::rebuild_snapshot::<Keyed<RunKeyed>>(&dir, opts).map_err(|e| {
                    RunError::Engine {
                        id: id.clone(),
                        source: e,
                    }
                })?;
            let v = json!({
                "id": id,
                "lastSeq": rec.last_seq,
                "tornTailDropped": rec.torn_tail.is_some(),
                "snapshotSeq": c.snapshot_seq,
                "segmentsRemoved": c.segments_removed,
            });
            print_json(&v, json)?;
            Ok(EXIT_DONE)
        }
        Command::Compact { run } => {
            let id = runs.resolve(&run)?;
            let c = runs.open(&id)?.compact()?;
            let v = json!({
                "id": id,
                "snapshotSeq": c.snapshot_seq,
                "snapshotBytes": c.snapshot_bytes,
                "segmentsRemoved": c.segments_removed,
                "snapshotsRemoved": c.snapshots_removed,
            });
            print_json(&v, json)?;
            Ok(EXIT_DONE)
        }
        Command::Dump { run } => dump(runs, &run),
        Command::Demo { .. } | Command::DemoWorker { .. } => Err(invalid(
            "the demo runs before a runs root is chosen (see cli::run_cli)",
        )),
        Command::Gc { keep_days, .. } => {
            let r = runs.gc(keep_days)?;
            if json {
                print_json(&r, true)?;
            } else {
                for id in &r.removed {
                    println_out(&format!("removed {id}"))?;
                }
                for id in &r.removed_archived {
                    println_out(&format!("removed archived {id}"))?;
                }
                for id in &r.skipped_locked {
                    println_out(&format!("skipped {id} (in use)"))?;
                }
            }
            Ok(EXIT_DONE)
        }
    }
}

fn status(
    runs: &Runs,
    json: bool,
    run: Option<String>,
    list: bool,
    watch: Option<f64>,
) -> Result<u8, RunError> {
    if list {
        let all = runs.list()?;
        if json {
            print_json(&all, true)?;
        } else {
            print!("{}", render_list(&all));
        }
        return Ok(EXIT_DONE);
    }
    let id = match run {
        Some(r) => runs.resolve(&r)?,
        None => match runs.list()?.into_iter().next() {
            Some(s) => s.id,
            None => return Err(invalid(format!("no runs under {}", runs.root().display()))),
        },
    };
    if let Some(interval) = watch {
        return super::watch::watch(runs, &id, json, interval);
    }
    let read = runs.read_run(&id)?;
    if json {
        print_json(&status_json(&read.view()), true)?;
    } else {
        print!("{}", render_status(&read.view())?);
    }
    Ok(EXIT_DONE)
}

fn verify(runs: &Runs, json: bool, run: &str) -> Result<u8, RunError> {
    let id = runs.resolve(run)?;
    let dir = runs.run_dir(&id)?;
    let r = engine::verify_with_key(&RealFs, &dir, runs.key()).map_err(|e| RunError::Engine {
        id: id.clone(),
        source: e,
    })?;
    let (v, code) = match &r.integrity {
        Integrity::Clean => (
            json!({"id": id, "integrity": "clean", "lastSeq": r.recovery.last_seq}),
            EXIT_DONE,
        ),
        Integrity::TornTail {
            path,
            offset,
            bytes,
            reason,
        } => (
            json!({"id": id, "integrity": "torn_tail", "path": path, "offset": offset,
                   "bytes": bytes, "reason": reason, "lastSeq": r.recovery.last_seq}),
            EXIT_DONE,
        ),
        Integrity::Corrupt {
            path,
            offset,
            seq,
            reason,
        } => (
            json!({"id": id, "integrity": "corrupt", "path": path, "offset": offset,
                   "seq": seq, "reason": reason}),
            EXIT_FAILED,
        ),
        Integrity::Tampered {
            path,
            offset,
            seq,
            what,
        } => (
            json!({"id": id, "integrity": "tampered", "path": path, "offset": offset,
                   "seq": seq, "reason": what}),
            EXIT_FAILED,
        ),
    };
    if json {
        print_json(&v, true)?;
    } else {
        let line = match &r.integrity {
            Integrity::Clean => format!("{id}: clean, {} records", r.recovery.last_seq),
            Integrity::TornTail {
                path,
                offset,
                bytes,
                ..
            } => format!(
                "{id}: torn tail of {bytes} bytes at {} offset {offset} (dropped by the next writer)",
                path.display()
            ),
            Integrity::Corrupt {
                path,
                offset,
                reason,
                ..
            } => {
                format!(
                    "{id}: CORRUPT at {} offset {offset}: {reason}",
                    path.display()
                )
            }
            Integrity::Tampered {
                path,
                offset,
                seq,
                what,
            } => format!(
                "{id}: TAMPERED at {} offset {offset}{}: {what} (the bytes pass their checksums but not the keyed digest)",
                path.display(),
                seq.map(|s| format!(" seq {s}")).unwrap_or_default()
            ),
        };
        println_out(&line)?;
    }
    Ok(code)
}

fn dump(runs: &Runs, run: &str) -> Result<u8, RunError> {
    let id = runs.resolve(run)?;
    let dir = runs.run_dir(&id)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut failure: Option<RunError> = None;
    let mut codec_seen = None;
    // The codec is only known after the first header; read it with a first pass.
    engine::for_each_record_with_key(&RealFs, &dir, runs.key(), |_, _| {})
        .map(|c| codec_seen = c)
        .map_err(|e| RunError::Engine {
            id: id.clone(),
            source: e,
        })?;
    let codec = codec_seen.unwrap_or(Codec::Jsonl);
    engine::for_each_record_with_key(&RealFs, &dir, runs.key(), |seq, payload| {
        if failure.is_some() {
            return;
        }
        let r = engine::decode_payload::<Transition>(codec, payload)
            .map_err(|e| invalid(format!("record {seq} does not decode: {e}")))
            .and_then(|t| {
                let line = serde_json::to_string(&json!({ "seq": seq, "t": t }))
                    .map_err(|e| invalid(e.to_string()))?;
                writeln!(out, "{line}").map_err(|e| RunError::Io {
                    op: "write stdout",
                    path: "-".into(),
                    source: e,
                })
            });
        if let Err(e) = r {
            failure = Some(e);
        }
    })
    .map_err(|e| RunError::Engine {
        id: id.clone(),
        source: e,
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    out.flush().map_err(|e| RunError::Io {
        op: "write stdout",
        path: "-".into(),
        source: e,
    })?;
    Ok(EXIT_DONE)
}
