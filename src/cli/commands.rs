//! One function per command: call the library, print the result.

use super::args::{
    ArchiveCommand, Command, NewRun, invalid, parse_amount, parse_budgets, parse_deps, parse_list,
};
use super::render::{render_archive_list, render_list, render_status, status_json};
use super::wait::{lock_notice, with_lock_notice};
use super::{EXIT_DONE, EXIT_FAILED, EXIT_REFUSED, write_out};
use runlog::engine::{self, Codec, Integrity, RealFs};
use runlog::run::{
    Change, InitSpec, Json, Launch, PhaseStatus, RunError, RunStatus, RunSummary, Runs, Transition,
    UnitStatus,
};
use serde::Serialize;
use serde_json::json;
use std::io::Write;

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

/// Writes a streamed view with `write` to stdout (buffered), then a newline.
fn write_streamed(
    write: impl FnOnce(&mut dyn std::io::Write) -> Result<(), RunError>,
) -> Result<(), RunError> {
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
    write(&mut out)?;
    writeln!(out)
        .and_then(|_| out.flush())
        .map_err(|e| RunError::Io {
            op: "write stdout",
            path: "-".into(),
            source: e,
        })
}

fn println_out(text: &str) -> Result<(), RunError> {
    write_out(&format!("{text}\n"))
}

fn print_seq(json: bool, seq: u64) -> Result<u8, RunError> {
    if json {
        print_json(&json!({ "seq": seq }), true)?;
    } else {
        println_out(&format!("seq {seq}"))?;
    }
    Ok(EXIT_DONE)
}

/// Applies `change` to run `run` (waiting visibly for the lock) and prints its seq.
/// A server of the run (`runlog serve`) applies it when one is serving.
fn change(runs: &Runs, json: bool, run: &str, change: Change) -> Result<u8, RunError> {
    let a = runs.change_waiting(run, change, &mut lock_notice())?;
    print_seq(json, a.seq)
}

/// Prints each warning on stderr as `runlog: warning CODE: message`, with the
/// command that follows from it where there is one.
fn warn_all(warnings: &[runlog::run::Warning]) {
    for w in warnings {
        let archived = std::path::Path::new(&w.archived_to).file_name();
        match archived {
            Some(name) if w.code == runlog::run::Warning::RUN_FINISHED_STARTED_FRESH => eprintln!(
                "runlog: warning {}: {}; `runlog archive restore {}` brings it back",
                w.code,
                w.message,
                name.to_string_lossy()
            ),
            _ if w.code == runlog::run::Warning::BUDGET_EXCEEDED => eprintln!(
                "runlog: warning {}: {}; `runlog budget` changes the limit",
                w.code, w.message
            ),
            _ => eprintln!("runlog: warning {}: {}", w.code, w.message),
        }
    }
}

/// The error for a run directory whose store holds no `init` record (its
/// creation did not finish, or its only record was torn): no run, exactly as
/// an empty run directory is (exit 2), and `init` may create it again.
fn not_initialized(runs: &Runs, id: &str) -> RunError {
    RunError::Invalid(format!(
        "run {id:?} under {} was never initialized: its store holds no init record (a creation that did not finish); `runlog init` creates it again",
        runs.root().display()
    ))
}

