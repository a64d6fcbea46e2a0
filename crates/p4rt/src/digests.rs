//! Digests: what a program's `digest` calls send, gathered into `DigestList`s for the primary
//! controller as each digest's `DigestEntry` configuration asks.
//!
//! A digest nobody configured is dropped (counted). A configured one waits until its list holds
//! `max_list_size` digests (0: no limit) or its first digest has waited `max_timeout_ns` (0: sent
//! at once). Until the controller acknowledges a list (`DigestListAck`) or `ack_timeout_ns`
//! passes, the same data is not sent again: a learning switch's repeated digests for one
//! source address reach the controller once.

use crate::entities::{Op, Refused};
use crate::proto::google::rpc::Code;
use crate::proto::p4::v1::{digest_entry, p4_data, DigestEntry, DigestList, P4Data, P4StructLike};
use hotplane_p4::ir::DigestType;
use hotplane_tables::DigestRecord;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

/// Digests one list may carry at most, whatever the configuration asks.
pub const MAX_LIST_SIZE: usize = 4096;

/// Digests held in all (waiting to be sent, or sent and not yet acknowledged): beyond it new
/// digests are dropped and counted, so a controller that never acknowledges cannot grow it.
pub const MAX_HELD: usize = 1 << 16;

/// A digest's data as the data plane sends it: the members back to back from the first bit.
type Data = [u64; 4];

#[derive(Debug, Clone, PartialEq, Eq)]
struct Config {
    max_timeout: Duration,
    /// As written (read back as written), and as applied (0: [`MAX_LIST_SIZE`]).
    requested_list_size: i32,
    max_list_size: usize,
    ack_timeout: Duration,
    /// The data's layout when configured: a reconciled program whose digest of this id has
    /// another layout starts unconfigured.
    ty: DigestType,
}

#[derive(Debug, Default)]
struct Waiting {
    data: Vec<Data>,
    since: Option<Instant>,
}

/// A list sent and not yet acknowledged.
#[derive(Debug)]
struct Unacked {
    data: Vec<Data>,
    sent: Instant,
}

/// What became of the digests offered to [`Digests::offer`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Offered {
    pub accepted: u64,
    /// Of a digest no `DigestEntry` configured (or not in the program).
    pub unconfigured: u64,
    /// The same data as one waiting or sent and not yet acknowledged.
    pub duplicates: u64,
    /// Beyond [`MAX_HELD`].
    pub dropped: u64,
}

/// Every digest's configuration and the digests on their way to the controller.
#[derive(Debug, Default)]
pub struct Digests {
    configs: BTreeMap<u32, Config>,
    waiting: HashMap<u32, Waiting>,
    unacked: HashMap<(u32, u64), Unacked>,
    /// `(digest id, data)` waiting or unacknowledged: not offered again meanwhile.
    held: HashSet<(u32, Data)>,
    /// Digests in unacknowledged lists, per digest id.
    held_unacked: HashMap<u32, usize>,
    next_list: u64,
    /// Unacknowledged lists are looked at for their timeout no more often than this.
    next_expiry: Option<Instant>,
}

/// How often unacknowledged lists are checked for their timeout.
const EXPIRY_CHECK: Duration = Duration::from_millis(10);

fn duration(ns: i64, what: &str) -> Result<Duration, Refused> {
    u64::try_from(ns)
        .map(Duration::from_nanos)
        .map_err(|_| Refused::new(Code::InvalidArgument, format!("{what} is negative ({ns})")))
}

