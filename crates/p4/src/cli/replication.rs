//! The replication engine: multicast groups built from BMv2's nodes, and mirroring sessions.
//!
//! Every check comes before any change: a refused line leaves the node bookkeeping and the
//! replication engine as they were. Ports are v1model's 9-bit ports and replication ids 16
//! bits, as P4Runtime's server has them; group and session 0 mean "none" in v1model.

use serde_json::{json, Value};

use super::{CliError, CliState, Line, Outcome, MAX_GROUPS, MAX_GROUP_COPIES, MAX_NODES};
use super::{MAX_NODE_PORTS, MAX_TOTAL_COPIES};
use crate::v1model::Replication;

/// Highest port number (v1model's `egress_port` is 9 bits).
const MAX_PORT: u32 = 511;

#[derive(Debug, Clone)]
pub(super) struct Node {
    rid: u32,
    ports: Vec<u32>,
    /// Groups it is associated with.
    groups: Vec<u32>,
}

fn refuse<T>(m: String) -> Result<T, CliError> {
    Err(CliError::Replication(m))
}

/// An outcome that publishes `next`; `grows` when the change adds copies or sessions (then
/// the limits are checked; removing is always allowed).
fn publish(
    text: String,
    result: Value,
    next: Replication,
    grows: bool,
) -> Result<Outcome, CliError> {
    if grows {
        within_limits(&next)?;
    }
    let mut o = Outcome::text(text, result);
    o.replication = Some(next);
    Ok(o)
}

/// A group or session id: 1 and up.
fn id(cx: &Line<'_>, i: usize, what: &str) -> Result<u32, CliError> {
    match cx.number(cx.word(i, what)?, what)? {
        0 => Err(cx.syntax(format!("{what} 0 means none in v1model; use 1 and up"))),
        n => Ok(n),
    }
}

fn port(cx: &Line<'_>, word: &str) -> Result<u32, CliError> {
    match cx.number(word, "a port")? {
        p if p <= MAX_PORT => Ok(p),
        p => Err(cx.syntax(format!("port {p}: v1model's ports are 0 to {MAX_PORT}"))),
    }
}

pub(super) fn mirroring(
    cx: &Line<'_>,
    command: &str,
    now: &Replication,
) -> Result<Outcome, CliError> {
    let session = id(cx, 0, "the session id")?;
    let mut next = now.clone();
    match command {
        "mirroring_add" => {
            cx.exactly(2)?;
            let port = port(cx, cx.args[1])?;
            next.mirror.insert(session, port);
            publish(format!("session {session} mirrors to port {port}"), json!({}), next, true)
        }
        "mirroring_delete" => {
            cx.exactly(1)?;
            if next.mirror.remove(&session).is_none() {
                return refuse(format!("no mirroring session {session}"));
            }
            publish(format!("session {session} deleted"), json!({}), next, false)
        }
        _ => {
            cx.exactly(1)?;
            match now.mirror.get(&session) {
                Some(port) => Ok(Outcome::text(
                    format!("session {session}: egress port {port}"),
                    json!({"session": session, "port": port}),
                )),
                None => refuse(format!("no mirroring session {session}")),
            }
        }
    }
}