/// True when `e` is the rules' refusal of an `init` over a live run.
fn is_already_live(e: &RunError) -> bool {
    matches!(
        e.rule(),
        Some(runlog::run::RuleError::AlreadyInitialized { .. })
    )
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
    let codec: Codec = new.codec.parse().map_err(invalid)?;
    let launch = match &new.launch {
        Some(text) => {
            let v = Json::parse_limited(text).map_err(|e| invalid(format!("--launch: {e}")))?;
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
        fingerprint: InitSpec::parse_fingerprint(fingerprint.unwrap_or("")).map_err(invalid)?,
        budgets: parse_budgets(&new.budgets)?,
    };
    spec.check().map_err(|e| invalid(e.to_string()))?;
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
        } => init(runs, json, id, task, fingerprint, &new),
        Command::Start {
            id,
            fingerprint,
            task,
            keep_finished,
            new,
        } => start(runs, json, id, fingerprint, task, keep_finished, &new),
        Command::Unit {
            run,
            unit,
            status,
            note,
            deps,
        } => {
            let status: UnitStatus = parse_status(&status)?;
            let deps = deps.map(|d| parse_list("dependency", &d)).transpose()?;
            let c = Change::Unit {
                unit,
                status,
                note,
                deps,
            };
            change(runs, json, &run, c)
        }
        Command::Phase { run, phase, status } => {
            let status: PhaseStatus = parse_status(&status)?;
            change(runs, json, &run, Change::Phase { phase, status })
        }
        Command::Item { run, item: text } => item(runs, json, &run, &text),
        Command::Resolve { run, item_id, note } => {
            change(runs, json, &run, Change::Resolve { id: item_id, note })
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
            let spec = runlog::run::BudgetSpec { limit, owner };
            change(runs, json, &run, Change::Budget { name, spec })
        }
        Command::Spend {
            run,
            budget,
            amount,
        } => spend(runs, json, &run, budget, &amount),
        Command::Finalize {
            run,
            status,
            result,
        } => finalize(runs, json, &run, &status, result),
        Command::Apply { run } => super::apply::apply_stdin(runs, &run),
        Command::Serve {
            run,
            idle,
            commit_delay,
        } => {
            let idle = idle
                .map(|s| super::args::seconds("--idle", s, 0.0..=f64::INFINITY))
                .transpose()?;
            let delay = super::args::seconds(
                "--commit-delay",
                commit_delay,
                0.0..=runlog::run::Server::MAX_COMMIT_DELAY.as_secs_f64(),
            )?;
            super::serve::serve(runs, json, &run, idle, delay)
        }
        Command::Archive(ArchiveCommand::List) => archive_list(runs, json),
        Command::Archive(ArchiveCommand::Restore { name }) => archive_restore(runs, json, &name),
        Command::Get { run, unit: None } => get_doc(runs, json, &run),
        Command::Get {
            run,
            unit: Some(name),
        } => get_unit(runs, json, &run, &name),
        Command::Resume { run } => resume(runs, json, &run),
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
        Command::Rebuild { run } => rebuild(runs, json, &run),
        Command::Compact { run } => compact(runs, json, &run),
        Command::Dump { run } => dump(runs, &run),
        Command::Ui {
            run,
            listen,
            token,
            token_file,
            open,
        } => super::ui::serve(runs, json, run, listen, token, token_file, open),
        Command::Demo { .. }
        | Command::DemoWorker { .. }
        | Command::Completions { .. }
        | Command::Man => Err(invalid(
            "the demo runs before a runs root is chosen (see cli::run_cli)",
        )),
        Command::Gc { keep_days, .. } => gc(runs, json, keep_days),
    }
}

/// `init`: a new run, refused if one with its id is live.
fn init(
    runs: &Runs,
    json: bool,
    id: String,
    task: String,
    fingerprint: Option<String>,
    new: &NewRun,
) -> Result<u8, RunError> {
    let (spec, codec) = init_spec(id.clone(), task, fingerprint.as_deref(), new)?;
    let runs = runs.clone().with_codec(codec);
    let run = match with_lock_notice(&runs, |r| r.init(spec.clone())) {
        Ok(run) => run,
        Err(e) if is_already_live(&e) => {
            let fp = fingerprint
                .as_deref()
                .map_or(String::new(), |f| format!(" --fingerprint {f:?}"));
            eprintln!(
                "runlog: {}\nrunlog: to resume it: runlog start --id {id}{fp} (with the --fingerprint it was made with, if any)",
                super::report(&e)
            );
            return Ok(EXIT_REFUSED);
        }
        Err(e) => return Err(e),
    };
    if json {
        print_json(&json!({ "id": run.id(), "seq": run.last_seq() }), true)?;
    } else {
        println_out(&format!("created run {}", run.id()))?;
    }
    Ok(EXIT_DONE)
}

