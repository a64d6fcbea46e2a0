//! An action profile or action selector at run time.
//!
//! A member is one action of the tables the profile implements, with its arguments; a group
//! (selectors only) is a list of members, each listed as many times as its weight. An entry of
//! such a table names a member or a group instead of an action ([`ProfileRef`]). The control
//! plane writes members and groups; workers resolve an entry's reference through one
//! QSBR-protected slot and never wait. A group picks its member by the selector's hash of the
//! packet's `selector` keys, modulo the group's total weight (as BMv2 does with weight 1), so
//! that a flow stays on one member while the group is unchanged.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use super::entry_error::EntryError;
use super::table::{encode_args, find_action, ActionParams};
use crate::ir::HashAlgo;
use hotplane_core::slot::Retired;
use hotplane_core::{Guard, Qsbr, Slot};

/// The most group memberships (a member listed in a group) one profile holds over all its
/// groups, whatever its size: what each write republishes stays bounded.
pub const MAX_GROUP_MEMBERSHIPS: usize = 1 << 20;

/// The pseudo-action an entry naming a member is stored with (its one argument is the id).
/// `$` cannot start a P4 identifier, so it never clashes with a program's action.
pub const MEMBER_ACTION: &str = "$member";
/// The pseudo-action an entry naming a group is stored with.
pub const GROUP_ACTION: &str = "$group";

/// What an entry of a table with an action profile names instead of an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfileRef {
    Member(u32),
    Group(u32),
}

impl ProfileRef {
    /// The reference an entry's action and arguments hold, if they are one.
    pub fn of(action: &str, args: &[u128]) -> Option<ProfileRef> {
        let id = match args {
            [id] => u32::try_from(*id).ok()?,
            _ => return None,
        };
        match action {
            MEMBER_ACTION => Some(ProfileRef::Member(id)),
            GROUP_ACTION => Some(ProfileRef::Group(id)),
            _ => None,
        }
    }

    /// The action and arguments an entry holding this reference is written with.
    pub fn as_action(self) -> (String, Vec<u128>) {
        match self {
            ProfileRef::Member(id) => (MEMBER_ACTION.to_string(), vec![id as u128]),
            ProfileRef::Group(id) => (GROUP_ACTION.to_string(), vec![id as u128]),
        }
    }
}

/// A refused member or group write. The profile is unchanged after any of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("action profile {profile} has no member {id}")]
    NoMember { profile: String, id: u32 },
    #[error("action profile {profile} has no group {id}")]
    NoGroup { profile: String, id: u32 },
    #[error("action profile {profile} already has a member {id}")]
    MemberExists { profile: String, id: u32 },
    #[error("action profile {profile} already has a group {id}")]
    GroupExists { profile: String, id: u32 },
    #[error("action profile {profile} is full ({size} members)")]
    Full { profile: String, size: usize },
    #[error("action profile {profile}: a group holds at most {max} members (weights counted), {given} given")]
    GroupTooBig { profile: String, max: usize, given: usize },
    #[error("action profile {profile} has at most {max} groups")]
    TooManyGroups { profile: String, max: usize },
    #[error("action profile {profile}: member {id} has weight 0")]
    ZeroWeight { profile: String, id: u32 },
    #[error("action profile {profile}: member {id} is listed twice in the group")]
    ListedTwice { profile: String, id: u32 },
    #[error("action profile {profile}: group {id}'s max_size cannot change (it is {was})")]
    MaxSizeChanged { profile: String, id: u32, was: u32 },
    #[error("action profile {profile}: its groups list at most {max} members in all")]
    TooManyMemberships { profile: String, max: usize },
    #[error("action profile {profile}: action {action} is @defaultonly, not for members")]
    DefaultOnly { profile: String, action: String },
    #[error("action profile {profile}: member {member} is in group {group}")]
    MemberInGroup { profile: String, member: u32, group: u32 },
    #[error("action profile {profile}: {what} {id} is used by an entry of table {table}")]
    InUse { profile: String, what: &'static str, id: u32, table: String },
    #[error("{profile} is an action profile without a selector: it has no groups")]
    NoSelector { profile: String },
    #[error("action profile {profile}: {source}")]
    Action { profile: String, source: Box<EntryError> },
}

