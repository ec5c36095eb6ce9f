//! The contenders: each set up once, then run once per repetition.

use crate::common::{self, Units, update};
use crate::{Config, Contender, Skipped};
use runlog::engine::{Codec, Store, SyncPolicy, scan::scan_segment};
#[cfg(feature = "remote")]
use runlog::remote::Policy;
use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::hint::black_box;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Units the small contenders' records cycle over.
const UNITS: u64 = 1000;
/// Records behind the replay and parse rows.
const REPLAY_RECORDS: u64 = 1_000_000;
/// Distinct units those records touch (each unit sees ten transitions).
const REPLAY_UNITS: u64 = 100_000;
/// Units in the state of `runlog_sync_1t_state_1m`.
const STATE_UNITS: u64 = 1_000_000;

type Op<'a> = Box<dyn FnMut(u64) -> Result<(), String> + 'a>;

/// Runs `threads` workers for `dur` after a common start; each builds its own
/// operation with `make(thread)` (so per-thread connections are made in-thread)
/// and calls it with a distinct index until the deadline. Returns ops/s.
pub fn timed<'a>(
    threads: usize,
    dur: Duration,
    make: impl Fn(usize) -> Result<Op<'a>, String> + Sync,
) -> Result<f64, String> {
    let barrier = Barrier::new(threads + 1);
    let (results, elapsed) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, make) = (&barrier, &make);
                scope.spawn(move || {
                    let op = make(t);
                    barrier.wait();
                    let mut op = op?;
                    let deadline = Instant::now() + dur;
                    let mut n = 0u64;
                    while Instant::now() < deadline {
                        op(n * threads as u64 + t as u64)?;
                        n += 1;
                    }
                    Ok::<u64, String>(n)
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        let r: Vec<Result<u64, String>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("worker panicked".into())))
            .collect();
        (r, started.elapsed())
    });
    let mut total = 0;
    for r in results {
        total += r?;
    }
    Ok(total as f64 / elapsed.as_secs_f64())
}

/// One writer on this thread for `dur`; ops/s.
pub fn timed_one(
    dur: Duration,
    mut op: impl FnMut(u64) -> Result<(), String>,
) -> Result<f64, String> {
    let started = Instant::now();
    let deadline = started + dur;
    let mut n = 0u64;
    while Instant::now() < deadline {
        op(n)?;
        n += 1;
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

pub fn tempdir() -> Result<tempfile::TempDir, String> {
    tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))
}

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// An ops/s contender: `threads` workers, each calling `op(&target, i)` in the
/// timed loop of [`timed`]; `dir` (the target's files) lives as long as it.
pub fn parallel<T: Sync + 'static>(
    name: &'static str,
    threads: usize,
    dir: tempfile::TempDir,
    target: T,
    op: fn(&T, u64) -> Result<(), String>,
) -> Contender {
    Contender {
        name,
        threads,
        unit: "ops/s",
        one_shot: false,
        run: Box::new(move |dur| {
            let _keep = &dir;
            let target = &target;
            timed(threads, dur, |_| Ok(Box::new(move |i: u64| op(target, i))))
        }),
    }
}

/// An ops/s contender: one writer on this thread calling `op(&mut state, i)` in
/// the timed loop of [`timed_one`]; `dir` (the state's files) lives as long as it.
fn serial<T: 'static>(
    name: &'static str,
    dir: tempfile::TempDir,
    mut state: T,
    op: fn(&mut T, u64) -> Result<(), String>,
) -> Contender {
    Contender {
        name,
        threads: 1,
        unit: "ops/s",
        one_shot: false,
        run: Box::new(move |dur| {
            let _keep = &dir;
            let state = &mut state;
            timed_one(dur, |i| op(state, i))
        }),
    }
}

/// The records the peers write, built ahead: `UNITS` of them, cycled.
fn records() -> Vec<Vec<u8>> {
    (0..UNITS).map(|i| common::record_json(i, UNITS)).collect()
}

