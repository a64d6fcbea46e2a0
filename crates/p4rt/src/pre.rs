//! The packet replication engine as P4Runtime sees it: multicast groups and clone sessions, kept
//! as they were written (so a read returns each replica's port in the form the client used,
//! `egress_port` or `port`), and the data plane's [`Replication`] made from them.

use crate::bytes;
use crate::entities::Refused;
use crate::proto::google::rpc::Code;
use crate::proto::p4::v1::{
    entity, packet_replication_engine_entry::Type as PreType, replica::PortKind, update,
    CloneSessionEntry, MulticastGroupEntry, PacketReplicationEngineEntry, Replica,
};
use hotplane_p4::v1model::Replication;
use std::collections::{BTreeMap, BTreeSet};

/// Multicast groups (and clone sessions) the engine holds at most.
pub const MAX_GROUPS: usize = 4096;

/// Replicas one multicast group may have.
pub const MAX_REPLICAS: usize = 1024;

/// Replicas of all groups and sessions together.
pub const MAX_TOTAL_REPLICAS: usize = 65_536;

/// Bytes of a multicast group's `metadata` (opaque to the switch, kept and echoed).
pub const MAX_METADATA: usize = 1024;

/// v1model's ports are 9 bits wide.
const PORT_BITS: u32 = 9;

/// The replication engine's entries, as written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pre {
    groups: BTreeMap<u32, MulticastGroupEntry>,
    clones: BTreeMap<u32, CloneSessionEntry>,
    /// Replicas of all groups and sessions (kept, not summed per write).
    replicas: usize,
}

/// A replica's port number, whichever form it came in (the deprecated `egress_port` is what
/// older clients and the tutorials send).
#[allow(deprecated)]
fn port_of(r: &Replica) -> Result<u32, Refused> {
    let port = match &r.port_kind {
        Some(PortKind::EgressPort(p)) => *p,
        Some(PortKind::Port(b)) => bytes::value(b, PORT_BITS)
            .map_err(|e| Refused::new(Code::InvalidArgument, format!("replica port: {e}")))?
            as u32,
        None => return Err(Refused::new(Code::InvalidArgument, "a replica without a port")),
    };
    if port >> PORT_BITS != 0 {
        return Err(Refused::new(
            Code::InvalidArgument,
            format!("replica port {port} does not fit v1model's {PORT_BITS}-bit ports"),
        ));
    }
    Ok(port)
}

/// The replicas' (instance, port) pairs, checked.
fn replicas(list: &[Replica]) -> Result<Vec<(u32, u32)>, Refused> {
    if list.len() > MAX_REPLICAS {
        return Err(Refused::new(
            Code::ResourceExhausted,
            format!("{} replicas; at most {MAX_REPLICAS}", list.len()),
        ));
    }
    let mut seen = BTreeSet::new();
    list.iter()
        .map(|r| {
            if !r.backup_replicas.is_empty() {
                return Err(Refused::new(Code::Unimplemented, "backup replicas are not supported"));
            }
            let pair = (r.instance, port_of(r)?);
            if !seen.insert(pair) {
                return Err(Refused::new(
                    Code::InvalidArgument,
                    format!("replica (port {}, instance {}) is given twice", pair.1, pair.0),
                ));
            }
            Ok(pair)
        })
        .collect()
}

/// Insert, modify or delete `id` in `map` as `op` says, the entry checked by `check` first.
fn apply<E: Clone>(
    map: &mut BTreeMap<u32, E>,
    op: update::Type,
    id: u32,
    entry: &E,
    what: &str,
) -> Result<(), Refused> {
    if id == 0 {
        return Err(Refused::new(Code::InvalidArgument, format!("{what} 0 is not a valid id")));
    }
    match (op, map.contains_key(&id)) {
        (update::Type::Insert, true) => {
            Err(Refused::new(Code::AlreadyExists, format!("{what} {id} already exists")))
        }
        (update::Type::Insert, false) if map.len() >= MAX_GROUPS => Err(Refused::new(
            Code::ResourceExhausted,
            format!("{MAX_GROUPS} {what}s exist already"),
        )),
        (update::Type::Modify | update::Type::Delete, false) => {
            Err(Refused::new(Code::NotFound, format!("{what} {id} does not exist")))
        }
        (update::Type::Delete, true) => {
            map.remove(&id);
            Ok(())
        }
        (update::Type::Insert | update::Type::Modify, _) => {
            map.insert(id, entry.clone());
            Ok(())
        }
        (update::Type::Unspecified, _) => {
            Err(Refused::new(Code::InvalidArgument, "the update's type is unspecified"))
        }
    }
}