/// A member as workers use it: the table action id and its data words.
struct Resolved {
    action: u32,
    words: Box<[u64]>,
}

/// A group as workers read it: its members with their cumulative weights (the first
/// member's weight, then that plus the second's, ...), and the total.
struct PublishedGroup {
    total: u64,
    members: Box<[(u64, Arc<Resolved>)]>,
}

/// What workers read: every member and every group.
#[derive(Default)]
pub(crate) struct Published {
    members: HashMap<u32, Arc<Resolved>>,
    groups: HashMap<u32, PublishedGroup>,
}

/// One member as the control plane wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The table action's name.
    pub action: String,
    pub args: Vec<u128>,
}

/// A group as written: member ids with their weights, and the most members (weights
/// counted) the controller said it may grow to (0: the selector's limit).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Group {
    pub members: Vec<(u32, u32)>,
    pub max_size: u32,
}

/// The members and groups as written (control plane only).
#[derive(Default)]
struct Written {
    members: BTreeMap<u32, (Member, Arc<Resolved>)>,
    groups: BTreeMap<u32, Group>,
}

pub struct ProfileRt {
    pub name: String,
    pub size: usize,
    /// The selector's hash algorithm; `None` for a plain profile.
    pub selector: Option<HashAlgo>,
    pub max_group_size: usize,
    /// The actions of the tables it implements (all the same), as members name them.
    pub actions: ActionParams,
    published: Slot<Published>,
    written: Mutex<Written>,
    refs: Mutex<()>,
}

impl ProfileRt {
    pub fn new(
        qsbr: &Qsbr,
        name: &str,
        size: u32,
        selector: Option<HashAlgo>,
        max_group_size: u32,
        actions: ActionParams,
    ) -> Self {
        ProfileRt {
            name: name.to_string(),
            size: size as usize,
            selector,
            max_group_size: max_group_size as usize,
            actions,
            published: Slot::new(qsbr, Published::default()),
            written: Mutex::new(Written::default()),
            refs: Mutex::new(()),
        }
    }

