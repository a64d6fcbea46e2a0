//! Action profiles and selectors over P4Runtime, against tests/p4/action_profiles.p4 without a
//! server: members and groups written, named by entries, steering packets on both engines,
//! read back as written, and refused with the spec's codes.

use std::sync::Arc;

use hotplane_core::Qsbr;
use hotplane_p4::exec::{Engine, Objects, Pipeline};
use hotplane_p4::v1model::{Output, Replication, V1Switch};
use hotplane_p4rt::entities::{read_entity, write_update};
use hotplane_p4rt::proto::google::rpc::Code;
use hotplane_p4rt::proto::p4::v1::{
    self as v1, action_profile_group, entity, field_match, table_action, update,
    ActionProfileGroup, ActionProfileMember, Entity, FieldMatch, TableAction, TableEntry, Update,
};
use hotplane_p4rt::schema::{p4info_of, Schema};

const PROGRAM: &str = include_str!("../../../tests/p4/action_profiles.p4");

fn setup(engine: Engine) -> (Schema, Arc<Pipeline>, Qsbr) {
    let ir =
        hotplane_p4::compile_source_with("action_profiles.p4", PROGRAM, &[], &Default::default())
            .unwrap();
    let schema = Schema::new(p4info_of(&ir).unwrap(), &ir).unwrap();
    let qsbr = Qsbr::new();
    let objects = Objects::new(&ir, &qsbr).unwrap();
    let p = Pipeline::with_engine(ir, objects, engine).unwrap();
    (schema, Arc::new(p), qsbr)
}

fn profile_id(schema: &Schema, name: &str) -> u32 {
    let found = schema.profiles.iter().find(|(_, p)| p.name == name).map(|(id, _)| *id);
    found.unwrap_or_else(|| panic!("no profile {name}: {:?}", schema.profiles))
}

fn id(schema: &Schema, name: &str) -> u32 {
    let t = schema.tables.iter().find(|(_, t)| t.name == name).map(|(id, _)| *id);
    let a = schema.actions.iter().find(|(_, a)| a.name == name).map(|(id, _)| *id);
    t.or(a).unwrap_or_else(|| panic!("no {name}"))
}