/// The op of a runlog store's append contenders: update `i` of those built ahead.
fn store_append(
    (store, updates): &(Store<Units>, Vec<common::Update>),
    i: u64,
) -> Result<(), String> {
    store
        .append(&updates[(i % UNITS) as usize])
        .map(drop)
        .map_err(s)
}

/// Stores built once and shared by the contenders that read them.
#[derive(Default)]
pub struct Cache {
    replay: RefCell<Vec<(Codec, Rc<tempfile::TempDir>)>>,
}

impl Cache {
    /// The directory of a store with a snapshot and then `REPLAY_RECORDS` records.
    fn replay_store(&self, codec: Codec) -> Result<(Rc<tempfile::TempDir>, PathBuf), String> {
        let mut c = self.replay.borrow_mut();
        let dir = match c.iter().find(|(k, _)| *k == codec) {
            Some((_, d)) => d.clone(),
            None => {
                let dir = Rc::new(tempdir()?);
                common::build_replay_store(
                    &dir.path().join("store"),
                    codec,
                    REPLAY_RECORDS,
                    REPLAY_UNITS,
                );
                c.push((codec, dir.clone()));
                dir
            }
        };
        let path = dir.path().join("store");
        Ok((dir, path))
    }
}

/// Every contender the config asks for, set up and ready; and those that could not be.
pub fn all(cfg: &Config, cache: &Cache) -> (Vec<Contender>, Vec<Skipped>) {
    type Setup = fn(&Config, &Cache) -> Result<Contender, String>;
    let setups: &[(&'static str, Setup)] = &[
        ("raw_fdatasync", raw_fdatasync),
        ("raw_prealloc_fdatasync", raw_prealloc_fdatasync),
        ("runlog_sync_1t", |_, _| {
            runlog_append("runlog_sync_1t", Codec::Binary, SyncPolicy::Always, 1)
        }),
        ("runlog_sync_1t_jsonl", |_, _| {
            runlog_append("runlog_sync_1t_jsonl", Codec::Jsonl, SyncPolicy::Always, 1)
        }),
        ("runlog_group_8t", |_, _| {
            runlog_append("runlog_group_8t", Codec::Binary, common::GROUPED, 8)
        }),
        ("runlog_group_64t", |_, _| {
            runlog_append("runlog_group_64t", Codec::Binary, common::GROUPED, 64)
        }),
        ("runlog_linger_8t", |_, _| {
            runlog_append("runlog_linger_8t", Codec::Binary, common::LINGER, 8)
        }),
        ("runlog_linger_64t", |_, _| {
            runlog_append("runlog_linger_64t", Codec::Binary, common::LINGER, 64)
        }),
        ("runlog_sync_1t_state_1m", runlog_state_1m),
        ("sqlite_wal_full_1t", |_, _| sqlite("sqlite_wal_full_1t", 1)),
        ("sqlite_wal_full_8t", |_, _| sqlite("sqlite_wal_full_8t", 8)),
        ("redb_immediate_1t", redb_immediate),
        ("okaywal_1t", |_, _| okaywal("okaywal_1t", 1)),
        ("okaywal_8t", |_, _| okaywal("okaywal_8t", 8)),
        ("json_rewrite_1k", |_, _| {
            json_rewrite("json_rewrite_1k", 1_000)
        }),
        ("json_rewrite_100k", |_, _| {
            json_rewrite("json_rewrite_100k", 100_000)
        }),
        ("replay_binary_1m", |_, c| {
            replay("replay_binary_1m", c, Codec::Binary)
        }),
        ("replay_jsonl_1m", |_, c| {
            replay("replay_jsonl_1m", c, Codec::Jsonl)
        }),
        ("parse_binary_1m", |_, c| {
            parse("parse_binary_1m", c, Codec::Binary)
        }),
        ("parse_jsonl_1m", |_, c| {
            parse("parse_jsonl_1m", c, Codec::Jsonl)
        }),
        ("apply_binary_1m", |_, c| {
            parse("apply_binary_1m", c, Codec::Binary)
        }),
        ("apply_pipe", crate::contenders::apply_pipe::setup),
        #[cfg(feature = "remote")]
        ("runlog_remote_sync_8t", |_, _| {
            crate::remote::append("runlog_remote_sync_8t", Policy::Sync, 8)
        }),
        #[cfg(feature = "remote")]
        ("runlog_remote_sync_64t", |_, _| {
            crate::remote::append("runlog_remote_sync_64t", Policy::Sync, 64)
        }),
        // One round in flight at a time, as before issue 50 (the rows above
        // keep the default, 4): the same binary, side by side.
        #[cfg(feature = "remote")]
        ("runlog_remote_sync_8t_k1", |_, _| {
            crate::remote::append("runlog_remote_sync_8t_k1", Policy::Sync, 8)
        }),
        #[cfg(feature = "remote")]
        ("runlog_remote_sync_64t_k1", |_, _| {
            crate::remote::append("runlog_remote_sync_64t_k1", Policy::Sync, 64)
        }),
        #[cfg(feature = "remote")]
        ("runlog_remote_sync_1t", |_, _| {
            crate::remote::append("runlog_remote_sync_1t", Policy::Sync, 1)
        }),
        #[cfg(feature = "remote")]
        ("runlog_remote_async_8t", |_, _| {
            let p = Policy::Async { interval_ms: 100 };
            crate::remote::append("runlog_remote_async_8t", p, 8)
        }),
        #[cfg(feature = "remote")]
        ("remote_restore_1m", crate::remote::restore_1m),
    ];
    let mut ready = Vec::new();
    let mut skipped = Vec::new();
    for (name, setup) in setups {
        if !cfg.wants(name) {
            continue;
        }
        eprintln!("setting up {name}");
        match setup(cfg, cache) {
            Ok(c) => ready.push(c),
            Err(reason) => skipped.push(Skipped { name, reason }),
        }
    }
    (ready, skipped)
}

fn raw_fdatasync(_: &Config, _: &Cache) -> Result<Contender, String> {
    let dir = tempdir()?;
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("raw.log"))
        .map_err(s)?;
    Ok(serial(
        "raw_fdatasync",
        dir,
        (f, records()),
        |(f, recs), i| {
            f.write_all(&recs[(i % UNITS) as usize]).map_err(s)?;
            f.sync_data().map_err(s)
        },
    ))
}

