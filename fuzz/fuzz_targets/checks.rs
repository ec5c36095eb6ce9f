#![allow(dead_code)] // each target uses one of these checks
//! What each fuzz target runs on one input, shared by the fuzz targets and by
//! `tests/engine/fuzz_corpus_replay.rs` (which includes this file by path). The
//! stores live on the library's simulated filesystem (`runlog::engine::sim::SimFs`,
//! feature `sim`), under `/mem`.

use runlog::engine::frame::{
    Frame, decode_record, decode_segment_header, encode_record, encode_segment_header,
    next_candidate,
};
use runlog::engine::scan::scan_segment;
use runlog::engine::sim::SimFs;
use runlog::engine::snapfile::{decode_snapshot, encode_snapshot, encode_snapshot_tagged};
use runlog::engine::tailcache::{TailCache, decode_tail_cache, encode_tail_cache};
use runlog::engine::writers::{
    decode_appended, decode_shared, decode_sync_state, encode_appended, encode_sync_state,
};
use runlog::engine::{
    ApplyError, Codec, CompactionPolicy, Keyed, KeyedMachine, KeyedState, Machine, Options, Reader,
    Store, SyncPolicy,
};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// `runlog apply`'s line protocol (the length cap and the parser): the
/// library's, public under the `sim` feature.
use runlog::run::ops as cli_ops;

const CODECS: [Codec; 2] = [Codec::Binary, Codec::Jsonl];

/// A fresh simulated filesystem holding the directory `/mem` (mode 0700).
fn mem_fs() -> SimFs {
    let fs = SimFs::new();
    fs.mkdir(Path::new("/mem"), 0o700);
    fs
}

/// A small machine for the recovery target: a list of numbers; 0 is refused.
pub struct Nums;

/// `Nums` refuses 0.
#[derive(Debug)]
pub struct Zero;
impl std::fmt::Display for Zero {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("zero is refused")
    }
}
impl std::error::Error for Zero {}

/// State of `Nums`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumsState {
    /// Every accepted number.
    pub values: Vec<u64>,
}

impl Machine for Nums {
    type State = NumsState;
    type Transition = u64;
    type Error = Zero;
    fn apply(s: &mut NumsState, t: &u64) -> Result<(), Zero> {
        if *t == 0 {
            return Err(Zero);
        }
        s.values.push(*t);
        Ok(())
    }
}

/// `record_decode`: frames, resync candidates and whole-segment scans, both codecs.
/// A decoded binary record re-encodes to exactly its bytes; a JSONL one to a line
/// that decodes to the same record.
pub fn record_decode(data: &[u8]) {
    for codec in CODECS {
        let mut at = 0;
        while let Frame::Record {
            seq,
            synced,
            payload,
            next,
        } = decode_record(codec, data, at)
        {
            assert!(next > at && next <= data.len());
            let mut again = Vec::new();
            encode_record(codec, seq, synced, payload, &mut again);
            match codec {
                Codec::Binary => assert_eq!(again, &data[at..next]),
                Codec::Jsonl => match decode_record(codec, &again, 0) {
                    Frame::Record {
                        seq: s2,
                        payload: p2,
                        ..
                    } => {
                        assert_eq!((s2, p2), (seq, payload))
                    }
                    other => panic!("re-encoded record does not decode: {other:?}"),
                },
            }
            at = next;
        }
        let mut pos = 0;
        let mut steps = 0;
        while let Some(p) = next_candidate(codec, data, pos) {
            assert!(p > pos);
            pos = p;
            steps += 1;
            if steps > 64 {
                break;
            }
        }
        // With a valid header in front, the fuzzer reaches the record loop directly.
        let mut seg = encode_segment_header(codec, 1);
        seg.extend_from_slice(data);
        for bytes in [data, &seg[..]] {
            let mut last = 0;
            let scan = scan_segment::<()>(bytes, |seq, _, off| {
                assert!(seq > last && off < bytes.len() as u64);
                last = seq;
                Ok(())
            })
            .unwrap();
            assert!(scan.valid_len <= scan.file_len);
        }
    }
    let _ = decode_segment_header(data);
}