impl Digests {
    /// Apply one `DigestEntry` update. `known` are the program's digest ids.
    pub fn write(
        &mut self,
        known: &HashMap<u32, DigestType>,
        op: Op,
        e: &DigestEntry,
    ) -> Result<(), Refused> {
        if !known.contains_key(&e.digest_id) {
            return Err(Refused::new(
                Code::NotFound,
                format!("the program has no digest with id {:#x}", e.digest_id),
            ));
        }
        let exists = self.configs.contains_key(&e.digest_id);
        match op {
            Op::Insert if exists => {
                return Err(Refused::new(
                    Code::AlreadyExists,
                    format!("digest {:#x} is already configured", e.digest_id),
                ))
            }
            Op::Modify | Op::Delete if !exists => {
                return Err(Refused::new(
                    Code::NotFound,
                    format!("digest {:#x} is not configured", e.digest_id),
                ))
            }
            Op::Delete => {
                self.configs.remove(&e.digest_id);
                self.forget(e.digest_id);
                return Ok(());
            }
            Op::Insert | Op::Modify => {}
        }
        let Some(c) = &e.config else {
            return Err(Refused::new(Code::InvalidArgument, "a digest entry without its config"));
        };
        let max_list_size = usize::try_from(c.max_list_size).map_err(|_| {
            Refused::new(
                Code::InvalidArgument,
                format!("max_list_size is negative ({})", c.max_list_size),
            )
        })?;
        let config = Config {
            max_timeout: duration(c.max_timeout_ns, "max_timeout_ns")?,
            requested_list_size: c.max_list_size,
            max_list_size: if max_list_size == 0 {
                MAX_LIST_SIZE
            } else {
                max_list_size.min(MAX_LIST_SIZE)
            },
            ack_timeout: duration(c.ack_timeout_ns, "ack_timeout_ns")?,
            ty: known[&e.digest_id].clone(),
        };
        self.configs.insert(e.digest_id, config);
        Ok(())
    }

    /// The configured digests `filter` selects (`digest_id` 0: all of them).
    pub fn read(&self, filter: &DigestEntry) -> Vec<DigestEntry> {
        self.configs
            .iter()
            .filter(|(&id, _)| filter.digest_id == 0 || filter.digest_id == id)
            .map(|(&digest_id, c)| DigestEntry {
                digest_id,
                config: Some(digest_entry::Config {
                    max_timeout_ns: c.max_timeout.as_nanos() as i64,
                    max_list_size: c.requested_list_size,
                    ack_timeout_ns: c.ack_timeout.as_nanos() as i64,
                }),
            })
            .collect()
    }

    /// Drop every digest of `id` on its way (its configuration changed or went).
    fn forget(&mut self, id: u32) {
        self.waiting.remove(&id);
        self.unacked.retain(|&(d, _), _| d != id);
        self.held.retain(|&(d, _)| d != id);
        self.held_unacked.remove(&id);
    }