/// Bytes of the preallocated file; writes wrap around (still overwriting in place).
const PREALLOC: u64 = 64 << 20;

fn raw_prealloc_fdatasync(_: &Config, _: &Cache) -> Result<Contender, String> {
    let dir = tempdir()?;
    let path = dir.path().join("prealloc.log");
    let f = File::create(&path).map_err(s)?;
    // Real zeros, not fallocate: unwritten extents would turn the first write of
    // each block into a metadata update, which is what preallocation avoids.
    let zeros = vec![0u8; 1 << 20];
    for i in 0..PREALLOC / zeros.len() as u64 {
        f.write_all_at(&zeros, i * zeros.len() as u64).map_err(s)?;
    }
    f.sync_all().map_err(s)?;
    let state = (f, records(), 0u64);
    Ok(serial(
        "raw_prealloc_fdatasync",
        dir,
        state,
        |(f, recs, at), i| {
            let r = &recs[(i % UNITS) as usize];
            if *at + r.len() as u64 > PREALLOC {
                *at = 0;
            }
            f.write_all_at(r, *at).map_err(s)?;
            *at += r.len() as u64;
            f.sync_data().map_err(s)
        },
    ))
}

fn runlog_append(
    name: &'static str,
    codec: Codec,
    sync: SyncPolicy,
    threads: usize,
) -> Result<Contender, String> {
    let dir = tempdir()?;
    let store =
        Store::<Units>::open(dir.path().join("store"), common::opts(codec, sync)).map_err(s)?;
    // Built ahead, as the peers' records are: the loop measures the store alone.
    let updates: Vec<common::Update> = (0..UNITS).map(|i| update(i, UNITS)).collect();
    Ok(parallel(name, threads, dir, (store, updates), store_append))
}