impl Pre {
    /// Refused when `adding` replicas in place of `replacing` would exceed the total.
    fn room_for(&self, adding: usize, replacing: usize) -> Result<(), Refused> {
        if self.replicas - replacing + adding > MAX_TOTAL_REPLICAS {
            return Err(Refused::new(
                Code::ResourceExhausted,
                format!("the replication engine holds at most {MAX_TOTAL_REPLICAS} replicas"),
            ));
        }
        Ok(())
    }

    /// A read filter reduced to what it selects (kind and id), so that filters differing only
    /// in fields a read ignores count once.
    pub fn selector(filter: &PacketReplicationEngineEntry) -> (u8, u32) {
        match &filter.r#type {
            None => (0, 0),
            Some(PreType::MulticastGroupEntry(g)) => (1, g.multicast_group_id),
            Some(PreType::CloneSessionEntry(c)) => (2, c.session_id),
        }
    }

    /// Apply one update. Deletes look only at the id.
    pub fn write(
        &mut self,
        op: update::Type,
        e: &PacketReplicationEngineEntry,
    ) -> Result<(), Refused> {
        match &e.r#type {
            None => Err(Refused::new(Code::InvalidArgument, "an empty replication entry")),
            Some(PreType::MulticastGroupEntry(g)) => {
                if op != update::Type::Delete {
                    replicas(&g.replicas)?;
                    if g.metadata.len() > MAX_METADATA {
                        return Err(Refused::new(
                            Code::InvalidArgument,
                            format!(
                                "{} bytes of metadata; at most {MAX_METADATA}",
                                g.metadata.len()
                            ),
                        ));
                    }
                    let now =
                        self.groups.get(&g.multicast_group_id).map_or(0, |o| o.replicas.len());
                    self.room_for(g.replicas.len(), now)?;
                }
                let before = self.groups.get(&g.multicast_group_id).map_or(0, |o| o.replicas.len());
                apply(&mut self.groups, op, g.multicast_group_id, g, "multicast group")?;
                let after = self.groups.get(&g.multicast_group_id).map_or(0, |o| o.replicas.len());
                self.replicas = self.replicas - before + after;
                Ok(())
            }
            Some(PreType::CloneSessionEntry(c)) => {
                if op != update::Type::Delete {
                    if replicas(&c.replicas)?.len() != 1 {
                        return Err(Refused::new(
                            Code::Unimplemented,
                            "v1model clone sessions send to one port: give exactly one replica",
                        ));
                    }
                    let now = self.clones.get(&c.session_id).map_or(0, |o| o.replicas.len());
                    self.room_for(c.replicas.len(), now)?;
                    if c.packet_length_bytes != 0 {
                        return Err(Refused::new(
                            Code::Unimplemented,
                            "truncating clone sessions (packet_length_bytes) are not supported",
                        ));
                    }
                }
                let before = self.clones.get(&c.session_id).map_or(0, |o| o.replicas.len());
                apply(&mut self.clones, op, c.session_id, c, "clone session")?;
                let after = self.clones.get(&c.session_id).map_or(0, |o| o.replicas.len());
                self.replicas = self.replicas - before + after;
                Ok(())
            }
        }
    }

    /// The entries a read of `filter` selects: one kind (all of it with id 0, or one id), or
    /// both kinds when the filter names none.
    pub fn read(&self, filter: &PacketReplicationEngineEntry) -> Vec<entity::Entity> {
        let pre = |t| {
            entity::Entity::PacketReplicationEngineEntry(PacketReplicationEngineEntry {
                r#type: Some(t),
            })
        };
        let groups = |id: u32| {
            self.groups
                .iter()
                .filter(move |(k, _)| id == 0 || **k == id)
                .map(move |(_, g)| pre(PreType::MulticastGroupEntry(g.clone())))
        };
        let clones = |id: u32| {
            self.clones
                .iter()
                .filter(move |(k, _)| id == 0 || **k == id)
                .map(move |(_, c)| pre(PreType::CloneSessionEntry(c.clone())))
        };
        match &filter.r#type {
            Some(PreType::MulticastGroupEntry(g)) => groups(g.multicast_group_id).collect(),
            Some(PreType::CloneSessionEntry(c)) => clones(c.session_id).collect(),
            None => groups(0).chain(clones(0)).collect(),
        }
    }

    /// The data plane's configuration: clone session -> port, group -> (instance, port)s.
    pub fn replication(&self) -> Replication {
        // Entries were checked when written.
        let pairs = |r: &[Replica]| replicas(r).unwrap_or_default();
        Replication {
            mirror: self
                .clones
                .iter()
                .filter_map(|(id, c)| Some((*id, pairs(&c.replicas).first()?.1)))
                .collect(),
            groups: self.groups.iter().map(|(id, g)| (*id, pairs(&g.replicas))).collect(),
        }
    }
}