    /// Keep the configuration of the digests `known` still has with the same layout (a
    /// reconciled pipeline), or none (a new one).
    pub fn keep_only(&mut self, known: &HashMap<u32, DigestType>) {
        let gone: Vec<u32> = self
            .configs
            .iter()
            .filter(|(id, c)| known.get(id) != Some(&c.ty))
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            self.configs.remove(&id);
            self.forget(id);
        }
    }

    /// Take digests from the data plane.
    pub fn offer(&mut self, records: &[DigestRecord], now: Instant) -> Offered {
        let mut o = Offered::default();
        // Each configured digest has its share of the bound: one that is never acknowledged
        // cannot starve the others.
        let share = MAX_HELD / self.configs.len().max(1);
        for r in records {
            if !self.configs.contains_key(&r.id) {
                o.unconfigured += 1;
                continue;
            }
            // The data of a list are distinct, and data waiting or unacknowledged is not sent
            // again (without an acknowledgement timeout, only until its list is sent).
            if self.held.contains(&(r.id, r.words)) {
                o.duplicates += 1;
                continue;
            }
            let w = self.waiting.entry(r.id).or_default();
            let unacked = self.held_unacked.get(&r.id).copied().unwrap_or(0);
            if w.data.len() + unacked >= share {
                o.dropped += 1;
                continue;
            }
            self.held.insert((r.id, r.words));
            w.since.get_or_insert(now);
            w.data.push(r.words);
            o.accepted += 1;
        }
        o
    }

    /// The lists due now (full, or waited long enough), and unacknowledged lists that timed
    /// out released. `timestamp_ns` stamps the lists.
    pub fn due(
        &mut self,
        known: &HashMap<u32, DigestType>,
        now: Instant,
        timestamp_ns: i64,
    ) -> Vec<DigestList> {
        // Acknowledgements that did not come in time: the data may be sent again.
        if self.next_expiry.is_none_or(|t| now >= t) {
            self.next_expiry = Some(now + EXPIRY_CHECK);
            let expired: Vec<(u32, u64)> = self
                .unacked
                .iter()
                .filter(|(&(id, _), u)| {
                    let timeout = self.configs.get(&id).map_or(Duration::ZERO, |c| c.ack_timeout);
                    now.duration_since(u.sent) >= timeout
                })
                .map(|(k, _)| *k)
                .collect();
            for (id, list) in expired {
                self.release(id, list);
            }
        }
        let mut lists = Vec::new();
        for (&id, config) in &self.configs {
            let Some(w) = self.waiting.get_mut(&id) else { continue };
            let Some(ty) = known.get(&id) else { continue };
            loop {
                let full = w.data.len() >= config.max_list_size;
                let waited = w.since.is_some_and(|s| now.duration_since(s) >= config.max_timeout);
                if w.data.is_empty() || !(full || waited) {
                    break;
                }
                let n = w.data.len().min(config.max_list_size);
                let data: Vec<Data> = w.data.drain(..n).collect();
                self.next_list += 1;
                let list_id = self.next_list;
                lists.push(DigestList {
                    digest_id: id,
                    list_id,
                    data: data.iter().map(|d| p4data(ty, d)).collect(),
                    timestamp: timestamp_ns,
                });
                if config.ack_timeout.is_zero() {
                    for d in &data {
                        self.held.remove(&(id, *d));
                    }
                } else {
                    *self.held_unacked.entry(id).or_default() += data.len();
                    self.unacked.insert((id, list_id), Unacked { data, sent: now });
                }
            }
            if w.data.is_empty() {
                w.since = None;
            }
        }
        lists
    }

    /// The controller acknowledged list `list_id` of digest `id`: its data may be sent again.
    pub fn ack(&mut self, id: u32, list_id: u64) {
        self.release(id, list_id);
    }

    /// List `list_id` of digest `id` reached no controller: nothing will acknowledge it, so
    /// its data may be sent again.
    pub fn undelivered(&mut self, id: u32, list_id: u64) {
        self.release(id, list_id);
    }

    /// The primary changed: lists the old one did not acknowledge are forgotten, so that the
    /// new one hears of their data (the spec lets the server clear its cache).
    pub fn primary_changed(&mut self) {
        let lists: Vec<(u32, u64)> = self.unacked.keys().copied().collect();
        for (id, list) in lists {
            self.release(id, list);
        }
    }

    fn release(&mut self, id: u32, list_id: u64) {
        if let Some(u) = self.unacked.remove(&(id, list_id)) {
            if let Some(n) = self.held_unacked.get_mut(&id) {
                *n = n.saturating_sub(u.data.len());
            }
            for d in u.data {
                self.held.remove(&(id, d));
            }
        }
    }

    /// Whether digests wait for their time (the pump then looks again soon).
    pub fn is_waiting(&self) -> bool {
        self.waiting.values().any(|w| !w.data.is_empty())
    }
}

/// `width` bits of `data` from bit `at` (the first bit is the most significant of the first
/// word), as a canonical byte string.
fn bits(data: &Data, at: u32, width: u32) -> Vec<u8> {
    let mut out = vec![0u8; width.div_ceil(8).max(1) as usize];
    let pad = out.len() as u32 * 8 - width;
    for i in 0..width {
        let b = at + i;
        let bit = (data[(b / 64) as usize] >> (63 - b % 64)) & 1;
        let o = pad + i;
        out[(o / 8) as usize] |= (bit as u8) << (7 - o % 8);
    }
    let start = out.iter().position(|&b| b != 0).unwrap_or(out.len() - 1);
    out.split_off(start)
}