/// `snapshot_decode`: a decoded snapshot re-encodes to exactly its bytes (binary)
/// or to a file that decodes the same (JSONL); its payload decode never panics.
pub fn snapshot_decode(data: &[u8]) {
    if let Ok(v) = decode_snapshot(data) {
        let tagging = v.tagging.as_ref().map(|(id, tag)| (id, tag));
        let again = encode_snapshot_tagged(v.codec, v.seq, v.payload, tagging);
        match v.codec {
            Codec::Binary => assert_eq!(again, data),
            Codec::Jsonl => assert_eq!(decode_snapshot(&again).unwrap(), v),
        }
        let _ = v.codec.decode::<NumsState>(v.payload);
    }
    let mut wrapped = Vec::new();
    for codec in CODECS {
        wrapped.clear();
        wrapped.extend_from_slice(&encode_snapshot(codec, 3, data));
        let v = decode_snapshot(&wrapped).unwrap();
        assert_eq!((v.codec, v.seq, v.payload), (codec, 3, data));
        let _ = codec.decode::<NumsState>(v.payload);
    }
}

/// `tail_decode`: a decoded tail cache (FORMAT.md §15) re-encodes to exactly
/// its bytes; any bytes wrapped as a cache's payload decode back; a keyed
/// machine's decoding of a payload never panics, and what it accepts it
/// encodes again to a payload it accepts with the same state.
pub fn tail_decode(data: &[u8]) {
    if let Ok(c) = decode_tail_cache(data) {
        assert_eq!(encode_tail_cache(&c), data);
    }
    let c = TailCache {
        base_seq: 1,
        last_seq: 2,
        digest: 3,
        payload: data.to_vec(),
    };
    assert_eq!(decode_tail_cache(&encode_tail_cache(&c)), Ok(c));
    let mut st = KeyedState::<KNums>::default();
    if <Keyed<KNums> as Machine>::decode_tail(&mut st, data).is_ok() {
        let again = <Keyed<KNums> as Machine>::encode_tail(&st).expect("a decoded cache encodes");
        let mut st2 = KeyedState::<KNums>::default();
        <Keyed<KNums> as Machine>::decode_tail(&mut st2, &again).expect("its encoding decodes");
        assert_eq!(
            <Keyed<KNums> as Machine>::encode_tail(&st2).expect("encodes again"),
            again
        );
    }
}

/// Target `shared_decode`: `SHARED`'s two slots (FORMAT.md §5.8, version 2)
/// read from any bytes, as every writer reads them: never a panic, and a slot
/// that decodes encodes back to exactly its bytes (the generation included),
/// so no two byte strings mean the same position or state; a file read under
/// another boot's id keeps nothing.
pub fn shared_decode(data: &[u8]) {
    let boot = [0xb0; 16];
    let found = decode_shared(data, &boot);
    let slot = |i: usize| data.get(i * 64..(i + 1) * 64);
    if let Some(a) = found.appended {
        assert_eq!(&encode_appended(&a)[..], slot(0).unwrap());
    }
    if let Some(s) = found.state {
        assert_eq!(&encode_sync_state(&s)[..], slot(1).unwrap());
    }
    for i in 0..2 {
        let Some(bytes) = slot(i) else { continue };
        if let Ok(a) = decode_appended(bytes) {
            assert_eq!(&encode_appended(&a)[..], bytes);
        }
        if let Ok(s) = decode_sync_state(bytes) {
            assert_eq!(&encode_sync_state(&s)[..], bytes);
        }
    }
    let other = decode_shared(data, &[0xb1; 16]);
    assert!(
        other.appended.is_none_or(|a| a.boot == [0xb1; 16])
            && other.state.is_none_or(|s| s.boot == [0xb1; 16])
    );
}

/// A keyed machine for the recovery target (format v2: its state in a table
/// snapshot): the `n`th accepted number is stored under key `n`; 0 is refused.
/// It also reads `Nums`'s whole-state snapshots (format v1).
pub struct KNums;

/// Header of `KNums`: how many numbers were accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KNumsHeader {
    /// Numbers accepted.
    pub count: u64,
}

fn knums_key(n: u64) -> String {
    format!("{n:020}")
}

