//! Action profiles and selectors over P4Runtime: `ActionProfileMember` and
//! `ActionProfileGroup` insert, modify, delete and read, with the spec's status codes. Table
//! entries name them through `TableAction.action_profile_member_id` / `_group_id`
//! (`crate::entities`).

use crate::entities::{direct_action, entry_error, Op, Refused};
use crate::proto::google::rpc::Code;
use crate::proto::p4::v1::{action_profile_group, ActionProfileGroup, ActionProfileMember};
use crate::schema::{Profile, Schema};
use hotplane_p4::exec::{Group, Member, Pipeline, ProfileError, ProfileRef, ProfileRt};
use std::sync::Arc;

/// The status code a profile's refusal maps to.
pub(crate) fn code_of(e: &ProfileError) -> Code {
    match e {
        ProfileError::NoMember { .. } | ProfileError::NoGroup { .. } => Code::NotFound,
        ProfileError::MemberExists { .. } | ProfileError::GroupExists { .. } => Code::AlreadyExists,
        ProfileError::Full { .. }
        | ProfileError::GroupTooBig { .. }
        | ProfileError::TooManyGroups { .. } => Code::ResourceExhausted,
        ProfileError::TooManyMemberships { .. } => Code::ResourceExhausted,
        ProfileError::MemberInGroup { .. } | ProfileError::InUse { .. } => Code::FailedPrecondition,
        ProfileError::DefaultOnly { .. } => Code::PermissionDenied,
        ProfileError::ZeroWeight { .. }
        | ProfileError::ListedTwice { .. }
        | ProfileError::MaxSizeChanged { .. }
        | ProfileError::NoSelector { .. }
        | ProfileError::Action { .. } => Code::InvalidArgument,
    }
}

fn refused(e: ProfileError) -> Refused {
    Refused::new(code_of(&e), e.to_string())
}

/// The profile with P4Info id `id`, as the schema and the running pipeline know it.
fn profile<'s>(
    schema: &'s Schema,
    p: &Pipeline,
    id: u32,
) -> Result<(&'s Profile, Arc<ProfileRt>), Refused> {
    let info = schema.profiles.get(&id).ok_or_else(|| {
        Refused::new(Code::NotFound, format!("no action profile with id {id:#x}"))
    })?;
    let rt = p.objects.profile(&info.name).map_err(|_| {
        Refused::new(
            Code::Internal,
            format!("action profile {} is not in the running program", info.name),
        )
    })?;
    Ok((info, Arc::clone(rt)))
}

/// Insert, modify or delete one member.
pub fn write_member(
    schema: &Schema,
    p: &Pipeline,
    op: Op,
    m: &ActionProfileMember,
) -> Result<(), Refused> {
    let (info, rt) = profile(schema, p, m.action_profile_id)?;
    if m.member_id == 0 {
        return Err(Refused::invalid("member id 0 is reserved (it reads as a wildcard)"));
    }
    if op == Op::Delete {
        return p
            .objects
            .delete_from_profile(&rt, ProfileRef::Member(m.member_id))
            .map_err(entry_error);
    }
    let Some(action) = &m.action else {
        return Err(Refused::invalid("the member has no action"));
    };
    let (action, args) = direct_action(schema, &info.name, &info.actions, action)?;
    rt.write_member(m.member_id, Member { action, args }, op == Op::Modify).map_err(refused)
}

/// Insert, modify or delete one group (selectors only).
pub fn write_group(
    schema: &Schema,
    p: &Pipeline,
    op: Op,
    g: &ActionProfileGroup,
) -> Result<(), Refused> {
    let (info, rt) = profile(schema, p, g.action_profile_id)?;
    if !info.with_selector {
        return Err(refused(ProfileError::NoSelector { profile: info.name.clone() }));
    }
    if g.group_id == 0 {
        return Err(Refused::invalid("group id 0 is reserved (it reads as a wildcard)"));
    }
    if op == Op::Delete {
        return p
            .objects
            .delete_from_profile(&rt, ProfileRef::Group(g.group_id))
            .map_err(entry_error);
    }
    if g.max_size < 0 || g.max_size as usize > rt.max_group_size {
        return Err(Refused::invalid(format!(
            "max_size {} of group {}: the selector's groups hold at most {} members",
            g.max_size, g.group_id, rt.max_group_size
        )));
    }
    let mut members = Vec::with_capacity(g.members.len().min(rt.max_group_size));
    for m in &g.members {
        if m.watch_kind.is_some() {
            return Err(Refused::new(
                Code::Unimplemented,
                "watch ports (fast failover) of group members are not supported",
            ));
        }
        if m.weight <= 0 {
            return Err(Refused::invalid(format!(
                "member {} of group {} has weight {} (weights are positive)",
                m.member_id, g.group_id, m.weight
            )));
        }
        members.push((m.member_id, m.weight as u32));
    }
    let group = Group { members, max_size: g.max_size as u32 };
    rt.write_group(g.group_id, group, op == Op::Modify).map_err(refused)
}

/// The profiles a read names: one, or every one for id 0.
fn profiles_of(schema: &Schema, id: u32) -> Vec<u32> {
    match id {
        0 => {
            let mut ids: Vec<u32> = schema.profiles.keys().copied().collect();
            ids.sort_unstable();
            ids
        }
        id => vec![id],
    }
}

/// The members a read filter selects (profile id 0: every profile's; member id 0: all).
pub fn read_members(
    schema: &Schema,
    p: &Pipeline,
    filter: &ActionProfileMember,
) -> Result<Vec<ActionProfileMember>, Refused> {
    let mut out = Vec::new();
    for id in profiles_of(schema, filter.action_profile_id) {
        let (info, rt) = profile(schema, p, id)?;
        for (member_id, m) in rt.members() {
            if filter.member_id != 0 && filter.member_id != member_id {
                continue;
            }
            let action = crate::entities::action_message(schema, &info.actions, &m.action, &m.args);
            out.push(ActionProfileMember { action_profile_id: id, member_id, action });
        }
    }
    Ok(out)
}

/// The groups a read filter selects (profile id 0: every selector's; group id 0: all).
pub fn read_groups(
    schema: &Schema,
    p: &Pipeline,
    filter: &ActionProfileGroup,
) -> Result<Vec<ActionProfileGroup>, Refused> {
    let mut out = Vec::new();
    for id in profiles_of(schema, filter.action_profile_id) {
        let (info, rt) = profile(schema, p, id)?;
        if !info.with_selector {
            continue;
        }
        for (group_id, group) in rt.groups() {
            if filter.group_id != 0 && filter.group_id != group_id {
                continue;
            }
            let members = group
                .members
                .into_iter()
                .map(|(member_id, weight)| action_profile_group::Member {
                    member_id,
                    weight: weight as i32,
                    watch_kind: None,
                })
                .collect();
            out.push(ActionProfileGroup {
                action_profile_id: id,
                group_id,
                members,
                max_size: group.max_size as i32,
            });
        }
    }
    Ok(out)
}