/// `start`: resumes the live run, or starts it fresh.
fn start(
    runs: &Runs,
    json: bool,
    id: String,
    fingerprint: String,
    task: Option<String>,
    keep_finished: bool,
    new: &NewRun,
) -> Result<u8, RunError> {
    // The live run as it is now: its task is the default, and with
    // --keep-finished a finished run is left alone.
    let live = match runs.read_run(&id) {
        Ok(r) => Some(r.view().header().clone()).filter(|d| d.is_initialized()),
        Err(_) => None,
    };
    if let Some(doc) = live.as_ref().filter(|d| keep_finished && d.is_closed()) {
        if json {
            let v = json!({"id": id, "resumed": false, "finished": true,
                               "status": doc.status, "warnings": []});
            print_json(&v, true)?;
        } else {
            println_out(&format!(
                "run {id} has finished ({}); left as it is (--keep-finished)",
                doc.status
            ))?;
        }
        return Ok(EXIT_DONE);
    }
    let task = task
        .or_else(|| live.filter(|d| !d.is_closed()).map(|d| d.task))
        .unwrap_or_else(|| id.clone());
    let (spec, codec) = init_spec(id, task, Some(&fingerprint), new)?;
    let runs = runs.clone().with_codec(codec);
    let started = with_lock_notice(&runs, |r| r.start(spec.clone()))?;
    warn_all(&started.warnings);
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

/// `item`: open items, printing the ids they were given.
fn item(runs: &Runs, json: bool, run: &str, text: &str) -> Result<u8, RunError> {
    // A refusal shows the shape expected, with an example to copy.
    let shape = |why: String| {
        invalid(format!(
            "{why}; an item is a JSON object (or an array of objects), e.g. runlog item {run} '{{\"finding\":\"flaky test\"}}'"
        ))
    };
    let v = Json::parse_limited(text).map_err(shape)?;
    let items = Json::items(v).map_err(shape)?;
    let a = runs.change_waiting(run, Change::Items { items }, &mut lock_notice())?;
    let (seq, ids) = (a.seq, a.ids.unwrap_or_default());
    if json {
        print_json(&json!({ "seq": seq, "ids": ids }), true)?;
    } else {
        println_out(&format!("{} (seq {seq})", ids.join(" ")))?;
    }
    Ok(EXIT_DONE)
}

/// `spend`: against a budget, warning when it is exhausted.
fn spend(runs: &Runs, json: bool, run: &str, budget: String, amount: &str) -> Result<u8, RunError> {
    let amount = parse_amount(amount)?;
    let c = Change::Spend { budget, amount };
    let a = runs.change_waiting(run, c, &mut lock_notice())?;
    let (seq, warnings) = (a.seq, a.warnings);
    warn_all(&warnings);
    if json {
        print_json(&json!({ "seq": seq, "warnings": warnings }), true)?;
    } else {
        println_out(&format!("seq {seq}"))?;
    }
    Ok(EXIT_DONE)
}

/// `finalize`: the run's terminal status.
fn finalize(
    runs: &Runs,
    json: bool,
    run: &str,
    status: &str,
    result: Option<String>,
) -> Result<u8, RunError> {
    let status: RunStatus = match status.parse() {
        Ok(s) if RunStatus::is_terminal(s) => s,
        _ => {
            return Err(invalid(format!(
                "finalize takes done, needs_attention or aborted, not {status:?}"
            )));
        }
    };
    change(runs, json, run, Change::Finalize { status, result })
}

/// `archive restore`: an archived run back under its id.
fn archive_restore(runs: &Runs, json: bool, name: &str) -> Result<u8, RunError> {
    // A name that is no archived run's is `RunError::NotArchived`, which
    // `report` follows with where the names are listed.
    let id = runs.restore_archived(name)?;
    if json {
        print_json(&json!({ "id": id, "restoredFrom": name }), true)?;
    } else {
        println_out(&format!("restored run {id} from archive/{name}"))?;
    }
    Ok(EXIT_DONE)
}

/// `get RUN`: the whole run document, streamed.
fn get_doc(runs: &Runs, json: bool, run: &str) -> Result<u8, RunError> {
    let id = runs.resolve(run)?;
    let read = runs.read_run(&id)?;
    // A store whose init record never made it (a torn creation) holds no
    // run: refused as a missing run is, never printed as a made-up one.
    if !read.view().header().is_initialized() {
        return Err(not_initialized(runs, &id));
    }
    // A damaged unit stops the output part-way: the damage itself is the error.
    write_streamed(|out| read.view().write_json(out, !json))?;
    Ok(EXIT_DONE)
}

/// `get RUN --unit NAME`: one unit, by lookup.
fn get_unit(runs: &Runs, json: bool, run: &str, name: &str) -> Result<u8, RunError> {
    let id = runs.resolve(run)?;
    let unit = runs
        .unit(&id, name)?
        .ok_or_else(|| invalid(format!("run {id} has no unit {name:?}")))?;
    let mut value =
        serde_json::to_value(&unit).map_err(|e| invalid(format!("cannot print JSON: {e}")))?;
    if let Some(fields) = value.as_object_mut() {
        fields.insert("name".into(), name.into());
    }
    print_json(&value, json)?;
    Ok(EXIT_DONE)
}

/// `resume`: the resume set, streamed.
fn resume(runs: &Runs, json: bool, run: &str) -> Result<u8, RunError> {
    let id = runs.resolve(run)?;
    let read = runs.read_run(&id)?;
    if !read.view().header().is_initialized() {
        return Err(not_initialized(runs, &id));
    }
    write_streamed(|out| read.view().write_resume_json(out, !json))?;
    Ok(EXIT_DONE)
}

/// `rebuild`: the snapshot rebuilt from the log.
fn rebuild(runs: &Runs, json: bool, run: &str) -> Result<u8, RunError> {
    let id = runs.resolve(run)?;
    let (rec, c) = match with_lock_notice(runs, |r| r.rebuild_snapshot(&id)) {
        Ok(done) => done,
        Err(e) if is_damage(&e) => {
            eprintln!("runlog: {}", super::report(&e));
            eprintln!("runlog: {}", rebuild_next_step(runs, &id));
            return Ok(EXIT_FAILED);
        }
        Err(e) => return Err(e),
    };
    if json {
        let v = json!({
            "id": id,
            "lastSeq": rec.last_seq,
            "tornTailDropped": rec.torn_tail.is_some(),
            "snapshotSeq": c.snapshot_seq,
            "segmentsRemoved": c.segments_removed,
        });
        print_json(&v, true)?;
    } else {
        let torn = if rec.torn_tail.is_some() {
            "a torn tail dropped"
        } else {
            "no torn tail"
        };
        println_out(&format!(
            "rebuilt run {id}: {} records, {torn}; snapshot at seq {}, {} segment(s) removed",
            rec.last_seq, c.snapshot_seq, c.segments_removed
        ))?;
    }
    Ok(EXIT_DONE)
}

/// Damage in a run's files that its open refuses: corruption or a failed tag.
fn is_damage(e: &RunError) -> bool {
    matches!(e, RunError::Engine { source, .. } if source.is_corrupt() || source.is_tampered())
}

/// What to do about a run `rebuild` found damaged (docs/CLI.md, `rebuild`):
/// rebuild drops a torn tail only, and nothing repairs damage below it, so
/// the run comes back from a copy: its remote when it ships to one (`restore`
/// needs the damaged directory out of the way), else a backup.
fn rebuild_next_step(runs: &Runs, id: &str) -> String {
    let dir = runs
        .run_dir(id)
        .map_or_else(|_| id.to_string(), |d| d.display().to_string());
    let remote = runs.run_dir(id).ok().and_then(|d| {
        runlog::remote::RemoteConfig::read(&RealFs, &d)
            .ok()
            .flatten()
    });
    let copy = match remote {
        Some(r) => format!(
            "this run ships to {url}: move {dir} out of the runs root (keep it: it holds the damaged bytes), then `runlog restore {id} --remote {url}`",
            url = r.url
        ),
        None => format!(
            "from a backup of {dir}, if there is one (move the damaged directory out of the runs root first, and keep it: it holds the damaged bytes)"
        ),
    };
    format!(
        "rebuild repairs only a torn tail (the last record a crash left unfinished); this damage is not one, no command repairs it, and nothing was modified. Next: `runlog verify {id}` shows where every damaged record is; then bring the run back from a copy: {copy}"
    )
}

/// `compact`: a full snapshot now.
fn compact(runs: &Runs, json: bool, run: &str) -> Result<u8, RunError> {
    let id = runs.resolve(run)?;
    let c = with_lock_notice(runs, |r| r.open(&id))?.compact()?;
    if json {
        let v = json!({
            "id": id,
            "snapshotSeq": c.snapshot_seq,
            "snapshotBytes": c.snapshot_bytes,
            "segmentsRemoved": c.segments_removed,
            "snapshotsRemoved": c.snapshots_removed,
        });
        print_json(&v, true)?;
    } else {
        println_out(&format!(
            "compacted run {id}: snapshot at seq {} ({} bytes), {} segment(s) and {} old snapshot(s) removed",
            c.snapshot_seq, c.snapshot_bytes, c.segments_removed, c.snapshots_removed
        ))?;
    }
    Ok(EXIT_DONE)
}

/// `gc`: finished and archived runs older than `keep_days` removed.
fn gc(runs: &Runs, json: bool, keep_days: u64) -> Result<u8, RunError> {
    let r = runs.gc(keep_days)?;
    for u in &r.skipped_unreadable {
        eprintln!("runlog: gc skipped {}: it can't be read: {}", u.id, u.error);
    }
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
        for u in &r.skipped_unreadable {
            println_out(&format!("skipped {} (can't be read)", u.id))?;
        }
        if r.removed.is_empty() && r.removed_archived.is_empty() {
            println_out(&format!(
                "nothing to remove (no finished or archived run older than {keep_days} days)"
            ))?;
        }
    }
    Ok(if r.skipped_unreadable.is_empty() {
        EXIT_DONE
    } else {
        EXIT_FAILED
    })
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
        if all.is_empty() {
            return Err(invalid(format!("no runs under {}", runs.root().display())));
        }
        if json {
            print_json(&all, true)?;
        } else {
            write_out(&render_list(&all))?;
        }
        let unreadable: Vec<&RunSummary> = all.iter().filter(|r| r.error.is_some()).collect();
        for r in &unreadable {
            eprintln!(
                "runlog: run {} can't be read: {}",
                r.id,
                r.error.as_deref().unwrap_or_default()
            );
        }
        return Ok(if unreadable.is_empty() {
            EXIT_DONE
        } else {
            EXIT_FAILED
        });
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
    let fallbacks = &read.recovery().snapshot_fallbacks;
    // The remote's lag (local durable seq vs shipped), when the run has a remote.
    let remote = super::remote::status_remote(&runs.run_dir(&id)?, read.recovery().last_seq);
    if json {
        let mut v = status_json(&read.view());
        if let Some((r, _)) = &remote {
            v["remote"] = r.clone();
        }
        if !fallbacks.is_empty() {
            let list: Vec<_> = fallbacks
                .iter()
                .map(|(p, why)| json!({"path": p, "reason": why}))
                .collect();
            v["snapshotFallbacks"] = json!(list);
            v["fellBackTo"] = json!(read.recovery().snapshot_seq.unwrap_or(0));
        }
        if let Some(t) = &read.recovery().torn_tail {
            v["tornTail"] = json!({
                "path": t.path, "offset": t.offset, "bytes": t.bytes,
                "firstSeq": t.first_seq, "validFramesDropped": t.valid_frames_dropped,
            });
        }
        print_json(&v, true)?;
    } else {
        write_out(&render_status(&read.view())?)?;
        if let Some(t) = &read.recovery().torn_tail {
            // Never acknowledged (no durability mark or later record proves it),
            // but never silent either: the next writer drops it.
            eprintln!(
                "runlog: warning TORN_TAIL: run {id}: {} bytes at {} offset {} (seq {} on, never acknowledged, {} whole frames after the damage) are not counted; the next writer keeps them in a .broken file and drops them",
                t.bytes,
                t.path.display(),
                t.offset,
                t.first_seq,
                t.valid_frames_dropped
            );
        }
        if let Some((_, line)) = &remote {
            println_out(line)?;
        }
        // Loud, as README promises: what was damaged and what the open used instead.
        for (p, why) in fallbacks {
            let to = match read.recovery().snapshot_seq {
                Some(s) => format!("the snapshot at seq {s} and the log after it"),
                None => "the whole log from seq 1".to_string(),
            };
            eprintln!(
                "runlog: warning SNAPSHOT_DAMAGED: run {id}: {} ({why}); read from {to}; `runlog verify {id}` reports it, `runlog compact {id}` writes a fresh snapshot",
                p.display()
            );
        }
    }
    Ok(EXIT_DONE)
}

