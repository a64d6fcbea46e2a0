//! Concurrency: workers (threads registered as QSBR readers, quiescent between "batches") and a
//! control thread hammer the same tables. Run under the address sanitizer by scripts/test.sh.

use hotplane_core::Qsbr;
use hotplane_tables::key::pack;
use hotplane_tables::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Iterations scale down under sanitizers (`HOTPLANE_TEST_SCALE=0.1`).
fn scaled(n: u64) -> u64 {
    let s: f64 =
        std::env::var("HOTPLANE_TEST_SCALE").ok().and_then(|v| v.parse().ok()).unwrap_or(1.0);
    ((n as f64 * s) as u64).max(1000)
}

fn run_for() -> Duration {
    Duration::from_millis(scaled(800))
}

fn counter_table(store: Store, locked: bool, size: usize) -> TableConfig {
    let mut c = TableConfig::new("c", MatchKind::Exact, 32, size)
        .with_actions(vec![ActionSpec::new("count", &[("n", 64, true), ("twice", 64, true)])]);
    c.store = store;
    c.locked = locked;
    c
}

fn key(k: u32) -> [u64; 1] {
    let mut w = [0u64];
    pack(&k.to_be_bytes(), &mut w);
    w
}

#[test]
fn locked_increments_from_many_workers_are_exact() {
    for store in [Store::Static, Store::Dynamic] {
        let q = Qsbr::new();
        let t = Arc::new(ExactTable::new(counter_table(store, true, 16), &q).unwrap());
        t.insert(&7u32.to_be_bytes(), 0, &[0, 0]).unwrap();
        let per_worker = scaled(2_000_000);
        let workers = 3;
        let torn = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..workers)
            .map(|i| {
                let (t, q, torn) = (t.clone(), q.clone(), torn.clone());
                std::thread::spawn(move || {
                    let mut r = q.register(format!("w{i}"));
                    for n in 0..per_worker {
                        {
                            let g = r.guard();
                            let e = t.lookup(&key(7), &g).expect("entry present");
                            e.update(true, |d| {
                                d[0] += 1;
                                d[1] += 2;
                            });
                            if n % 64 == 0 {
                                let mut snap = [0u64; 2];
                                e.read(&mut snap);
                                if snap[1] != 2 * snap[0] {
                                    torn.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        if n % 32 == 0 {
                            r.quiescent();
                        }
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        let e = ExactTable::get(&t, &7u32.to_be_bytes()).unwrap();
        assert_eq!(e.data.data, vec![workers * per_worker, 2 * workers * per_worker], "{store:?}");
        assert_eq!(torn.load(Ordering::Relaxed), 0, "a snapshot saw half an update");
    }
}

#[test]
fn snapshots_never_mix_two_writes() {
    let q = Qsbr::new();
    let mut cfg =
        TableConfig::new("w", MatchKind::Exact, 32, 16).with_actions(vec![ActionSpec::new(
            "a",
            &[("w0", 64, true), ("w1", 64, true), ("w2", 64, true), ("w3", 64, true)],
        )]);
    cfg.locked = true;
    let t = Arc::new(ExactTable::new(cfg, &q).unwrap());
    t.insert(&1u32.to_be_bytes(), 0, &[0; 4]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(3));
    let mut threads = vec![];
    for role in 0..2u64 {
        let (t, q, stop, start) = (t.clone(), q.clone(), stop.clone(), start.clone());
        threads.push(std::thread::spawn(move || {
            let mut r = q.register(format!("w{role}"));
            start.wait();
            let (mut checked, mut n) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                {
                    let g = r.guard();
                    let e = t.lookup(&key(1), &g).unwrap();
                    if role == 0 {
                        // A locked data-plane writer: all four words at once.
                        n += 1;
                        let v = n << 8 | 0xd;
                        e.update(true, |d| d.fill(v));
                    } else {
                        let mut s = [0u64; 4];
                        e.read(&mut s);
                        assert!(s.iter().all(|&x| x == s[0]), "torn snapshot {s:x?}");
                        checked += 1;
                    }
                }
                r.quiescent();
            }
            checked
        }));
    }
    start.wait();
    let deadline = Instant::now() + run_for();
    let mut v = 0u64;
    while Instant::now() < deadline {
        v += 1;
        t.modify(&1u32.to_be_bytes(), 0, &[v << 8 | 0xc; 4]).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let _ = threads.remove(0).join().unwrap();
    let checked = threads.remove(0).join().unwrap();
    assert!(checked > 0 && v > 10, "checked {checked} snapshots over {v} control writes");
}

/// Entries carry `key << 32 | n`. Workers write their key's values in place while the control
/// plane deletes and re-inserts keys; a write that landed in a reused slot would show up as
/// another key's value.
#[test]
fn deletes_racing_data_plane_writes_never_cross_keys() {
    for (store, locked) in [(Store::Static, false), (Store::Dynamic, true), (Store::Dynamic, false)]
    {
        let q = Qsbr::new();
        let keys = 64u32;
        let t = Arc::new(ExactTable::new(counter_table(store, locked, 128), &q).unwrap());
        for k in 0..keys {
            t.insert(&k.to_be_bytes(), 0, &[(k as u64) << 32, 0]).unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let wrong = Arc::new(AtomicU64::new(0));
        let writes = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let (t, q, stop, wrong, writes) =
                    (t.clone(), q.clone(), stop.clone(), wrong.clone(), writes.clone());
                std::thread::spawn(move || {
                    let mut r = q.register(format!("w{i}"));
                    let mut x = 0x9e37_79b9u32.wrapping_mul(i + 1);
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        {
                            let g = r.guard();
                            for _ in 0..16 {
                                x ^= x << 13;
                                x ^= x >> 17;
                                x ^= x << 5;
                                let k = x % keys;
                                if let Some(e) = t.lookup(&key(k), &g) {
                                    n += 1;
                                    let old = e.exchange_word(
                                        locked,
                                        0,
                                        (k as u64) << 32 | (n & 0xffff_ffff),
                                    );
                                    if old >> 32 != k as u64 {
                                        wrong.fetch_add(1, Ordering::Relaxed);
                                    }
                                }
                            }
                        }
                        r.quiescent();
                    }
                    writes.fetch_add(n, Ordering::Relaxed);
                })
            })
            .collect();
        let deadline = Instant::now() + run_for();
        let mut churn = 0u32;
        while Instant::now() < deadline {
            churn += 1;
            let k = churn.wrapping_mul(2_654_435_761) % keys;
            t.delete(&k.to_be_bytes()).unwrap();
            t.insert(&k.to_be_bytes(), 0, &[(k as u64) << 32, 0]).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for th in threads {
            th.join().unwrap();
        }
        assert_eq!(
            wrong.load(Ordering::Relaxed),
            0,
            "{store:?}: a write crossed into another key's entry"
        );
        for e in t.entries() {
            let k = u32::from_be_bytes(e.key[..4].try_into().unwrap());
            assert_eq!(e.data.data[0] >> 32, k as u64);
        }
        assert_eq!(t.len(), keys as usize);
        assert!(writes.load(Ordering::Relaxed) > 0 && churn > 10);
    }
}

#[test]
fn insert_on_miss_from_two_workers_never_duplicates() {
    for store in [Store::Static, Store::Dynamic] {
        let q = Qsbr::new();
        let mut cfg = counter_table(store, true, 2048);
        cfg.insert_on_miss = Some(InsertOnMiss { action: "count".into(), data: vec![] });
        let t = Arc::new(ExactTable::new(cfg, &q).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let (t, q, stop) = (t.clone(), q.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut r = q.register(format!("w{i}"));
                    let mut x = 12345u32 + i;
                    while !stop.load(Ordering::Relaxed) {
                        {
                            let g = r.guard();
                            for _ in 0..32 {
                                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                                let k = (x >> 8) % 3000;
                                match t.lookup_or_insert(&key(k), &g) {
                                    Lookup::Hit(e) | Lookup::Inserted(e) => {
                                        e.update(true, |d| d[0] += 1);
                                    }
                                    Lookup::Miss => {}
                                }
                            }
                        }
                        r.quiescent();
                    }
                })
            })
            .collect();
        let deadline = Instant::now() + run_for();
        let mut k = 0u32;
        while Instant::now() < deadline {
            k = (k + 7) % 3000;
            let _ = t.delete(&k.to_be_bytes());
        }
        stop.store(true, Ordering::Relaxed);
        for th in threads {
            th.join().unwrap();
        }
        let entries = t.entries();
        let unique: HashSet<Vec<u8>> = entries.iter().map(|e| e.key.clone()).collect();
        assert_eq!(unique.len(), entries.len(), "{store:?}: a key was inserted twice");
        assert_eq!(entries.len(), t.len());
        assert!(t.len() <= 2048);
        assert!(t.counters.inserted_on_miss.load(Ordering::Relaxed) > 0);
    }
}

/// Readers always get a prefix that really covers the address while routes come and go.
#[test]
fn lpm_readers_see_only_covering_prefixes_during_updates() {
    let q = Qsbr::new();
    let cfg = TableConfig::new("r", MatchKind::Lpm, 32, 4096)
        .with_actions(vec![ActionSpec::new("route", &[("prefix", 64, false)])]);
    let t = Arc::new(LpmTable::new(cfg, &q).unwrap());
    let base = 0x0a01_0000u32;
    let enc = |p: u32, l: u32| (p as u64) << 8 | l as u64;
    t.insert(&base.to_be_bytes(), 16, 0, &[enc(base, 16)]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let wrong = Arc::new(AtomicU64::new(0));
    let checked = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..2)
        .map(|i| {
            let (t, q, stop, wrong, checked) =
                (t.clone(), q.clone(), stop.clone(), wrong.clone(), checked.clone());
            std::thread::spawn(move || {
                let mut r = q.register(format!("w{i}"));
                let mut a = base;
                while !stop.load(Ordering::Relaxed) {
                    {
                        let g = r.guard();
                        for _ in 0..64 {
                            a = base | (a.wrapping_mul(2_654_435_761) >> 16);
                            // `clear` removes the /16 for a moment: a miss is allowed.
                            if let Some(e) = t.lookup_u32(a, &g) {
                                let v = e.word(0);
                                let (p, l) = ((v >> 8) as u32, (v & 0xff) as u32);
                                if a & (u32::MAX << (32 - l)) != p {
                                    wrong.fetch_add(1, Ordering::Relaxed);
                                }
                                checked.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    r.quiescent();
                }
            })
        })
        .collect();
    let deadline = Instant::now() + run_for();
    let mut n = 0u32;
    while Instant::now() < deadline {
        n += 1;
        let l = [20, 24, 28, 32][(n % 4) as usize];
        let p = (base | (n.wrapping_mul(40503) & 0xffff)) & (u32::MAX << (32 - l));
        if t.insert(&p.to_be_bytes(), l, 0, &[enc(p, l)]).is_ok() && n % 3 != 0 {
            t.delete(&p.to_be_bytes(), l).unwrap();
        }
        if n % 512 == 0 {
            t.clear();
            t.insert(&base.to_be_bytes(), 16, 0, &[enc(base, 16)]).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for th in threads {
        th.join().unwrap();
    }
    assert_eq!(
        wrong.load(Ordering::Relaxed),
        0,
        "a lookup returned a prefix not covering the address"
    );
    assert!(checked.load(Ordering::Relaxed) > 1000 && n > 100);
}