fn update(kind: update::Type, e: entity::Entity) -> Update {
    Update { r#type: kind as i32, entity: Some(Entity { entity: Some(e) }) }
}

fn write(schema: &Schema, p: &Pipeline, kind: update::Type, e: entity::Entity) -> Result<(), Code> {
    write_update(schema, p, &update(kind, e)).map_err(|r| r.code)
}

/// Member `member` of `profile` running `set(v, port)`.
fn member(schema: &Schema, profile: u32, member: u32, v: u8, port: u16) -> entity::Entity {
    entity::Entity::ActionProfileMember(ActionProfileMember {
        action_profile_id: profile,
        member_id: member,
        action: Some(v1::Action {
            action_id: id(schema, "I.set"),
            params: vec![
                v1::action::Param { param_id: 1, value: vec![v] },
                v1::action::Param { param_id: 2, value: canonical(port) },
            ],
        }),
    })
}

/// The shortest bytes of `v`, as reads return values.
fn canonical(v: u16) -> Vec<u8> {
    let b = v.to_be_bytes();
    if b[0] == 0 {
        vec![b[1]]
    } else {
        b.to_vec()
    }
}

fn group(profile: u32, group: u32, members: &[(u32, i32)]) -> entity::Entity {
    entity::Entity::ActionProfileGroup(ActionProfileGroup {
        action_profile_id: profile,
        group_id: group,
        members: members
            .iter()
            .map(|&(member_id, weight)| action_profile_group::Member {
                member_id,
                weight,
                watch_kind: None,
            })
            .collect(),
        max_size: 0,
    })
}

/// An entry of `table` for `key` naming `action`.
fn entry(schema: &Schema, table: &str, key: u8, action: table_action::Type) -> entity::Entity {
    entity::Entity::TableEntry(TableEntry {
        table_id: id(schema, table),
        r#match: vec![FieldMatch {
            field_id: 1,
            field_match_type: Some(field_match::FieldMatchType::Exact(field_match::Exact {
                value: vec![key],
            })),
        }],
        action: Some(TableAction { r#type: Some(action) }),
        ..Default::default()
    })
}

/// Run `[key, flow, 0]` through the switch: the port and the `out` byte, or `None` if dropped.
fn run(p: &Arc<Pipeline>, qsbr: &Qsbr, key: u8, flow: u8) -> Option<(u32, u8)> {
    let mut sw = V1Switch::new(Arc::clone(p));
    let mut reader = qsbr.register("test");
    let mut out: Vec<Output> = Vec::new();
    sw.process(&[key, flow, 0], 0, &Replication::default(), &reader.guard(), 0, &mut out);
    reader.quiescent();
    out.first().map(|o| (o.port, o.data[2]))
}

#[test]
fn the_p4info_describes_profiles_and_the_tables_they_implement() {
    let (schema, _, _) = setup(Engine::Closures);
    let info = &schema.p4info;
    let by_name = |n: &str| {
        info.action_profiles
            .iter()
            .find(|a| a.preamble.as_ref().is_some_and(|p| p.name == n))
            .unwrap_or_else(|| panic!("{n} in {:?}", info.action_profiles))
    };
    let (prof, sel) = (by_name("I.prof"), by_name("I.sel"));
    assert_eq!(prof.preamble.as_ref().unwrap().id >> 24, 0x11, "P4Info's prefix for profiles");
    assert!(!prof.with_selector && sel.with_selector);
    assert_eq!((prof.size, sel.size, sel.max_group_size), (4, 16, 8));
    assert_eq!(prof.table_ids, vec![id(&schema, "I.by_member")]);
    assert_eq!(sel.table_ids, vec![id(&schema, "I.by_group")]);
    let table = |n: &str| {
        info.tables.iter().find(|t| t.preamble.as_ref().unwrap().name == n).unwrap().clone()
    };
    assert_eq!(table("I.by_member").implementation_id, prof.preamble.as_ref().unwrap().id);
    // The selector key is not a match field.
    assert_eq!(table("I.by_group").match_fields.len(), 1);
}

#[test]
fn members_and_groups_steer_packets_on_both_engines() {
    use update::Type::{Delete, Insert, Modify};
    for engine in [Engine::Closures, Engine::Native] {
        if engine == Engine::Native && !Engine::NATIVE_BUILT {
            continue;
        }
        let (schema, p, qsbr) = setup(engine);
        let (prof, sel) = (profile_id(&schema, "I.prof"), profile_id(&schema, "I.sel"));
        let w = |kind, e| write(&schema, &p, kind, e);
        w(Insert, member(&schema, prof, 1, 0xa0, 1)).unwrap();
        w(Insert, entry(&schema, "I.by_member", 7, table_action::Type::ActionProfileMemberId(1)))
            .unwrap();
        assert_eq!(run(&p, &qsbr, 7, 0), Some((1, 0xa0)), "{engine:?}");
        w(Modify, member(&schema, prof, 1, 0xb0, 3)).unwrap();
        assert_eq!(run(&p, &qsbr, 7, 0), Some((3, 0xb0)), "{engine:?}: the entry follows");

        // A group over three members, the second twice: four slots, chosen by flow % 4.
        for (m, v, port) in [(10, 0xc0, 4), (11, 0xc2, 5), (12, 0xc4, 6)] {
            w(Insert, member(&schema, sel, m, v, port)).unwrap();
        }
        w(Insert, group(sel, 100, &[(10, 1), (11, 2), (12, 1)])).unwrap();
        w(
            Insert,
            entry(&schema, "I.by_group", 0x20, table_action::Type::ActionProfileGroupId(100)),
        )
        .unwrap();
        let ports: Vec<u32> =
            (0..8).map(|f| run(&p, &qsbr, 0x20, f).expect("forwarded").0).collect();
        assert_eq!(ports, vec![4, 5, 5, 6, 4, 5, 5, 6], "{engine:?}: weights repeat members");
        // The apply hits: `out | 1`.
        assert_eq!(run(&p, &qsbr, 0x20, 3), Some((6, 0xc5)), "{engine:?}");

        // Reads return what was written.
        let read = |e: entity::Entity| read_entity(&schema, &p, &Entity { entity: Some(e) });
        let members = read(entity::Entity::ActionProfileMember(ActionProfileMember {
            action_profile_id: sel,
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(members.len(), 3);
        assert_eq!(members[0], member(&schema, sel, 10, 0xc0, 4));
        let groups =
            read(entity::Entity::ActionProfileGroup(ActionProfileGroup::default())).unwrap();
        assert_eq!(groups, vec![group(sel, 100, &[(10, 1), (11, 2), (12, 1)])]);
        let entries = read(entity::Entity::TableEntry(TableEntry {
            table_id: id(&schema, "I.by_group"),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(
            entries,
            vec![entry(&schema, "I.by_group", 0x20, table_action::Type::ActionProfileGroupId(100))]
        );

        // A group shrinks: flow 3 moves.
        w(Modify, group(sel, 100, &[(10, 1), (12, 1)])).unwrap();
        assert_eq!(run(&p, &qsbr, 0x20, 3), Some((6, 0xc5)), "{engine:?}");
        assert_eq!(run(&p, &qsbr, 0x20, 2), Some((4, 0xc1)), "{engine:?}");

        // Deletes in order: the entry, then the group, then its members.
        assert_eq!(w(Delete, group(sel, 100, &[])), Err(Code::FailedPrecondition));
        assert_eq!(w(Delete, member(&schema, sel, 10, 0, 0)), Err(Code::FailedPrecondition));
        w(
            Delete,
            entry(&schema, "I.by_group", 0x20, table_action::Type::ActionProfileGroupId(100)),
        )
        .unwrap();
        w(Delete, group(sel, 100, &[])).unwrap();
        w(Delete, member(&schema, sel, 10, 0, 0)).unwrap();
        assert_eq!(run(&p, &qsbr, 0x20, 0), Some((0, 0)), "{engine:?}: a miss, NoAction");
    }
}

#[test]
fn bad_members_groups_and_entries_are_refused_with_the_spec_codes() {
    use update::Type::{Delete, Insert, Modify};
    let (schema, p, _) = setup(Engine::Closures);
    let (prof, sel) = (profile_id(&schema, "I.prof"), profile_id(&schema, "I.sel"));
    let w = |kind, e| write(&schema, &p, kind, e);
    w(Insert, member(&schema, prof, 1, 1, 1)).unwrap();
    assert_eq!(w(Insert, member(&schema, prof, 1, 1, 1)), Err(Code::AlreadyExists));
    assert_eq!(w(Modify, member(&schema, prof, 2, 1, 1)), Err(Code::NotFound));
    assert_eq!(w(Delete, member(&schema, prof, 2, 0, 0)), Err(Code::NotFound));
    assert_eq!(w(Insert, member(&schema, 0x1100_0000, 1, 1, 1)), Err(Code::NotFound));
    // A parameter too wide for bit<9>.
    assert_eq!(w(Insert, member(&schema, prof, 3, 1, 0x200)), Err(Code::InvalidArgument));
    // The profile holds four members.
    for m in 2..=4 {
        w(Insert, member(&schema, prof, m, 1, 1)).unwrap();
    }
    assert_eq!(w(Insert, member(&schema, prof, 5, 1, 1)), Err(Code::ResourceExhausted));
    // Groups only in selectors; positive weights; members that exist, each listed once; at
    // most @max_group_size (8) members, weights counted.
    assert_eq!(w(Insert, group(prof, 1, &[(1, 1)])), Err(Code::InvalidArgument));
    w(Insert, member(&schema, sel, 1, 1, 1)).unwrap();
    assert_eq!(w(Insert, group(sel, 1, &[(1, 0)])), Err(Code::InvalidArgument));
    assert_eq!(w(Insert, group(sel, 1, &[(9, 1)])), Err(Code::NotFound));
    assert_eq!(w(Insert, group(sel, 1, &[(1, 1), (1, 1)])), Err(Code::InvalidArgument));
    assert_eq!(w(Insert, group(sel, 1, &[(1, 9)])), Err(Code::ResourceExhausted));
    w(Insert, group(sel, 1, &[(1, 8)])).unwrap();
    // A group's max_size is fixed once it exists.
    let mut resized = group(sel, 1, &[(1, 1)]);
    if let entity::Entity::ActionProfileGroup(g) = &mut resized {
        g.max_size = 4;
    }
    assert_eq!(w(Modify, resized), Err(Code::InvalidArgument));
    // Id 0 reads as a wildcard: never a member's or a group's.
    assert_eq!(w(Insert, member(&schema, sel, 0, 1, 1)), Err(Code::InvalidArgument));
    assert_eq!(w(Insert, group(sel, 0, &[(1, 1)])), Err(Code::InvalidArgument));
    // NoAction is the tables' @defaultonly action: no member may run it.
    let no_action = entity::Entity::ActionProfileMember(ActionProfileMember {
        action_profile_id: sel,
        member_id: 2,
        action: Some(v1::Action { action_id: id(&schema, "NoAction"), params: vec![] }),
    });
    assert_eq!(w(Insert, no_action), Err(Code::PermissionDenied));
    // Entries: a member or group that exists, never a direct action; no one-shot sets yet.
    let by_member = |a| entry(&schema, "I.by_member", 1, a);
    assert_eq!(
        w(Insert, by_member(table_action::Type::ActionProfileMemberId(9))),
        Err(Code::NotFound)
    );
    // A plain profile has no groups.
    assert_eq!(
        w(Insert, by_member(table_action::Type::ActionProfileGroupId(1))),
        Err(Code::InvalidArgument)
    );
    let by_group = entry(&schema, "I.by_group", 1, table_action::Type::ActionProfileGroupId(9));
    assert_eq!(w(Insert, by_group), Err(Code::NotFound));
    let direct =
        table_action::Type::Action(v1::Action { action_id: id(&schema, "I.drop"), params: vec![] });
    assert_eq!(w(Insert, by_member(direct)), Err(Code::InvalidArgument));
    let one_shot = table_action::Type::ActionProfileActionSet(Default::default());
    assert_eq!(w(Insert, by_member(one_shot)), Err(Code::Unimplemented));
    w(Insert, by_member(table_action::Type::ActionProfileMemberId(1))).unwrap();
    assert_eq!(w(Delete, member(&schema, prof, 1, 0, 0)), Err(Code::FailedPrecondition));
    // Nothing refused left anything behind.
    let read = |e| read_entity(&schema, &p, &Entity { entity: Some(e) }).unwrap();
    let all_members = read(entity::Entity::ActionProfileMember(Default::default()));
    assert_eq!(all_members.len(), 5);
    let all_groups = read(entity::Entity::ActionProfileGroup(Default::default()));
    assert_eq!(all_groups, vec![group(sel, 1, &[(1, 8)])]);
}

/// A reload keeps a profile's members and groups, and the entries naming them, when its
/// actions stay: the very same profile when nothing about it changed, a copy when only its
/// limits did (and they fit); a profile whose actions changed starts empty, with its tables.
#[test]
fn reloads_carry_members_groups_and_their_entries() {
    use update::Type::Insert;
    let (schema, p, qsbr) = setup(Engine::Closures);
    let (prof, sel) = (profile_id(&schema, "I.prof"), profile_id(&schema, "I.sel"));
    let w = |kind, e| write(&schema, &p, kind, e);
    w(Insert, member(&schema, prof, 1, 0xa0, 1)).unwrap();
    w(Insert, entry(&schema, "I.by_member", 7, table_action::Type::ActionProfileMemberId(1)))
        .unwrap();
    for (m, v, port) in [(10, 0xc0, 4), (11, 0xc2, 5)] {
        w(Insert, member(&schema, sel, m, v, port)).unwrap();
    }
    w(Insert, group(sel, 100, &[(10, 1), (11, 1)])).unwrap();
    w(Insert, entry(&schema, "I.by_group", 0x20, table_action::Type::ActionProfileGroupId(100)))
        .unwrap();
    let reload = |text: &str| {
        let ir = hotplane_p4::compile_source_with("r.p4", text, &[], &Default::default()).unwrap();
        let (objects, report) = Objects::carry_over(&ir, Some(&p), &qsbr).unwrap();
        let p2 = Arc::new(Pipeline::with_engine(ir, objects, Engine::Closures).unwrap());
        (p2, report)
    };
    // The selector grows: a copy of its members and groups; the profile is untouched.
    let grown = PROGRAM.replace("32w16, 32w8", "32w32, 32w8");
    assert_ne!(grown, PROGRAM);
    let (p2, report) = reload(&grown);
    assert!(report.instances.contains(&"I.sel".to_string()), "{report:?}");
    assert!(report.instances.contains(&"I.prof".to_string()), "{report:?}");
    assert!(Arc::ptr_eq(
        p2.objects.profile("I.prof").unwrap(),
        p.objects.profile("I.prof").unwrap()
    ));
    assert!(!Arc::ptr_eq(
        p2.objects.profile("I.sel").unwrap(),
        p.objects.profile("I.sel").unwrap()
    ));
    assert_eq!(run(&p2, &qsbr, 7, 0), Some((1, 0xa0)));
    assert_eq!(run(&p2, &qsbr, 0x20, 1), Some((5, 0xc3)));
    assert_eq!(p2.objects.profile("I.sel").unwrap().groups().len(), 1);
    // The selector shrinks below its one group's members' weight: it starts empty, and so
    // does its table (its entries would name nothing).
    let shrunk = PROGRAM.replace("@max_group_size(8)", "@max_group_size(1)");
    let (p3, report) = reload(&shrunk);
    assert!(!report.instances.contains(&"I.sel".to_string()), "{report:?}");
    assert!(p3.objects.profile("I.sel").unwrap().members().is_empty());
    assert_eq!(run(&p3, &qsbr, 0x20, 1), Some((0, 0)), "a miss");
    assert_eq!(run(&p3, &qsbr, 7, 0), Some((1, 0xa0)), "the other profile carried");
}

/// A keyless table with a selector runs its default, set to a group over P4Runtime; the
/// group cannot be deleted while the default names it.
#[test]
fn a_default_entry_names_a_group() {
    use update::Type::{Delete, Insert, Modify};
    let (schema, p, qsbr) = setup(Engine::Closures);
    let ksel = profile_id(&schema, "I.ksel");
    let w = |kind, e| write(&schema, &p, kind, e);
    w(Insert, member(&schema, ksel, 1, 0xd0, 8)).unwrap();
    w(Insert, member(&schema, ksel, 2, 0xd2, 9)).unwrap();
    w(Insert, group(ksel, 7, &[(1, 1), (2, 1)])).unwrap();
    let default = entity::Entity::TableEntry(TableEntry {
        table_id: id(&schema, "I.keyless"),
        action: Some(TableAction { r#type: Some(table_action::Type::ActionProfileGroupId(7)) }),
        is_default_action: true,
        ..Default::default()
    });
    w(Modify, default.clone()).unwrap();
    assert_eq!(run(&p, &qsbr, 0x30, 0), Some((8, 0xd0)));
    assert_eq!(run(&p, &qsbr, 0x30, 1), Some((9, 0xd2)));
    assert_eq!(w(Delete, group(ksel, 7, &[])), Err(Code::FailedPrecondition));
    let read = read_entity(&schema, &p, &Entity { entity: Some(default.clone()) }).unwrap();
    assert_eq!(read, vec![default]);
}
