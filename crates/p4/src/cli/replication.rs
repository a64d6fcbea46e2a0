//! The replication engine: multicast groups built from BMv2's nodes, and mirroring sessions.

use serde_json::{json, Value};

use super::{CliError, CliState, Line, Outcome, MAX_GROUPS, MAX_GROUP_COPIES, MAX_NODES};
use super::{MAX_NODE_PORTS, MAX_TOTAL_COPIES};
use crate::v1model::Replication;

#[derive(Debug, Clone)]
pub(super) struct Node {
    rid: u32,
    ports: Vec<u32>,
    /// Groups it is associated with.
    groups: Vec<u32>,
}

pub(super) fn mirroring(
    cx: &Line<'_>,
    command: &str,
    now: &Replication,
) -> Result<Outcome, CliError> {
    let session = cx.number(cx.word(0, "a session id")?, "the session id")?;
    let mut next = now.clone();
    match command {
        "mirroring_add" => {
            cx.exactly(2)?;
            let port = cx.number(cx.args[1], "the port")?;
            next.mirror.insert(session, port);
            within_limits(&next)?;
            let mut o =
                Outcome::text(format!("session {session} mirrors to port {port}"), json!({}));
            o.replication = Some(next);
            Ok(o)
        }
        "mirroring_delete" => {
            cx.exactly(1)?;
            if next.mirror.remove(&session).is_none() {
                return Err(CliError::Replication(format!("no mirroring session {session}")));
            }
            let mut o = Outcome::text(format!("session {session} deleted"), json!({}));
            o.replication = Some(next);
            Ok(o)
        }
        _ => {
            cx.exactly(1)?;
            match now.mirror.get(&session) {
                Some(port) => Ok(Outcome::text(
                    format!("session {session}: egress port {port}"),
                    json!({"session": session, "port": port}),
                )),
                None => Err(CliError::Replication(format!("no mirroring session {session}"))),
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
    let refuse = |m: String| Err(CliError::Replication(m));
    let changed = |text: String, result: Value, next: Replication| {
        within_limits(&next)?;
        let mut o = Outcome::text(text, result);
        o.replication = Some(next);
        Ok(o)
    };
    let ports = |words: &[&str]| -> Result<Vec<u32>, CliError> {
        if words.is_empty() || words.len() > MAX_NODE_PORTS {
            return Err(cx.syntax(format!("give 1 to {MAX_NODE_PORTS} ports")));
        }
        words.iter().map(|w| cx.number(w, "a port")).collect()
    };
    match command {
        "mc_mgrp_create" => {
            cx.exactly(1)?;
            let g = cx.number(cx.args[0], "the group id")?;
            if next.groups.contains_key(&g) {
                return refuse(format!("multicast group {g} exists"));
            }
            next.groups.insert(g, Vec::new());
            changed(format!("group {g} created"), json!({"group": g}), next)
        }
        "mc_mgrp_destroy" => {
            cx.exactly(1)?;
            let g = cx.number(cx.args[0], "the group id")?;
            if next.groups.remove(&g).is_none() {
                return refuse(format!("no multicast group {g}"));
            }
            for n in state.nodes.values_mut() {
                n.groups.retain(|x| *x != g);
            }
            changed(format!("group {g} destroyed"), json!({}), next)
        }
        "mc_node_create" => {
            let rid = cx.number(cx.word(0, "a replication id")?, "the rid")?;
            let ports = ports(&cx.args[1..])?;
            if state.nodes.len() >= MAX_NODES {
                return refuse(format!("at most {MAX_NODES} multicast nodes"));
            }
            let h = state.next_node;
            state.next_node += 1;
            state.nodes.insert(h, Node { rid, ports, groups: Vec::new() });
            Ok(Outcome::text(format!("node was created with handle {h}"), json!({"handle": h})))
        }
        "mc_node_update" => {
            let h = cx.number(cx.word(0, "a node handle")?, "the node handle")?;
            let ports = ports(&cx.args[1..])?;
            let Some(node) = state.nodes.get(&h).cloned() else {
                return refuse(format!("no multicast node {h}"));
            };
            for g in &node.groups {
                if let Some(copies) = next.groups.get_mut(g) {
                    remove_copies(copies, &node);
                    copies.extend(ports.iter().map(|&p| (node.rid, p)));
                }
            }
            within_limits(&next)?;
            state.nodes.insert(h, Node { ports, ..node });
            changed(format!("node {h} updated"), json!({}), next)
        }
        "mc_node_destroy" => {
            cx.exactly(1)?;
            let h = cx.number(cx.args[0], "the node handle")?;
            let Some(node) = state.nodes.remove(&h) else {
                return refuse(format!("no multicast node {h}"));
            };
            for g in &node.groups {
                if let Some(copies) = next.groups.get_mut(g) {
                    remove_copies(copies, &node);
                }
            }
            changed(format!("node {h} destroyed"), json!({}), next)
        }
        "mc_node_associate" | "mc_node_dissociate" => {
            cx.exactly(2)?;
            let g = cx.number(cx.args[0], "the group id")?;
            let h = cx.number(cx.args[1], "the node handle")?;
            let Some(node) = state.nodes.get_mut(&h) else {
                return refuse(format!("no multicast node {h}"));
            };
            let Some(copies) = next.groups.get_mut(&g) else {
                return refuse(format!("no multicast group {g} (mc_mgrp_create {g})"));
            };
            let member = node.groups.contains(&g);
            if command == "mc_node_associate" {
                if member {
                    return refuse(format!("node {h} is already in group {g}"));
                }
                copies.extend(node.ports.iter().map(|&p| (node.rid, p)));
                within_limits(&next)?;
                node.groups.push(g);
                changed(format!("node {h} associated with group {g}"), json!({}), next)
            } else {
                if !member {
                    return refuse(format!("node {h} is not in group {g}"));
                }
                remove_copies(copies, node);
                node.groups.retain(|x| *x != g);
                changed(format!("node {h} dissociated from group {g}"), json!({}), next)
            }
        }
        _ => {
            cx.exactly(0)?;
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
                .map(|(g, c)| json!({"group": g, "copies": c.iter().map(|(r, p)| json!({"rid": r, "port": p})).collect::<Vec<_>>()}))
                .collect();
            let nodes: Vec<Value> = state
                .nodes
                .iter()
                .map(|(h, n)| json!({"handle": h, "rid": n.rid, "ports": n.ports, "groups": n.groups}))
                .collect();
            Ok(Outcome::text(text, json!({"groups": groups, "nodes": nodes, "mirror": now.mirror})))
        }
    }
}

/// Refuse a replication engine beyond [`MAX_GROUPS`], [`MAX_GROUP_COPIES`] or
/// [`MAX_TOTAL_COPIES`]. Multicast changes keep the CLI's node bookkeeping only when it passes.
pub(super) fn within_limits(r: &Replication) -> Result<(), CliError> {
    let too_many = |what: String| Err(CliError::Replication(what));
    if r.groups.len() + r.mirror.len() > MAX_GROUPS {
        return too_many(format!("at most {MAX_GROUPS} multicast groups and mirroring sessions"));
    }
    if let Some((g, _)) = r.groups.iter().find(|(_, c)| c.len() > MAX_GROUP_COPIES) {
        return too_many(format!("group {g} would make more than {MAX_GROUP_COPIES} copies"));
    }
    if r.groups.values().map(Vec::len).sum::<usize>() > MAX_TOTAL_COPIES {
        return too_many(format!("more than {MAX_TOTAL_COPIES} copies in all groups"));
    }
    Ok(())
}

/// Remove one copy per port of `node` (the ones its association added).
pub(super) fn remove_copies(copies: &mut Vec<(u32, u32)>, node: &Node) {
    for &port in &node.ports {
        if let Some(at) = copies.iter().position(|&c| c == (node.rid, port)) {
            copies.remove(at);
        }
    }
}