impl KeyedMachine for KNums {
    type Header = KNumsHeader;
    type Value = u64;
    type Transition = u64;
    type Error = Zero;
    fn apply(s: &mut KeyedState<KNums>, t: &u64) -> Result<(), ApplyError<Zero>> {
        if *t == 0 {
            return Err(ApplyError::Refused(Zero));
        }
        let n = s.header().count + 1;
        s.put(&knums_key(n), *t).map_err(ApplyError::Damaged)?;
        s.header_mut().count = n;
        Ok(())
    }
    fn decode_whole(
        codec: Codec,
        payload: &[u8],
    ) -> Result<(KNumsHeader, Vec<(String, u64)>), String> {
        let st: NumsState = codec.decode(payload).map_err(|e| e.to_string())?;
        let entries: Vec<(String, u64)> = st
            .values
            .iter()
            .enumerate()
            .map(|(i, v)| (knums_key(i as u64 + 1), *v))
            .collect();
        Ok((
            KNumsHeader {
                count: entries.len() as u64,
            },
            entries,
        ))
    }
}

/// A keyed state read in full: the header and every entry, or the damage met.
fn knums_read(s: &KeyedState<KNums>) -> Result<(KNumsHeader, Vec<(String, u64)>), String> {
    let mut v = Vec::new();
    for e in s.iter() {
        let (k, x) = e.map_err(|e| e.to_string())?;
        v.push((k.into_owned(), x));
    }
    Ok((s.header().clone(), v))
}

/// `recovery`: input = flags u8, split u16 LE, then bytes cut at `split` into a
/// segment file and a snapshot file. flags bit 0: codec asked for; bit 1: write the
/// snapshot; bit 2: put a valid segment header in front; bits 3..: snapshot seq.
/// Verify, read and open must not panic; an open that succeeds must be repeatable
/// and continue with the next seq. The same files are then recovered as a keyed
/// store (`KNums`), whose snapshot may be a table (format v2) or a whole state.
pub fn recovery(data: &[u8]) {
    recovery_whole(data);
    recovery_keyed(data);
}

/// The files of a `recovery` input in a fresh in-memory store, and its codec.
fn recovery_files(data: &[u8]) -> Option<(SimFs, Codec)> {
    if data.len() < 3 {
        return None;
    }
    let flags = data[0];
    let split_bits = u16::from_le_bytes([data[1], data[2]]);
    // The top bit of the split: the last 40 bytes are a durability mark
    // (`DURABLE`, FORMAT.md §5.7), fuzzed like every other file.
    let split = usize::from(split_bits & 0x7fff);
    let mut rest = &data[3..];
    let mut mark = None;
    if split_bits & 0x8000 != 0 && rest.len() >= 40 {
        let (r, m) = rest.split_at(rest.len() - 40);
        rest = r;
        mark = Some(m.to_vec());
    }
    let (seg, snap) = rest.split_at(split.min(rest.len()));
    let codec = CODECS[usize::from(flags & 1)];
    let fs = mem_fs();
    let mut seg_bytes = Vec::new();
    if flags & 4 != 0 {
        seg_bytes = encode_segment_header(codec, 1);
    }
    seg_bytes.extend_from_slice(seg);
    let mut files = vec![("seg-00000000000000000001.log".to_string(), seg_bytes)];
    if flags & 2 != 0 {
        let seq = u64::from(flags >> 3);
        files.push((format!("snap-{seq:020}.snap"), snap.to_vec()));
    }
    if let Some(m) = mark {
        files.push(("DURABLE".to_string(), m));
    }
    if flags & 2 == 0 && !snap.is_empty() {
        // No snapshot: the bytes after the split are a tail cache (§15).
        files.push(("TAIL".to_string(), snap.to_vec()));
    }
    fs.set_files(Path::new("/mem/store"), &files);
    Some((fs, codec))
}

/// How the `recovery` checks open what they recovered: no create, no fsync, no
/// automatic compaction, on the input's simulated filesystem.
fn reopen_opts(fs: &SimFs, codec: Codec) -> Options {
    Options {
        create: false,
        codec,
        sync: SyncPolicy::Never,
        compaction: CompactionPolicy::Manual,
        vfs: Arc::new(fs.clone()),
        ..Options::default()
    }
}