/// A multicast group entry of `(port, instance)` replicas in the `port` (bytes) form.
pub fn group(id: u32, ports: &[(u32, u32)]) -> MulticastGroupEntry {
    MulticastGroupEntry {
        multicast_group_id: id,
        replicas: ports
            .iter()
            .map(|&(port, instance)| Replica {
                port_kind: Some(PortKind::Port(bytes::canonical(port as u128))),
                instance,
                backup_replicas: Vec::new(),
            })
            .collect(),
        metadata: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mc(g: MulticastGroupEntry) -> PacketReplicationEngineEntry {
        PacketReplicationEngineEntry { r#type: Some(PreType::MulticastGroupEntry(g)) }
    }

    #[test]
    #[allow(deprecated)]
    fn groups_are_read_back_as_written_and_make_the_replication() {
        let mut pre = Pre::default();
        let mut old_form = group(7, &[(3, 1)]);
        old_form.replicas[0].port_kind = Some(PortKind::EgressPort(3));
        pre.write(update::Type::Insert, &mc(group(1, &[(1, 1), (2, 1)]))).unwrap();
        pre.write(update::Type::Insert, &mc(old_form.clone())).unwrap();
        let r = pre.replication();
        assert_eq!(r.groups[&1], vec![(1, 1), (1, 2)]);
        assert_eq!(r.groups[&7], vec![(1, 3)]);
        let read =
            pre.read(&mc(MulticastGroupEntry { multicast_group_id: 7, ..Default::default() }));
        assert_eq!(read, vec![entity::Entity::PacketReplicationEngineEntry(mc(old_form))]);
        assert_eq!(pre.read(&PacketReplicationEngineEntry::default()).len(), 2);
        let code = |r: Result<(), Refused>| r.unwrap_err().code;
        assert_eq!(code(pre.write(update::Type::Insert, &mc(group(1, &[])))), Code::AlreadyExists);
        assert_eq!(code(pre.write(update::Type::Modify, &mc(group(2, &[])))), Code::NotFound);
        assert_eq!(
            code(pre.write(update::Type::Insert, &mc(group(0, &[])))),
            Code::InvalidArgument
        );
        let twice = group(3, &[(1, 1), (1, 1)]);
        assert_eq!(code(pre.write(update::Type::Insert, &mc(twice))), Code::InvalidArgument);
        let wide = group(3, &[(512, 1)]);
        assert_eq!(code(pre.write(update::Type::Insert, &mc(wide))), Code::InvalidArgument);
        pre.write(update::Type::Delete, &mc(group(1, &[]))).unwrap();
        assert_eq!(pre.replication().groups.len(), 1);
    }

    #[test]
    fn clone_sessions_take_one_replica() {
        let mut pre = Pre::default();
        let session = |replicas: Vec<Replica>| PacketReplicationEngineEntry {
            r#type: Some(PreType::CloneSessionEntry(CloneSessionEntry {
                session_id: 5,
                replicas,
                ..Default::default()
            })),
        };
        let one = group(0, &[(4, 0)]).replicas;
        let two = group(0, &[(4, 0), (5, 0)]).replicas;
        assert_eq!(
            pre.write(update::Type::Insert, &session(two)).unwrap_err().code,
            Code::Unimplemented
        );
        pre.write(update::Type::Insert, &session(one)).unwrap();
        assert_eq!(pre.replication().mirror[&5], 4);
    }
}