pub(super) fn multicast(
    cx: &Line<'_>,
    command: &str,
    state: &mut CliState,
    now: &Replication,
) -> Result<Outcome, CliError> {
    let mut next = now.clone();
    let ports = |words: &[&str]| -> Result<Vec<u32>, CliError> {
        if words.is_empty() || words.len() > MAX_NODE_PORTS {
            return Err(cx.syntax(format!("give 1 to {MAX_NODE_PORTS} ports")));
        }
        words.iter().map(|w| port(cx, w)).collect()
    };
    let node_handle = |i: usize| cx.number(cx.word(i, "a node handle")?, "the node handle");
    match command {
        "mc_mgrp_create" => {
            cx.exactly(1)?;
            let g = id(cx, 0, "the group id")?;
            if next.groups.contains_key(&g) {
                return refuse(format!("multicast group {g} exists"));
            }
            next.groups.insert(g, Vec::new());
            publish(format!("group {g} created"), json!({"group": g}), next, true)
        }
        "mc_mgrp_destroy" => {
            cx.exactly(1)?;
            let g = id(cx, 0, "the group id")?;
            if next.groups.remove(&g).is_none() {
                return refuse(format!("no multicast group {g}"));
            }
            for n in state.nodes.values_mut() {
                n.groups.retain(|x| *x != g);
            }
            publish(format!("group {g} destroyed"), json!({}), next, false)
        }
        "mc_node_create" => {
            let rid = cx.number(cx.word(0, "a replication id")?, "the rid")?;
            if rid > 0xffff {
                return Err(cx.syntax(format!("rid {rid}: replication ids are 16 bits")));
            }
            let ports = ports(&cx.args[1..])?;
            if state.nodes.len() >= MAX_NODES {
                return refuse(format!("at most {MAX_NODES} multicast nodes"));
            }
            let Some(after) = state.next_node.checked_add(1) else {
                return refuse("no node handles left (destroy and recreate the program)".into());
            };
            let h = state.next_node;
            state.next_node = after;
            state.nodes.insert(h, Node { rid, ports, groups: Vec::new() });
            Ok(Outcome::text(format!("node was created with handle {h}"), json!({"handle": h})))
        }
        "mc_node_update" => {
            let h = node_handle(0)?;
            let ports = ports(&cx.args[1..])?;
            let Some(node) = state.nodes.get(&h) else {
                return refuse(format!("no multicast node {h}"));
            };
            for g in &node.groups {
                if let Some(copies) = next.groups.get_mut(g) {
                    remove_copies(copies, node);
                    copies.extend(ports.iter().map(|&p| (node.rid, p)));
                }
            }
            let o = publish(format!("node {h} updated"), json!({}), next, true)?;
            if let Some(node) = state.nodes.get_mut(&h) {
                node.ports = ports;
            }
            Ok(o)
        }
        "mc_node_destroy" => {
            cx.exactly(1)?;
            let h = node_handle(0)?;
            let Some(node) = state.nodes.get(&h) else {
                return refuse(format!("no multicast node {h}"));
            };
            for g in &node.groups {
                if let Some(copies) = next.groups.get_mut(g) {
                    remove_copies(copies, node);
                }
            }
            let o = publish(format!("node {h} destroyed"), json!({}), next, false)?;
            state.nodes.remove(&h);
            Ok(o)
        }
        "mc_node_associate" | "mc_node_dissociate" => {
            cx.exactly(2)?;
            let g = id(cx, 0, "the group id")?;
            let h = node_handle(1)?;
            let Some(node) = state.nodes.get(&h) else {
                return refuse(format!("no multicast node {h}"));
            };
            let Some(copies) = next.groups.get_mut(&g) else {
                return refuse(format!("no multicast group {g} (mc_mgrp_create {g})"));
            };
            let member = node.groups.contains(&g);
            let associate = command == "mc_node_associate";
            let o = match (associate, member) {
                (true, true) => return refuse(format!("node {h} is already in group {g}")),
                (false, false) => return refuse(format!("node {h} is not in group {g}")),
                (true, false) => {
                    copies.extend(node.ports.iter().map(|&p| (node.rid, p)));
                    publish(format!("node {h} associated with group {g}"), json!({}), next, true)?
                }
                (false, true) => {
                    remove_copies(copies, node);
                    publish(format!("node {h} dissociated from group {g}"), json!({}), next, false)?
                }
            };
            if let Some(node) = state.nodes.get_mut(&h) {
                match associate {
                    true => node.groups.push(g),
                    false => node.groups.retain(|x| *x != g),
                }
            }
            Ok(o)
        }
        _ => {
            cx.exactly(0)?;
            Ok(dump(state, now))
        }
    }
}

/// `mc_dump`: the groups with their copies, the nodes, and the mirroring sessions.
fn dump(state: &CliState, now: &Replication) -> Outcome {
    let mut text = String::from("==========\nMC ENTRIES");
    for (g, copies) in &now.groups {
        text.push_str(&format!("\n**********\nmgrp({g})"));
        for (rid, port) in copies {
            text.push_str(&format!("\n  -> (rid {rid}) port {port}"));
        }
    }
    text.push_str("\n==========\nMIRRORING SESSIONS");
    for (s, port) in &now.mirror {
        text.push_str(&format!("\n  session {s} -> port {port}"));
    }
    let groups: Vec<Value> = now
        .groups
        .iter()
        .map(|(g, c)| {
            let copies: Vec<Value> = c.iter().map(|(r, p)| json!({"rid": r, "port": p})).collect();
            json!({"group": g, "copies": copies})
        })
        .collect();
    let nodes: Vec<Value> = state
        .nodes
        .iter()
        .map(|(h, n)| json!({"handle": h, "rid": n.rid, "ports": n.ports, "groups": n.groups}))
        .collect();
    Outcome::text(text, json!({"groups": groups, "nodes": nodes, "mirror": now.mirror}))
}

/// Refuse a replication engine beyond [`MAX_GROUPS`] groups or sessions, [`MAX_GROUP_COPIES`]
/// copies in a group or [`MAX_TOTAL_COPIES`] in all (P4Runtime's server has the same limits).
fn within_limits(r: &Replication) -> Result<(), CliError> {
    if r.groups.len() > MAX_GROUPS || r.mirror.len() > MAX_GROUPS {
        return refuse(format!("at most {MAX_GROUPS} multicast groups and {MAX_GROUPS} sessions"));
    }
    if let Some((g, _)) = r.groups.iter().find(|(_, c)| c.len() > MAX_GROUP_COPIES) {
        return refuse(format!("group {g} would make more than {MAX_GROUP_COPIES} copies"));
    }
    if r.groups.values().map(Vec::len).sum::<usize>() > MAX_TOTAL_COPIES {
        return refuse(format!("more than {MAX_TOTAL_COPIES} copies in all groups"));
    }
    Ok(())
}

/// Remove one copy per port of `node` (the ones its association added).
fn remove_copies(copies: &mut Vec<(u32, u32)>, node: &Node) {
    for &port in &node.ports {
        if let Some(at) = copies.iter().position(|&c| c == (node.rid, port)) {
            copies.remove(at);
        }
    }
}
