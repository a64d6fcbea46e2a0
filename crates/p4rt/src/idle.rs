//! Idle timeouts: entries written with `idle_timeout_ns` into a table that supports them
//! (`support_timeout = true`, P4Info `NOTIFY_CONTROL`) are watched. When one has not been hit
//! for that long, the primary is told in an `IdleTimeoutNotification`; its timer then starts
//! again, so it is told again after each further `idle_timeout_ns` without a hit, until the
//! entry is hit, changed or deleted.
//!
//! The data plane keeps each entry's last hit (the tables' idle timestamps); this module keeps
//! only the timeouts, keyed by the entry's canonical match, and looks at the tables that have
//! watched entries when asked ([`Idle::due`]).

use crate::entities::{self, Op};
use crate::proto::p4::v1::{table_entry, TableEntry};
use crate::schema::Schema;
use hotplane_p4::exec::Pipeline;
use prost::Message;
use std::collections::{BTreeMap, HashMap};

/// An entry as the watch knows it: table id, canonical match (encoded), priority.
pub type Key = (u32, Vec<u8>, i32);

#[derive(Debug, Clone, Copy)]
struct Watch {
    /// 0: no notifications (the entry's time since its last hit is still kept).
    timeout_ns: u64,
    /// The timer runs from here: the write, the last hit seen, or the last notification.
    armed_ns: u64,
    /// When the entry was inserted: its idle time before its first hit.
    written_ns: u64,
}

/// The watched entries and their timeouts.
#[derive(Debug, Default, Clone)]
pub struct Idle {
    watched: HashMap<Key, Watch>,
    /// Watched entries per table id.
    tables: BTreeMap<u32, usize>,
}

/// The watch key of an entry with `matches` (canonical) and `priority` in table `table_id`.
pub fn key(table_id: u32, matches: &[crate::proto::p4::v1::FieldMatch], priority: i32) -> Key {
    let mut m = Vec::new();
    for f in matches {
        f.encode_length_delimited(&mut m).expect("a Vec grows");
    }
    (table_id, m, priority)
}

impl Idle {
    /// After a successful write of an entry of a table that supports idle timeouts: watch
    /// it (a MODIFY sets its new timeout and restarts its timer), or forget it.
    pub fn written(&mut self, key: Key, op: Op, timeout_ns: u64, now_ns: u64) {
        match op {
            Op::Insert | Op::Modify => {
                let table = key.0;
                let old = self.watched.get(&key).map(|w| w.written_ns);
                let written_ns = old.unwrap_or(now_ns);
                let new = Watch { timeout_ns, armed_ns: now_ns, written_ns };
                if self.watched.insert(key, new).is_none() {
                    *self.tables.entry(table).or_default() += 1;
                }
            }
            Op::Delete => self.forget(&key),
        }
    }

    fn forget(&mut self, key: &Key) {
        if self.watched.remove(key).is_some() {
            if let Some(n) = self.tables.get_mut(&key.0) {
                *n -= 1;
                if *n == 0 {
                    self.tables.remove(&key.0);
                }
            }
        }
    }

    /// The entry's idle timeout, 0 when it has none.
    pub fn timeout_of(&self, key: &Key) -> u64 {
        self.watched.get(key).map_or(0, |w| w.timeout_ns)
    }

    /// Keep the watches of tables the new program still has and that still support timeouts
    /// (a reconciled pipeline keeps their entries), or none.
    pub fn keep_only(&mut self, schema: Option<&Schema>) {
        let keep =
            |id: &u32| schema.and_then(|s| s.tables.get(id)).is_some_and(|t| t.supports_timeout);
        self.watched.retain(|k, _| keep(&k.0));
        self.tables.retain(|id, _| keep(id));
    }

    /// Whether some watched entry has a timeout (the scan has something to do).
    pub fn has_timeouts(&self) -> bool {
        self.watched.values().any(|w| w.timeout_ns > 0)
    }

    /// The entries idle for their timeout at `now_ns` (a `time::now_ns` reading), as their
    /// notification lists them; their timers start again. Watches of entries no longer in
    /// the table (deleted another way) are dropped.
    pub fn due(&mut self, schema: &Schema, p: &Pipeline, now_ns: u64) -> Vec<TableEntry> {
        let mut out = Vec::new();
        let ids: Vec<u32> = self.tables.keys().copied().collect();
        for id in ids {
            let Some(t) = schema.tables.get(&id) else { continue };
            let Some(table) = p.objects.tables.get(t.index).filter(|x| x.name == t.name) else {
                continue;
            };
            // Watched entries seen in the table; the others were deleted another way.
            let mut seen = std::collections::HashSet::new();
            for (e, stats) in entities::entries_as_written(t, table.entries()) {
                let matches = entities::field_matches(t, &e.keys);
                let priority = e.priority.unwrap_or(0) as i32;
                let k = key(id, &matches, priority);
                let Some(w) = self.watched.get_mut(&k) else { continue };
                w.armed_ns = w.armed_ns.max(stats.last_hit_ns);
                if w.timeout_ns > 0 && now_ns.saturating_sub(w.armed_ns) >= w.timeout_ns {
                    w.armed_ns = now_ns;
                    out.push(TableEntry {
                        table_id: id,
                        r#match: matches,
                        priority,
                        idle_timeout_ns: w.timeout_ns as i64,
                        ..Default::default()
                    });
                }
                seen.insert(k);
            }
            if seen.len() < self.tables.get(&id).copied().unwrap_or(0) {
                self.watched.retain(|k, _| k.0 != id || seen.contains(k));
                match seen.len() {
                    0 => self.tables.remove(&id),
                    n => self.tables.insert(id, n),
                };
            }
        }
        out
    }

    /// What a read of `entry` says of its idle time: its timeout, and (when the read asks
    /// with `time_since_last_hit`) how long since its last hit or its write.
    pub fn annotate(&self, entry: &mut TableEntry, last_hit_ns: u64, asked: bool, now_ns: u64) {
        let k = key(entry.table_id, &entry.r#match, entry.priority);
        let Some(w) = self.watched.get(&k) else { return };
        entry.idle_timeout_ns = w.timeout_ns as i64;
        if asked {
            let since = last_hit_ns.max(w.written_ns);
            let elapsed_ns = now_ns.saturating_sub(since) as i64;
            entry.time_since_last_hit = Some(table_entry::IdleTimeout { elapsed_ns });
        }
    }
}
