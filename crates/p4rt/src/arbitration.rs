//! Client arbitration: which of the open streams of a role is the primary that may write.
//!
//! The primary of a role is the live stream with the highest election id, as BMv2 has it (the
//! spec's "highest ever seen" would keep a departed primary's id blocking its backups). By
//! default hotplane is as lenient as BMv2, because the field's test code depends on it: a
//! stream without an election id counts as id 0 and can be primary, and while no stream is
//! open, writes without an election id are accepted. `strict` follows the spec instead: an
//! unset election id never makes a primary, and writes always need the primary's id.
//!
//! Notifications never wait: a stream whose client does not read its messages misses them
//! (and is counted), it never holds the arbiter.

use crate::proto::google::rpc;
use crate::proto::p4::v1::{
    stream_message_response, MasterArbitrationUpdate, Role, StreamMessageResponse, Uint128,
};
use std::collections::{BTreeMap, BTreeSet};
use tokio::sync::mpsc;
use tonic::{Code, Status};

/// Where a stream's messages go.
pub type StreamTx = mpsc::Sender<Result<StreamMessageResponse, Status>>;

/// An election id as one number.
pub fn election(e: &Option<Uint128>) -> Option<u128> {
    e.map(|e| (e.high as u128) << 64 | e.low as u128)
}

fn uint128(v: u128) -> Uint128 {
    Uint128 { high: (v >> 64) as u64, low: v as u64 }
}

struct Member {
    role: String,
    election: Option<u128>,
    tx: StreamTx,
}

/// The streams of one device and who among them is primary.
pub struct Arbiter {
    device_id: u64,
    max_streams: usize,
    strict: bool,
    members: BTreeMap<u64, Member>,
    /// Notifications a full stream missed.
    pub missed: u64,
}

impl Arbiter {
    pub fn new(device_id: u64, max_streams: usize, strict: bool) -> Self {
        Arbiter { device_id, max_streams, strict, members: BTreeMap::new(), missed: 0 }
    }

    /// The election id a stream competes with.
    fn effective(&self, e: Option<u128>) -> Option<u128> {
        if self.strict {
            e
        } else {
            Some(e.unwrap_or(0))
        }
    }

    /// The primary of `role`: its stream and election id.
    fn primary(&self, role: &str) -> Option<(u64, u128)> {
        self.members
            .iter()
            .filter(|(_, m)| m.role == role)
            .filter_map(|(id, m)| Some((*id, self.effective(m.election)?)))
            .max_by_key(|&(_, e)| e)
    }

    /// Whether stream `id` is the primary of its role.
    pub fn is_primary(&self, id: u64) -> bool {
        self.members.get(&id).is_some_and(|m| self.primary(&m.role).map(|p| p.0) == Some(id))
    }

    /// The streams of each role's primary, by id (to notice a new primary without holding
    /// its stream open, as a kept sender would).
    pub fn primary_ids(&self) -> Vec<u64> {
        let roles: BTreeSet<&str> = self.members.values().map(|m| m.role.as_str()).collect();
        roles.into_iter().filter_map(|r| self.primary(r)).map(|(id, _)| id).collect()
    }

    /// Where each role's primary hears its messages (packet-ins go to every primary).
    pub fn primaries(&self) -> Vec<StreamTx> {
        let roles: BTreeSet<&str> = self.members.values().map(|m| m.role.as_str()).collect();
        roles
            .into_iter()
            .filter_map(|r| self.primary(r))
            .filter_map(|(id, _)| self.members.get(&id).map(|m| m.tx.clone()))
            .collect()
    }

    /// Stream `id` asks to join (or, already a member, to change its election id) with
    /// `role` and `election`. Everyone of the role hears the outcome.
    pub fn arbitrate(
        &mut self,
        id: u64,
        role: &str,
        election: Option<u128>,
        tx: &StreamTx,
    ) -> Result<(), Status> {
        if let Some(m) = self.members.get(&id) {
            if m.role != role {
                return Err(Status::failed_precondition(
                    "a stream cannot change its role; open a new stream",
                ));
            }
        } else if self.members.len() >= self.max_streams {
            return Err(Status::resource_exhausted(format!(
                "Too many connections (at most {})",
                self.max_streams
            )));
        }
        let mine = self.effective(election);
        let taken = self.members.iter().any(|(other, m)| {
            *other != id && m.role == role && mine.is_some() && self.effective(m.election) == mine
        });
        if taken {
            return Err(Status::invalid_argument("Election id already exists"));
        }
        let member = Member { role: role.to_string(), election, tx: tx.clone() };
        self.members.insert(id, member);
        self.notify(role);
        Ok(())
    }

    /// Stream `id` ended; its role hears who is primary now.
    pub fn leave(&mut self, id: u64) {
        if let Some(m) = self.members.remove(&id) {
            self.notify(&m.role);
        }
    }