fn runlog_state_1m(_: &Config, _: &Cache) -> Result<Contender, String> {
    let dir = tempdir()?;
    let path = dir.path().join("store");
    common::build_state_store(&path, Codec::Binary, STATE_UNITS);
    let store =
        Store::<Units>::open(&path, common::opts(Codec::Binary, SyncPolicy::Always)).map_err(s)?;
    let units = store.read(|st| st.len() as u64);
    if units != STATE_UNITS {
        return Err(format!("state has {units} units, expected {STATE_UNITS}"));
    }
    // Updates of existing units, spread over the whole state, built ahead.
    let updates: Vec<common::Update> = (0..UNITS)
        .map(|i| update(i.wrapping_mul(7919) % STATE_UNITS, STATE_UNITS))
        .collect();
    Ok(parallel(
        "runlog_sync_1t_state_1m",
        1,
        dir,
        (store, updates),
        store_append,
    ))
}

fn sqlite(name: &'static str, threads: usize) -> Result<Contender, String> {
    let dir = tempdir()?;
    let path = dir.path().join("bench.sqlite");
    let open = |path: &Path| -> Result<rusqlite::Connection, String> {
        let c = rusqlite::Connection::open(path).map_err(s)?;
        let mode: String = c
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(s)?;
        if mode != "wal" {
            return Err(format!("journal_mode is {mode}, not wal"));
        }
        c.execute_batch("PRAGMA synchronous=FULL").map_err(s)?;
        c.busy_timeout(Duration::from_secs(30)).map_err(s)?;
        Ok(c)
    };
    open(&path)?
        .execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        .map_err(s)?;
    let recs = records();
    Ok(Contender {
        name,
        threads,
        unit: "ops/s",
        one_shot: false,
        run: Box::new(move |dur| {
            let _keep = &dir;
            let (path, recs) = (&path, &recs);
            timed(threads, dur, |_| {
                let c = open(path)?;
                Ok(Box::new(move |i: u64| {
                    // One INSERT per (autocommit) transaction.
                    c.prepare_cached("INSERT INTO t (body) VALUES (?1)")
                        .and_then(|mut st| st.execute([&recs[(i % UNITS) as usize]]))
                        .map(drop)
                        .map_err(s)
                }))
            })
        }),
    })
}

fn redb_immediate(_: &Config, _: &Cache) -> Result<Contender, String> {
    use redb::{Durability, TableDefinition};
    const TABLE: TableDefinition<u64, &[u8]> = TableDefinition::new("t");
    let dir = tempdir()?;
    let db = redb::Database::create(dir.path().join("bench.redb")).map_err(s)?;
    Ok(serial(
        "redb_immediate_1t",
        dir,
        (db, records(), 0u64),
        |(db, recs, key), i| {
            let mut tx = db.begin_write().map_err(s)?;
            tx.set_durability(Durability::Immediate).map_err(s)?;
            {
                let mut t = tx.open_table(TABLE).map_err(s)?;
                *key += 1;
                t.insert(*key, recs[(i % UNITS) as usize].as_slice())
                    .map_err(s)?;
            }
            tx.commit().map_err(s)
        },
    ))
}

fn okaywal(name: &'static str, threads: usize) -> Result<Contender, String> {
    let dir = tempdir()?;
    let wal =
        okaywal::WriteAheadLog::recover(dir.path().join("wal"), okaywal::LogVoid).map_err(s)?;
    let recs = records();
    Ok(parallel(
        name,
        threads,
        dir,
        (wal, recs),
        |(wal, recs), i| {
            // commit() returns after the fsync covering the entry.
            let mut e = wal.begin_entry().map_err(s)?;
            e.write_chunk(&recs[(i % UNITS) as usize]).map_err(s)?;
            e.commit().map(drop).map_err(s)
        },
    ))
}

/// Writes `bytes` as `dir/name` the way most tools checkpoint: temp file, fsync,
/// rename over the old one, fsync the directory.
pub fn rewrite_atomic(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))?;
    File::open(dir)?.sync_all()
}