fn archive_list(runs: &Runs, json: bool) -> Result<u8, RunError> {
    let all = runs.list_archived()?;
    if json {
        print_json(&all, true)?;
    } else if all.is_empty() {
        println_out(&format!(
            "no archived runs under {}",
            runs.archive_dir().display()
        ))?;
    } else {
        write_out(&render_archive_list(&all))?;
        println_out(
            "restore one with: runlog archive restore NAME (gc removes archived runs after --keep-days)",
        )?;
    }
    Ok(EXIT_DONE)
}

fn verify(runs: &Runs, json: bool, run: &str) -> Result<u8, RunError> {
    let id = runs.resolve(run)?;
    let r = runs.verify(&id)?;
    // The report as the library serializes it: `--json` prints it, the
    // lines below say it.
    let mut v = serde_json::to_value(&r).map_err(|e| RunError::Io {
        op: "write the verify report as JSON",
        path: "-".into(),
        source: e.into(),
    })?;
    v["id"] = json!(id);
    let code = if r.needs_attention() {
        EXIT_FAILED
    } else {
        EXIT_DONE
    };
    // A damaged snapshot the open skips is loud: named, with what it fell back to.
    let fell_back_to = match r.recovery.snapshot_seq {
        Some(s) => format!("the snapshot at seq {s} and the log after it"),
        None => "the whole log from seq 1".to_string(),
    };
    if json {
        print_json(&v, true)?;
    } else {
        for p in &r.leftovers {
            println_out(&format!(
                "{id}: note: {} is redundant and should have been removed by a compaction (harmless; the next compaction removes it)",
                p.display()
            ))?;
        }
        for p in &r.quarantined {
            println_out(&format!(
                "{id}: note: {} holds bytes a writer cut off as a torn tail (kept for inspection; nothing reads it)",
                p.display()
            ))?;
        }
        for (p, why) in &r.recovery.snapshot_fallbacks {
            println_out(&format!(
                "{id}: SNAPSHOT DAMAGED: {} ({why}); every open falls back to {fell_back_to} (`runlog compact {id}` writes a fresh snapshot)",
                p.display()
            ))?;
        }
        let line = match &r.integrity {
            Integrity::Clean => format!("{id}: clean, {} records", r.recovery.last_seq),
            Integrity::TornTail {
                path,
                offset,
                bytes,
                ..
            } => {
                let (from, frames) = r
                    .recovery
                    .torn_tail
                    .as_ref()
                    .map_or((0, 0), |t| (t.first_seq, t.valid_frames_dropped));
                format!(
                    "{id}: torn tail of {bytes} bytes at {} offset {offset}: seq {from} on, never acknowledged (no durability mark or later record proves it), {frames} whole frame{} after the damage; the next writer drops it, keeping the bytes in a .broken file",
                    path.display(),
                    if frames == 1 { "" } else { "s" }
                )
            }
            Integrity::AppendInProgress {
                path,
                offset,
                bytes,
                ..
            } => format!(
                "{id}: clean, {} records; {bytes} bytes at {} offset {offset} are an append in progress, not damage (a writer held the lock for as long as verify waited; it completes them, or drops them before it appends)",
                r.recovery.last_seq,
                path.display()
            ),
            Integrity::Damaged(_) => {
                let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
                let tampered = v["integrity"] == "tampered";
                let (head, why) = if tampered {
                    (
                        "TAMPERED",
                        " (the bytes pass their checksums but not their tag)",
                    )
                } else {
                    ("CORRUPT", "")
                };
                format!(
                    "{id}: {head} at {}{}{}: {}{why}",
                    text("path"),
                    v["offset"]
                        .as_u64()
                        .map(|o| format!(" offset {o}"))
                        .unwrap_or_default(),
                    match v["seq"].as_u64() {
                        Some(s) if tampered => format!(" seq {s}"),
                        _ => String::new(),
                    },
                    text("reason")
                )
            }
        };
        println_out(&line)?;
    }
    Ok(code)
}

fn dump(runs: &Runs, run: &str) -> Result<u8, RunError> {
    let id = runs.resolve(run)?;
    let dir = runs.run_dir(&id)?;
    // Every reader stops at the same damage: what the open refuses (corruption,
    // tampering, a record that does not decode or apply) fails the dump before
    // its first line, with the open's error, file and offset.
    runs.read_run(&id)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut failure: Option<RunError> = None;
    let mut codec_seen = None;
    // The codec is only known after the first header; read it with a first pass.
    engine::Reader::new(&RealFs, &dir)
        .with_key(runs.key())
        .records(|_, _| {})
        .map(|c| codec_seen = c)
        .map_err(|e| RunError::Engine {
            id: id.clone(),
            source: e,
        })?;
    let codec = codec_seen.unwrap_or(Codec::Jsonl);
    engine::Reader::new(&RealFs, &dir)
        .with_key(runs.key())
        .records(|seq, payload| {
            if failure.is_some() {
                return;
            }
            let r = codec
                .decode::<Transition>(payload)
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