    /// Tell every stream of `role` whether it is primary.
    fn notify(&mut self, role: &str) {
        let primary = self.primary(role);
        let mut missed = 0;
        for (id, m) in self.members.iter().filter(|(_, m)| m.role == role) {
            let (code, message) = match primary {
                Some((p, _)) if p == *id => (Code::Ok, "Is primary"),
                Some(_) => (Code::AlreadyExists, "Is backup"),
                None => (Code::NotFound, "No primary"),
            };
            let update = MasterArbitrationUpdate {
                device_id: self.device_id,
                role: (!role.is_empty())
                    .then(|| Role { name: role.to_string(), ..Default::default() }),
                election_id: primary.map(|(_, e)| uint128(e)),
                status: Some(rpc::Status {
                    code: code as i32,
                    message: message.into(),
                    details: vec![],
                }),
            };
            let msg = StreamMessageResponse {
                update: Some(stream_message_response::Update::Arbitration(update)),
            };
            if m.tx.try_send(Ok(msg)).is_err() {
                missed += 1;
            }
        }
        self.missed += missed;
    }

    /// May a request of `role` carrying `election` change the pipeline or its state?
    pub fn check_write(&self, role: &str, election: Option<u128>) -> Result<(), Status> {
        if self.members.is_empty() && !self.strict && election.is_none() {
            // BMv2: with no stream open at all, a write without an election id is accepted
            // (what grpc_cli and p4c's PTF base class do). Only with none at all: naming a
            // role nobody holds must not get around the primary of another.
            return Ok(());
        }
        match self.primary(role) {
            Some((_, p)) if self.effective(election) == Some(p) => Ok(()),
            Some(_) => Err(Status::permission_denied("Not primary")),
            None => Err(Status::permission_denied(
                "Not primary: no stream has won arbitration for this role",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream() -> (StreamTx, mpsc::Receiver<Result<StreamMessageResponse, Status>>) {
        mpsc::channel(8)
    }

    fn status(
        rx: &mut mpsc::Receiver<Result<StreamMessageResponse, Status>>,
    ) -> (i32, Option<u128>) {
        let msg = rx.try_recv().expect("a notification").expect("not an error");
        match msg.update {
            Some(stream_message_response::Update::Arbitration(a)) => {
                (a.status.unwrap().code, election(&a.election_id))
            }
            other => panic!("not arbitration: {other:?}"),
        }
    }

    #[test]
    fn the_highest_live_election_id_is_primary_and_backups_are_told() {
        let mut a = Arbiter::new(1, 4, false);
        let (t1, mut r1) = stream();
        let (t2, mut r2) = stream();
        a.arbitrate(1, "", Some(5), &t1).unwrap();
        assert_eq!(status(&mut r1), (Code::Ok as i32, Some(5)));
        a.arbitrate(2, "", Some(7), &t2).unwrap();
        assert_eq!(status(&mut r1), (Code::AlreadyExists as i32, Some(7)));
        assert_eq!(status(&mut r2), (Code::Ok as i32, Some(7)));
        assert!(a.check_write("", Some(7)).is_ok());
        assert_eq!(a.check_write("", Some(5)).unwrap_err().code(), Code::PermissionDenied);
        a.leave(2);
        assert_eq!(status(&mut r1), (Code::Ok as i32, Some(5)));
        assert!(a.check_write("", Some(5)).is_ok());
    }

    #[test]
    fn duplicates_too_many_streams_and_role_changes_are_refused() {
        let mut a = Arbiter::new(1, 2, false);
        let (t, _r) = stream();
        a.arbitrate(1, "", Some(1), &t).unwrap();
        let dup = a.arbitrate(2, "", Some(1), &t).unwrap_err();
        assert_eq!(dup.code(), Code::InvalidArgument);
        assert!(dup.message().contains("Election id already exists"));
        a.arbitrate(2, "other", Some(1), &t).unwrap();
        assert_eq!(a.arbitrate(3, "", Some(9), &t).unwrap_err().code(), Code::ResourceExhausted);
        assert_eq!(
            a.arbitrate(1, "other", Some(4), &t).unwrap_err().code(),
            Code::FailedPrecondition
        );
    }

    #[test]
    fn lenient_and_strict_modes_treat_a_missing_election_id_differently() {
        let (t, mut r) = stream();
        let mut lenient = Arbiter::new(0, 4, false);
        assert!(lenient.check_write("", None).is_ok(), "no stream: BMv2 accepts");
        assert_eq!(lenient.check_write("", Some(3)).unwrap_err().code(), Code::PermissionDenied);
        lenient.arbitrate(1, "", None, &t).unwrap();
        assert_eq!(status(&mut r), (Code::Ok as i32, Some(0)));
        assert!(lenient.check_write("", None).is_ok());
        // With a stream open (of any role), another role is no way around its primary.
        assert_eq!(lenient.check_write("x", None).unwrap_err().code(), Code::PermissionDenied);
        let mut strict = Arbiter::new(0, 4, true);
        assert!(strict.check_write("", None).is_err());
        strict.arbitrate(1, "", None, &t).unwrap();
        assert_eq!(status(&mut r), (Code::NotFound as i32, None));
        assert!(strict.check_write("", None).is_err());
    }

    #[test]
    fn a_stream_that_does_not_read_never_blocks_the_arbiter() {
        let mut a = Arbiter::new(1, 4, false);
        let (slow, _kept) = mpsc::channel(1);
        a.arbitrate(1, "", Some(1), &slow).unwrap();
        let (t, _r) = stream();
        for e in 2..10 {
            a.arbitrate(2, "", Some(e), &t).unwrap();
        }
        assert!(a.missed > 0);
    }
}