/// `recovery` with the keyed machine: the same rules, the state read by
/// iteration (a damaged block met there is an error, never a panic).
fn recovery_keyed(data: &[u8]) {
    let Some((fs, codec)) = recovery_files(data) else {
        return;
    };
    let dir = Path::new("/mem/store");
    let _ = Reader::new(&fs, dir).verify();
    if let Ok((st, _)) = Reader::new(&fs, dir).state::<Keyed<KNums>>() {
        let _ = knums_read(&st);
    }
    let opts = reopen_opts(&fs, codec);
    let Ok(s) = Store::<Keyed<KNums>>::open(dir, opts.clone()) else {
        return;
    };
    let Ok(state) = s.read(knums_read) else {
        return; // a damaged block, reported
    };
    let last = s.last_seq();
    // A compaction streams the table and the overlay into a new table.
    let compacted = s.compact().is_ok();
    drop(s);
    let s = Store::<Keyed<KNums>>::open(dir, opts.clone()).expect("a recovered store reopens");
    if compacted && last > 0 {
        // The new table is the base (a damaged snapshot past the log's end
        // may still be reported, loudly, at every open).
        assert_eq!(s.recovery().snapshot_seq, Some(last));
    }
    assert_eq!(
        (s.read(knums_read).expect("read after reopen"), s.last_seq()),
        (state.clone(), last)
    );
    assert_eq!(s.append(&7).expect("append after recovery"), last + 1);
    drop(s);
    let s = Store::<Keyed<KNums>>::open(dir, opts).expect("reopens after append");
    let (mut h, mut v) = state;
    h.count += 1;
    v.push((knums_key(h.count), 7));
    assert_eq!(s.read(knums_read).expect("read after append"), (h, v));
}

fn recovery_whole(data: &[u8]) {
    let Some((fs, codec)) = recovery_files(data) else {
        return;
    };
    let dir = Path::new("/mem/store");
    let _ = Reader::new(&fs, dir).verify();
    let _ = Reader::new(&fs, dir).state::<Nums>();
    let opts = reopen_opts(&fs, codec);
    let Ok(s) = Store::<Nums>::open(dir, opts.clone()) else {
        return;
    };
    let state = s.read(|st| st.clone());
    let last = s.last_seq();
    drop(s);
    let s = Store::<Nums>::open(dir, opts.clone()).expect("a recovered store reopens");
    assert_eq!(
        (s.read(|st| st.clone()), s.last_seq()),
        (state.clone(), last)
    );
    assert_eq!(s.append(&7).expect("append after recovery"), last + 1);
    drop(s);
    let s = Store::<Nums>::open(dir, opts).expect("reopens after append");
    let mut want = state;
    want.values.push(7);
    assert_eq!(s.read(|st| st.clone()), want);
}

/// `apply_input`: arbitrary bytes as `runlog apply`'s stdin. Each line is read with
/// the CLI's length cap and parsed by the CLI's parser; an accepted operation is
/// applied to a run document in memory. Never a panic; a refused operation leaves
/// the document exactly as it was; an operation that parses round-trips through
/// both codecs unchanged.
pub fn apply_input(data: &[u8]) {
    use cli_ops::{Line, MAX_OP_LINE_BYTES, parse_op_line, read_line_capped};
    use runlog::run::{Change, InitSpec, RunDoc, RunMachine, Transition};
    let at = "2026-11-29T00:00:00.000Z".to_string();
    let mut doc = RunDoc::default();
    let init = InitSpec {
        id: "fuzz".into(),
        task: "fuzz".into(),
        units: vec!["a".into(), "b".into()],
        ..InitSpec::default()
    };
    RunMachine::apply(
        &mut doc,
        &Transition {
            at: at.clone(),
            change: Change::Init(init),
        },
    )
    .expect("init applies to an empty document");
    let mut input = std::io::BufReader::new(data);
    let mut buf = Vec::new();
    while let Ok(Some(line)) = read_line_capped(&mut input, MAX_OP_LINE_BYTES) {
        let Line::Text(bytes) = line else { continue };
        let text = String::from_utf8_lossy(&bytes);
        let Ok(change) = parse_op_line(text.trim()) else {
            continue;
        };
        let t = Transition {
            at: at.clone(),
            change,
        };
        for codec in CODECS {
            if codec.encode(&t, &mut buf).is_ok() {
                let back: Transition = codec.decode(&buf).expect("an encoded transition decodes");
                assert_eq!(back, t, "{codec:?} round trip");
            }
        }
        let before = doc.clone();
        if RunMachine::apply(&mut doc, &t).is_err() {
            assert_eq!(doc, before, "a refused operation changed the document");
        }
    }
}

/// The key the `table_decode` seeds of tagged tables are written with.
pub const TABLE_FUZZ_KEY: [u8; 32] = [0x42; 32];