/// A run document of `units` units, as a tool that rewrites it whole would keep it.
#[derive(serde::Serialize)]
pub struct RunDoc {
    pub id: String,
    pub task: String,
    pub units: common::State,
}

pub fn run_doc(units: u64) -> RunDoc {
    let mut st = common::State::new();
    for i in 0..units {
        let u = update(i, units);
        st.insert(
            u.unit,
            common::UnitState {
                status: u.status,
                note: u.note,
            },
        );
    }
    RunDoc {
        id: "run-1".into(),
        task: "bench".into(),
        units: st,
    }
}

/// One checkpoint of the rewrite approach: change a unit, serialize, rewrite.
pub fn rewrite_checkpoint(
    dir: &Path,
    doc: &mut RunDoc,
    i: u64,
    buf: &mut Vec<u8>,
) -> Result<(), String> {
    let n = doc.units.len() as u64;
    let u = update(i.wrapping_mul(7919) % n, n);
    <Units as runlog::engine::Machine>::apply(&mut doc.units, &u).map_err(s)?;
    buf.clear();
    serde_json::to_writer(&mut *buf, doc).map_err(s)?;
    rewrite_atomic(dir, "run.json", buf).map_err(s)
}

fn json_rewrite(name: &'static str, units: u64) -> Result<Contender, String> {
    let dir = tempdir()?;
    let mut doc = run_doc(units);
    let mut buf = Vec::new();
    Ok(Contender {
        name,
        threads: 1,
        unit: "ops/s",
        one_shot: false,
        run: Box::new(move |dur| {
            let (d, doc, buf) = (dir.path(), &mut doc, &mut buf);
            timed_one(dur, |i| rewrite_checkpoint(d, doc, i, buf))
        }),
    })
}

fn replay(name: &'static str, cache: &Cache, codec: Codec) -> Result<Contender, String> {
    let (dir, path) = cache.replay_store(codec)?;
    Ok(Contender {
        name,
        threads: 1,
        unit: "records/s",
        one_shot: true,
        run: Box::new(move |_| {
            let _keep = &dir;
            let started = Instant::now();
            let store =
                Store::<Units>::open(&path, common::opts(codec, SyncPolicy::Always)).map_err(s)?;
            let secs = started.elapsed().as_secs_f64();
            let n = store.recovery().records_replayed;
            if n != REPLAY_RECORDS {
                return Err(format!("replayed {n} records, expected {REPLAY_RECORDS}"));
            }
            Ok(n as f64 / secs)
        }),
    })
}

/// The segment files of a fresh replay store, in memory.
fn segments_of(dir: &Path) -> Result<Vec<Vec<u8>>, String> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(s)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    names.sort();
    names.iter().map(|p| std::fs::read(p).map_err(s)).collect()
}

fn parse(name: &'static str, cache: &Cache, codec: Codec) -> Result<Contender, String> {
    let (_dir, path) = cache.replay_store(codec)?;
    let segs = segments_of(&path)?;
    Ok(Contender {
        name,
        threads: 1,
        unit: "records/s",
        one_shot: true,
        run: Box::new(move |_| {
            // `apply_*` rows also apply each record to a state: parse + the
            // machine's own cost, still without I/O.
            let mut state = name.starts_with("apply_").then(common::State::new);
            let started = Instant::now();
            let mut n = 0u64;
            for seg in &segs {
                scan_segment(seg, |_, payload, _| {
                    let u: common::Update = codec.decode(payload)?;
                    if let Some(st) = state.as_mut() {
                        <Units as runlog::engine::Machine>::apply(st, &u).map_err(s)?;
                    }
                    black_box(u);
                    n += 1;
                    Ok::<(), String>(())
                })?;
            }
            let secs = started.elapsed().as_secs_f64();
            if n != REPLAY_RECORDS + 1 {
                return Err(format!(
                    "parsed {n} records, expected {}",
                    REPLAY_RECORDS + 1
                ));
            }
            Ok(n as f64 / secs)
        }),
    })
}