/// One digest's data as the P4Info describes its type: a struct of its members, or a tuple.
fn p4data(ty: &DigestType, data: &Data) -> P4Data {
    let mut at = 0;
    let members = ty
        .members
        .iter()
        .map(|m| {
            let value = bits(data, at, m.width);
            at += m.width;
            let data = match m.is_bool {
                true => p4_data::Data::Bool(value != [0]),
                false => p4_data::Data::Bitstring(value),
            };
            P4Data { data: Some(data) }
        })
        .collect();
    let members = P4StructLike { members };
    P4Data {
        data: Some(match ty.is_struct {
            true => p4_data::Data::Struct(members),
            false => p4_data::Data::Tuple(members),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotplane_p4::ir::DigestMember;

    const ID: u32 = 0x1700_0001;

    fn known() -> HashMap<u32, DigestType> {
        let m = |name: &str, width| DigestMember { name: name.into(), width, is_bool: false };
        let ty = DigestType {
            name: "learn_t".into(),
            is_struct: true,
            members: vec![m("mac", 48), m("port", 9)],
        };
        HashMap::from([(ID, ty)])
    }

    fn entry(max_timeout_ns: i64, max_list_size: i32, ack_timeout_ns: i64) -> DigestEntry {
        DigestEntry {
            digest_id: ID,
            config: Some(digest_entry::Config { max_timeout_ns, max_list_size, ack_timeout_ns }),
        }
    }

    /// A record of `mac` and `port` packed as the data plane packs them.
    fn record(mac: u64, port: u64) -> DigestRecord {
        let packed = ((mac as u128) << 9 | port as u128) << (128 - 57);
        DigestRecord { id: ID, ts_ns: 0, words: [(packed >> 64) as u64, packed as u64, 0, 0] }
    }

    fn members(d: &P4Data) -> Vec<Vec<u8>> {
        let Some(p4_data::Data::Struct(s)) = &d.data else { panic!("not a struct: {d:?}") };
        s.members
            .iter()
            .map(|m| match &m.data {
                Some(p4_data::Data::Bitstring(b)) => b.clone(),
                other => panic!("not a bit string: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn unconfigured_digests_are_dropped_and_config_is_checked() {
        let (k, now) = (known(), Instant::now());
        let mut d = Digests::default();
        assert_eq!(d.offer(&[record(1, 2)], now).unconfigured, 1);
        assert_eq!(d.write(&k, Op::Modify, &entry(0, 1, 0)).unwrap_err().code, Code::NotFound);
        let bad = DigestEntry { digest_id: 7, ..entry(0, 1, 0) };
        assert_eq!(d.write(&k, Op::Insert, &bad).unwrap_err().code, Code::NotFound);
        let negative = d.write(&k, Op::Insert, &entry(-1, 1, 0)).unwrap_err();
        assert!(negative.message.contains("max_timeout_ns is negative"), "{}", negative.message);
        d.write(&k, Op::Insert, &entry(0, 1, 0)).unwrap();
        let again = d.write(&k, Op::Insert, &entry(0, 1, 0)).unwrap_err();
        assert_eq!(again.code, Code::AlreadyExists);
        assert_eq!(d.read(&DigestEntry::default()), vec![entry(0, 1, 0)]);
        d.write(&k, Op::Delete, &DigestEntry { digest_id: ID, config: None }).unwrap();
        assert!(d.read(&DigestEntry::default()).is_empty());
    }

    #[test]
    fn members_are_unpacked_canonically() {
        let (k, now) = (known(), Instant::now());
        let mut d = Digests::default();
        d.write(&k, Op::Insert, &entry(0, 1, 0)).unwrap();
        d.offer(&[record(0x0000_0a0b_0c0d, 0x1ff), record(0, 0)], now);
        let lists = d.due(&k, now, 5);
        assert_eq!(lists.len(), 2, "one digest per list");
        assert_eq!(members(&lists[0].data[0]), vec![vec![0x0a, 0x0b, 0x0c, 0x0d], vec![1, 0xff]]);
        assert_eq!(members(&lists[1].data[0]), vec![vec![0], vec![0]]);
        assert_eq!((lists[0].list_id + 1, lists[1].timestamp), (lists[1].list_id, 5));
    }

    #[test]
    fn lists_wait_for_their_size_or_timeout() {
        let (k, t0) = (known(), Instant::now());
        let mut d = Digests::default();
        d.write(&k, Op::Insert, &entry(10_000_000, 3, 0)).unwrap();
        d.offer(&[record(1, 1), record(2, 2)], t0);
        assert!(d.due(&k, t0 + Duration::from_millis(5), 0).is_empty(), "neither full nor late");
        d.offer(&[record(3, 3), record(4, 4)], t0 + Duration::from_millis(6));
        let full = d.due(&k, t0 + Duration::from_millis(6), 0);
        assert_eq!(full.iter().map(|l| l.data.len()).collect::<Vec<_>>(), vec![3], "full: sent");
        d.offer(&[record(5, 5)], t0 + Duration::from_millis(7));
        assert!(d.due(&k, t0 + Duration::from_millis(8), 0).is_empty());
        let late = d.due(&k, t0 + Duration::from_millis(17), 0);
        assert_eq!(late.iter().map(|l| l.data.len()).collect::<Vec<_>>(), vec![2], "late: sent");
        assert!(!d.is_waiting());
    }

    #[test]
    fn repeats_wait_for_the_ack_or_its_timeout() {
        let (k, t0) = (known(), Instant::now());
        let mut d = Digests::default();
        d.write(&k, Op::Insert, &entry(0, 10, 1_000_000_000)).unwrap();
        let o = d.offer(&[record(1, 1), record(1, 1), record(2, 2)], t0);
        assert_eq!((o.accepted, o.duplicates), (2, 1));
        let lists = d.due(&k, t0, 0);
        assert_eq!(lists[0].data.len(), 2);
        assert_eq!(d.offer(&[record(1, 1)], t0).duplicates, 1, "sent, not acknowledged");
        d.ack(ID, lists[0].list_id);
        assert_eq!(d.offer(&[record(1, 1)], t0).accepted, 1, "acknowledged: sent again");
        let second = d.due(&k, t0, 0);
        assert_eq!(d.offer(&[record(1, 1)], t0).duplicates, 1);
        d.due(&k, t0 + Duration::from_secs(2), 0);
        assert_eq!(d.offer(&[record(1, 1)], t0).accepted, 1, "ack timed out: sent again");
        assert_eq!(second.len(), 1);
    }

    #[test]
    fn a_list_holds_distinct_data_even_without_an_ack_timeout() {
        let (k, t0) = (known(), Instant::now());
        let mut d = Digests::default();
        d.write(&k, Op::Insert, &entry(1_000_000, 10, 0)).unwrap();
        let o = d.offer(&[record(1, 1), record(1, 1), record(1, 1)], t0);
        assert_eq!((o.accepted, o.duplicates), (1, 2));
        assert_eq!(d.due(&k, t0 + Duration::from_millis(2), 0)[0].data.len(), 1);
        assert_eq!(d.offer(&[record(1, 1)], t0).accepted, 1, "sent: no ack awaited");
    }

    #[test]
    fn undelivered_lists_and_a_new_primary_release_their_data() {
        let (k, t0) = (known(), Instant::now());
        let mut d = Digests::default();
        d.write(&k, Op::Insert, &entry(0, 1, i64::MAX)).unwrap();
        d.offer(&[record(1, 1), record(2, 2)], t0);
        let lists = d.due(&k, t0, 0);
        assert_eq!(d.offer(&[record(1, 1), record(2, 2)], t0).duplicates, 2);
        d.undelivered(ID, lists[0].list_id);
        assert_eq!(d.offer(&[record(1, 1), record(2, 2)], t0).accepted, 1, "the undelivered one");
        d.due(&k, t0, 0);
        d.primary_changed();
        assert_eq!(d.offer(&[record(1, 1), record(2, 2)], t0).accepted, 2, "the cache is cleared");
    }

    #[test]
    fn a_reconciled_digest_keeps_its_config_only_with_the_same_layout() {
        let k = known();
        let mut d = Digests::default();
        d.write(&k, Op::Insert, &entry(0, 1, 0)).unwrap();
        d.keep_only(&k);
        assert_eq!(d.read(&DigestEntry::default()).len(), 1);
        let mut other = k.clone();
        other.get_mut(&ID).unwrap().members[1].width = 16;
        d.keep_only(&other);
        assert!(d.read(&DigestEntry::default()).is_empty());
    }

    #[test]
    fn held_digests_are_bounded() {
        let (k, t0) = (known(), Instant::now());
        let mut d = Digests::default();
        d.write(&k, Op::Insert, &entry(i64::MAX, 0, i64::MAX)).unwrap();
        let records: Vec<_> = (0..MAX_HELD as u64 + 10).map(|i| record(i, 0)).collect();
        let o = d.offer(&records, t0);
        assert_eq!((o.accepted, o.dropped), (MAX_HELD as u64, 10));
        d.keep_only(&HashMap::new());
        assert!(!d.is_waiting() && d.read(&DigestEntry::default()).is_empty());
    }
}