/// `table_decode`: a table snapshot (FORMAT.md §11) opened from arbitrary bytes,
/// untagged and tagged, then iterated, looked up and verified: never a panic; an
/// entry `iter` yields is found by `get` with the same value or an error; a
/// table that verifies yields exactly `len` entries. Then the bytes, cut into
/// entries, are written by `TableWriter` and read back unchanged.
pub fn table_decode(data: &[u8]) {
    use runlog::engine::Key;
    use runlog::engine::table::{Table, TableSpec, TableWriter};
    use std::collections::BTreeMap;
    let key = Key::from_bytes(TABLE_FUZZ_KEY);
    for k in [None, Some(&key)] {
        let Ok(t) = Table::from_bytes("fuzz.table".into(), Box::new(data.to_vec()), k) else {
            continue;
        };
        let _ = (t.header(), t.seq(), t.codec(), t.store_id(), t.size());
        let mut n = 0u64;
        let mut seen = Vec::new();
        for r in t.iter() {
            let Ok((k, v)) = r else { break };
            n += 1;
            if seen.len() < 16 {
                seen.push((k.to_vec(), v.to_vec()));
            }
        }
        for (k, v) in &seen {
            if let Ok(got) = t.get(k) {
                assert_eq!(got, Some(v.as_slice()), "get disagrees with iter");
            }
        }
        if t.verify().is_ok() {
            assert_eq!(n, t.len(), "a verified table iterates every entry");
        }
        for probe in [&b""[..], b"a", b"unit-01", &[0xff; 4]] {
            let _ = t.get(probe);
            let _ = t.iter_from(probe).take(4).count();
        }
    }
    // The writer on entries cut from the input: key len, value len, bytes.
    let mut model = BTreeMap::new();
    let mut rest = data;
    while let [kl, vl, tail @ ..] = rest {
        let (kl, vl) = (usize::from(kl % 8), usize::from(vl % 64));
        let Some(kv) = tail.get(..kl + vl) else { break };
        model.insert(kv[..kl].to_vec(), kv[kl..].to_vec());
        rest = &tail[kl + vl..];
    }
    let fs = mem_fs();
    let dir = Path::new("/mem");
    let spec = TableSpec {
        codec: Codec::Binary,
        seq: 1,
        tagging: (data.len() % 2 == 1).then(|| (key.clone(), [7; 16])),
        block_bytes: usize::from(data.first().copied().unwrap_or(0)),
        // An even second byte writes a delta table (FORMAT.md §14) over seq 0.
        parent: data.get(1).is_some_and(|b| b % 2 == 0).then_some(0),
        // A third byte picks the index: unpaged (0, versions 2 and 3) or
        // pages of 1..=7 entries (§11.8).
        page_entries: data.get(2).map_or(64, |b| usize::from(b % 8)),
    };
    let mut w = TableWriter::create(Arc::new(fs.clone()), dir, "t", spec.clone())
        .expect("create on the in-memory fs");
    for (k, v) in &model {
        w.add(k, v)
            .expect("sorted entries within limits are accepted");
    }
    w.finish(data.get(..8).unwrap_or(data))
        .expect("finish on the in-memory fs");
    let bytes = fs.get(&dir.join("t")).expect("installed");
    let t = Table::from_bytes(
        "t".into(),
        Box::new(bytes),
        spec.tagging.as_ref().map(|(k, _)| k),
    )
    .expect("a written table opens");
    t.verify().expect("a written table verifies");
    assert!(
        t.iter()
            .map(|r| r.unwrap())
            .eq(model.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))
    );
    for (k, v) in &model {
        assert_eq!(t.get(k).unwrap(), Some(v.as_slice()));
    }
}

/// `manifest_decode`: a remote manifest (FORMAT.md §13.2) named number 1 that
/// decodes re-encodes to one that decodes the same; each inline entry (version
/// 2) decodes to frames of its stated length matching its digest, and
/// checking those frames as restore does returns (never panics).
pub fn manifest_decode(data: &[u8]) {
    use runlog::remote::layout::Manifest;
    let Ok(m) = Manifest::decode(1, data) else {
        return;
    };
    assert_eq!(Manifest::decode(1, &m.encode()).unwrap(), m);
    let codec = m.codec.parse::<Codec>().ok();
    for r in &m.inline {
        let bytes = r.bytes().expect("a checked inline entry is base64");
        assert_eq!(bytes.len() as u64, r.len());
        assert_eq!(runlog::remote::frame_digest(&bytes), r.digest);
        if let Some(codec) = codec {
            let _ = runlog::remote::check_frames("m", &bytes, 0, codec, r.first, r.last, "inline");
        }
    }
}
