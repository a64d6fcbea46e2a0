//! Table operations written as text (control API, CLI, config): arbitrary keys, matches,
//! parameters and operation sequences must give errors, never panics, and the tables must keep
//! answering lookups.
#![no_main]

use hotplane_core::Qsbr;
use hotplane_tables::text::{parse_match, parse_params};
use hotplane_tables::{ActionSpec, MatchKind, TableConfig, TableSet};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn tables() -> &'static (TableSet, Qsbr) {
    static T: OnceLock<(TableSet, Qsbr)> = OnceLock::new();
    T.get_or_init(|| {
        let q = Qsbr::new();
        let s = TableSet::new();
        let acts = vec![
            ActionSpec::new("fwd", &[("port", 9, false)]),
            ActionSpec::new("wide", &[("a", 128, true), ("b", 3, false)]),
        ];
        for (name, kind, bits) in [
            ("e", MatchKind::Exact, 12),
            ("l", MatchKind::Lpm, 32),
            ("l6", MatchKind::Lpm, 128),
            ("t", MatchKind::Ternary, 16),
        ] {
            let mut c = TableConfig::new(name, kind, bits, 32).with_actions(acts.clone());
            c.lpm_groups = Some(64);
            s.create(c, &q).unwrap();
        }
        (s, q)
    })
}

thread_local! {
    /// This thread is also the data plane: one reader, quiescent after each lookup.
    static READER: std::cell::RefCell<hotplane_core::Reader> =
        std::cell::RefCell::new(tables().1.register("fuzz"));
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (set, _) = tables();
    for line in text.lines().take(64) {
        let f: Vec<&str> = line.split(' ').collect();
        let (Some(name), Some(op)) = (f.first(), f.get(1)) else { continue };
        let Ok(t) = set.get(name) else { continue };
        let m = f.get(2).map(|m| parse_match(&t, m));
        let action = f.get(3).copied().unwrap_or("fwd");
        let params: Vec<String> = f.iter().skip(4).map(|s| s.to_string()).collect();
        let data = parse_params(&t, action, &params);
        let prio = (line.len() % 7) as u32;
        match (*op, m, data) {
            ("add", Some(Ok(m)), Ok(d)) => {
                if t.insert(&m, prio, action, &d).is_err() && t.len() > 16 {
                    t.clear();
                }
            }
            ("mod", Some(Ok(m)), Ok(d)) => {
                let _ = t.modify(&m, prio, action, &d);
            }
            ("del", Some(Ok(m)), _) => {
                let _ = t.delete(&m, prio);
            }
            ("def", _, Ok(d)) => {
                let _ = t.set_default(action, &d);
            }
            _ => {}
        }
        let w = t.config().key_bytes();
        let key: Vec<u8> = line.bytes().chain(std::iter::repeat(0)).take(w).collect();
        READER.with(|r| {
            let mut r = r.borrow_mut();
            {
                let g = r.guard();
                if let Some(e) = t.lookup(&key, &g) {
                    e.update(false, |d| d[0] = d[0].wrapping_add(1));
                }
            }
            r.quiescent();
        });
        let _ = t.entries();
    }
});