    /// The table action and data words a reference resolves to, copied into `words`; `hash`
    /// picks a group's member. `None` for an empty group or an id that does not exist.
    #[inline]
    pub fn resolve(
        &self,
        r: ProfileRef,
        hash: u64,
        guard: &Guard<'_>,
        words: &mut [u64],
    ) -> Option<u32> {
        let p = &self.published.load(guard).value;
        let m = match r {
            ProfileRef::Member(id) => p.members.get(&id)?,
            ProfileRef::Group(id) => {
                let g = p.groups.get(&id)?;
                // The slot `hash % total` falls in: the first member whose cumulative weight
                // is above it (weights as if each member were listed that many times).
                let at = hash % g.total.max(1);
                let i = g.members.partition_point(|(upto, _)| *upto <= at);
                &g.members.get(i)?.1
            }
        };
        let n = m.words.len().min(words.len());
        words[..n].copy_from_slice(&m.words[..n]);
        words[n..].fill(0);
        Some(m.action)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Written> {
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publish what `w` holds, unlock, then wait for the grace period that frees the old
    /// state: writers and `exists` do not wait for readers.
    fn commit(&self, w: std::sync::MutexGuard<'_, Written>) {
        let retired = self.publish(&w);
        drop(w);
        drop(retired);
    }

    /// The most members (weights counted) a group of `max_size` holds: the selector's
    /// `@max_group_size`, or less when the group asked for less (0: no limit of its own).
    fn group_limit(&self, max_size: u32) -> usize {
        match max_size as usize {
            0 => self.max_group_size,
            n => n.min(self.max_group_size),
        }
    }

    /// Add member `id` (`modify`: replace it; groups holding it follow).
    pub fn write_member(&self, id: u32, m: Member, modify: bool) -> Result<(), ProfileError> {
        let action_err =
            |source| ProfileError::Action { profile: self.name.clone(), source: Box::new(source) };
        let a = find_action(&self.name, &self.actions.names, &m.action).map_err(action_err)?;
        if self.actions.default_only.get(a) == Some(&true) {
            return Err(ProfileError::DefaultOnly {
                profile: self.name.clone(),
                action: self.actions.names[a].clone(),
            });
        }
        let words = encode_args(&self.actions.names, &self.actions.params, a, &m.args)
            .map_err(action_err)?;
        let resolved = Arc::new(Resolved { action: a as u32, words: words.into() });
        let mut w = self.lock();
        match (w.members.contains_key(&id), modify) {
            (true, false) => {
                return Err(ProfileError::MemberExists { profile: self.name.clone(), id })
            }
            (false, true) => return Err(ProfileError::NoMember { profile: self.name.clone(), id }),
            (false, false) if w.members.len() >= self.size => {
                return Err(ProfileError::Full { profile: self.name.clone(), size: self.size })
            }
            _ => {}
        }
        let m = Member { action: self.actions.names[a].clone(), args: m.args };
        w.members.insert(id, (m, resolved));
        self.commit(w);
        Ok(())
    }

    /// Remove member `id`; refused while a group holds it. (Entries that name it are the
    /// pipeline's to check: see `Objects::delete_from_profile`.)
    pub fn delete_member(&self, id: u32) -> Result<(), ProfileError> {
        let mut w = self.lock();
        if !w.members.contains_key(&id) {
            return Err(ProfileError::NoMember { profile: self.name.clone(), id });
        }
        let holds = |g: &Group| g.members.iter().any(|m| m.0 == id);
        if let Some((&group, _)) = w.groups.iter().find(|(_, g)| holds(g)) {
            return Err(ProfileError::MemberInGroup {
                profile: self.name.clone(),
                member: id,
                group,
            });
        }
        w.members.remove(&id);
        self.commit(w);
        Ok(())
    }

    /// Add group `id` (`modify`: replace it).
    pub fn write_group(&self, id: u32, group: Group, modify: bool) -> Result<(), ProfileError> {
        if self.selector.is_none() {
            return Err(ProfileError::NoSelector { profile: self.name.clone() });
        }
        let mut w = self.lock();
        if let Some(old) = w.groups.get(&id).filter(|_| modify) {
            if old.max_size != group.max_size {
                return Err(ProfileError::MaxSizeChanged {
                    profile: self.name.clone(),
                    id,
                    was: old.max_size,
                });
            }
        }
        match (w.groups.contains_key(&id), modify) {
            (true, false) => {
                return Err(ProfileError::GroupExists { profile: self.name.clone(), id })
            }
            (false, true) => return Err(ProfileError::NoGroup { profile: self.name.clone(), id }),
            (false, false) if w.groups.len() >= self.size => {
                return Err(ProfileError::TooManyGroups {
                    profile: self.name.clone(),
                    max: self.size,
                })
            }
            _ => {}
        }
        let mut total = 0usize;
        let mut seen = std::collections::HashSet::with_capacity(group.members.len());
        for &(m, weight) in &group.members {
            if !w.members.contains_key(&m) {
                return Err(ProfileError::NoMember { profile: self.name.clone(), id: m });
            }
            if !seen.insert(m) {
                return Err(ProfileError::ListedTwice { profile: self.name.clone(), id: m });
            }
            if weight == 0 {
                return Err(ProfileError::ZeroWeight { profile: self.name.clone(), id: m });
            }
            total = total.saturating_add(weight as usize);
        }
        let max = self.group_limit(group.max_size);
        if total > max {
            return Err(ProfileError::GroupTooBig {
                profile: self.name.clone(),
                max,
                given: total,
            });
        }
        let others: usize =
            w.groups.iter().filter(|(&g, _)| g != id).map(|(_, g)| g.members.len()).sum();
        if others + group.members.len() > MAX_GROUP_MEMBERSHIPS {
            return Err(ProfileError::TooManyMemberships {
                profile: self.name.clone(),
                max: MAX_GROUP_MEMBERSHIPS,
            });
        }
        w.groups.insert(id, group);
        self.commit(w);
        Ok(())
    }

    /// Remove group `id`. (Entries that name it are the pipeline's to check.)
    pub fn delete_group(&self, id: u32) -> Result<(), ProfileError> {
        let mut w = self.lock();
        if w.groups.remove(&id).is_none() {
            return Err(ProfileError::NoGroup { profile: self.name.clone(), id });
        }
        self.commit(w);
        Ok(())
    }

    /// The member or group a reference names exists; else the error that says which not.
    pub fn exists(&self, r: ProfileRef) -> Result<(), ProfileError> {
        let w = self.lock();
        let profile = || self.name.clone();
        match r {
            ProfileRef::Member(id) if !w.members.contains_key(&id) => {
                Err(ProfileError::NoMember { profile: profile(), id })
            }
            ProfileRef::Group(id) if !w.groups.contains_key(&id) => {
                Err(ProfileError::NoGroup { profile: profile(), id })
            }
            _ => Ok(()),
        }
    }

    /// Every member, by id.
    pub fn members(&self) -> Vec<(u32, Member)> {
        self.lock().members.iter().map(|(&id, (m, _))| (id, m.clone())).collect()
    }

    /// Every group, by id.
    pub fn groups(&self) -> Vec<(u32, Group)> {
        self.lock().groups.iter().map(|(&id, g)| (id, g.clone())).collect()
    }

    /// Publish what `w` holds for workers: members shared, not copied; a group's members in
    /// the order written with their cumulative weights. O(members + group memberships). The
    /// returned old state is freed after a grace period (dropping it waits for one; a
    /// timeout leaves it to a later one).
    fn publish(&self, w: &Written) -> Retired<Published> {
        let members: HashMap<u32, Arc<Resolved>> =
            w.members.iter().map(|(&id, (_, r))| (id, Arc::clone(r))).collect();
        let groups = w
            .groups
            .iter()
            .map(|(&id, g)| {
                let mut total = 0u64;
                let list: Vec<(u64, Arc<Resolved>)> = g
                    .members
                    .iter()
                    .filter_map(|&(m, weight)| {
                        let r = Arc::clone(members.get(&m)?);
                        total += weight as u64;
                        Some((total, r))
                    })
                    .collect();
                (id, PublishedGroup { total, members: list.into_boxed_slice() })
            })
            .collect();
        self.published.publish(Published { members, groups }).1
    }

    /// Take over `old`'s members and groups, published at once, if they fit this profile's
    /// limits (a reload that changed its size or group size but not its actions).
    fn copy_from(&self, old: &ProfileRt) -> bool {
        if old.actions != self.actions {
            return false;
        }
        let from = old.lock();
        let fits = from.members.len() <= self.size
            && from.groups.len() <= self.size
            && from.groups.values().all(|g| {
                let total: u64 = g.members.iter().map(|m| m.1 as u64).sum();
                total <= self.group_limit(g.max_size) as u64
            });
        if !fits || (self.selector.is_none() && !from.groups.is_empty()) {
            return false;
        }
        let mut w = self.lock();
        w.members = from.members.clone();
        w.groups = from.groups.clone();
        drop(from);
        self.commit(w);
        true
    }

    /// The lock that orders writes naming members and groups (table entries) against their
    /// deletion: held across the check that a reference exists and the write that stores
    /// it, and across the scan for references and the delete.
    pub(crate) fn references(&self) -> std::sync::MutexGuard<'_, ()> {
        self.refs.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The profile a reloaded program gets for one it declares (`fresh` makes it), given the
/// running program's profile of the same name: the very same profile when nothing about it
/// changed, a new one holding its members and groups when only its limits changed and they
/// fit, else the fresh one. The second value is the old profile whose members it holds.
pub(crate) fn carry_profile(
    fresh: impl Fn() -> ProfileRt,
    before: Option<Arc<ProfileRt>>,
) -> (Arc<ProfileRt>, Option<Arc<ProfileRt>>) {
    let new = fresh();
    let Some(before) = before else { return (Arc::new(new), None) };
    fn limits(p: &ProfileRt) -> (usize, Option<HashAlgo>, usize, &ActionParams) {
        (p.size, p.selector, p.max_group_size, &p.actions)
    }
    if limits(&before) == limits(&new) {
        return (Arc::clone(&before), Some(before));
    }
    if new.copy_from(&before) {
        return (Arc::new(new), Some(before));
    }
    (Arc::new(fresh()), None)
}