pub mod apply_pipe {
    //! `runlog apply` driven by a pipelining client.
    use super::s;
    use crate::{Config, Contender};
    use std::io::{BufRead, BufReader, BufWriter, Write};
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    fn binary() -> PathBuf {
        if let Some(p) = std::env::var_os("RUNLOG_BIN") {
            return p.into();
        }
        // The workspace's root (this package is its `bench/` member), where
        // `--features cli` names the `runlog` package's feature.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        if let Some(cargo) = std::env::var_os("CARGO") {
            // Under `cargo run` the binary may be stale or unbuilt; build it (a no-op
            // when fresh). A failure shows up below as a missing binary.
            let _ = Command::new(cargo)
                .args([
                    "build",
                    "--release",
                    "--quiet",
                    "--features",
                    "cli",
                    "--bin",
                    "runlog",
                ])
                .current_dir(&root)
                .status();
        }
        // This executable is TARGET/PROFILE/examples/compare; the binary is
        // TARGET/release/runlog, wherever the target directory is.
        let exe = std::env::current_exe().unwrap_or_default();
        match exe.ancestors().nth(3) {
            Some(target) => target.join("release/runlog"),
            None => root.join("target/release/runlog"),
        }
    }

    /// Runs `n` transitions through a fresh run; returns acks/s.
    fn pipe(bin: &Path, n: u64, limit: Duration) -> Result<f64, String> {
        let dir = tempfile::tempdir().map_err(s)?;
        let d = dir.path().join("runs");
        let init = Command::new(bin)
            .arg("--dir")
            .arg(&d)
            .args(["init", "--id", "r1", "--task", "bench"])
            .output()
            .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        if !init.status.success() {
            return Err(format!(
                "`runlog init` failed ({}): {}",
                init.status,
                String::from_utf8_lossy(&init.stderr).trim()
            ));
        }
        let mut child = Command::new(bin)
            .arg("--dir")
            .arg(&d)
            .args(["apply", "r1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(s)?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let started = Instant::now();
        let writer = std::thread::spawn(move || {
            let mut w = BufWriter::new(stdin);
            for i in 0..n {
                // Each unit goes in_progress, then done: every line is accepted.
                let status = ["in_progress", "done"][(i % 2) as usize];
                if writeln!(
                    w,
                    r#"{{"op":"unit","unit":"u{}","status":"{status}"}}"#,
                    i / 2
                )
                .is_err()
                {
                    break;
                }
            }
            let _ = w.flush();
        });
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut acks = 0u64;
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) if l.trim_start().starts_with("{\"seq\"") => acks += 1,
                    Ok(_) => {}
                    Err(_) => break,
                }
                if acks == n {
                    let _ = tx.send((acks, started.elapsed()));
                    return;
                }
            }
            let _ = tx.send((acks, started.elapsed()));
        });
        let got = rx.recv_timeout(limit);
        let _ = writer.join();
        if got.is_err() {
            let _ = child.kill();
        }
        let out = child.wait_with_output().map_err(s)?;
        let (acks, secs) = got.map_err(|_| format!("no full set of acks within {limit:?}"))?;
        if acks != n {
            return Err(format!(
                "{acks} acks for {n} lines ({}; stderr: {})",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(acks as f64 / secs.as_secs_f64())
    }

    pub fn setup(cfg: &Config, _: &super::Cache) -> Result<Contender, String> {
        let bin = binary();
        if !bin.exists() {
            return Err(format!("{} is not built", bin.display()));
        }
        // Probe the contract with one line before measuring.
        pipe(&bin, 1, Duration::from_secs(10)).map_err(|e| {
            format!(
                "{} does not implement `init`/`apply` yet: {e}",
                bin.display()
            )
        })?;
        let n: u64 = if cfg.quick { 5_000 } else { 20_000 };
        Ok(Contender {
            name: "apply_pipe",
            threads: 1,
            unit: "ops/s",
            one_shot: true,
            run: Box::new(move |_| pipe(&bin, n, Duration::from_secs(120))),
        })
    }
}
