//! `hotplane table` and `hotplane cli`: the tables of a running data plane, by name.
//!
//! Writable tables (`[[table]]` in a config) take hotplane's order, `MATCH ACTION PARAMS`. A
//! P4 program's tables take simple_switch_CLI's, `ACTION MATCH... [=>] PARAMS... [PRIORITY]`
//! (the `=>` may be left out, since a shell would read its `>`), and go through the P4 kind's `p4-cli` operation, which `hotplane cli` speaks line by line
//! (a tutorial's `s1-commands.txt` runs unchanged). Which kind a name is comes from the data
//! plane: a P4 table is one of the running program's (`p4-tables`).

use anyhow::{bail, Context};
use clap::Subcommand;
use hotplane_control::api::{Client, ClientError, Request, TableEntrySpec};
use serde_json::Value;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

/// Options every `hotplane table` and `hotplane cli` command takes.
#[derive(clap::Args)]
pub struct Common {
    /// The global --socket (`hotplane --help`).
    #[arg(skip)]
    pub socket: PathBuf,
    /// The P4 program's target when several run (`pre`, `mid`, `post`).
    #[arg(long, global = true)]
    pub target: Option<String>,
    /// Print the data plane's answer as JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand)]
pub enum TableCmd {
    /// Every table: writable tables (kind, size, entries) and the P4 program's (keys).
    List,
    /// Every entry of TABLE with its counters (and, for P4 tables, its handle), and the
    /// default action.
    #[command(
        after_help = "Examples:\n  hotplane table dump ipv4_lpm\n  hotplane table dump flows --json"
    )]
    Dump { table: String },
    /// Add an entry. P4 tables: `ACTION MATCH... [=>] PARAMS... [PRIORITY]` as simple_switch_CLI
    /// (MATCH is `V`, `V/LEN`, `V&&&MASK` or `LO->HI`, one per key field; the smallest priority
    /// wins; quote `'=>'` in a shell or leave it out). Writable
    /// tables: `MATCH ACTION PARAMS...` (MATCH is `10.0.0.1`, `10.0.0.0/8`, `V&&&M` or
    /// `LO..HI`) with `--priority` (the largest wins).
    #[command(after_help = "Examples:\n  \
        hotplane table add ipv4_lpm ipv4_forward 10.0.1.1/32 08:00:00:00:01:11 1\n  \
        hotplane table add acl '1025&&&0xffff' drop --priority 10")]
    Add {
        table: String,
        #[arg(required = true)]
        args: Vec<String>,
        #[arg(long)]
        priority: Option<u32>,
    },
    /// Replace an entry's action and parameters (counters stay). P4 tables: `ACTION HANDLE [=>]
    /// PARAMS...`, or with `--key` `ACTION MATCH... [=>] PARAMS... [PRIORITY]`. Writable
    /// tables: `MATCH ACTION PARAMS...`.
    #[command(after_help = "Examples:\n  \
        hotplane table modify ipv4_lpm ipv4_forward 1621190520 08:00:00:00:01:12 1\n  \
        hotplane table modify ipv4_lpm ipv4_forward --key 10.0.1.1/32 08:00:00:00:01:12 1")]
    Modify {
        table: String,
        #[arg(required = true)]
        args: Vec<String>,
        /// P4 tables: the words after the action are the entry's match fields, not its handle.
        #[arg(long)]
        key: bool,
        #[arg(long)]
        priority: Option<u32>,
    },
    /// Delete an entry: P4 tables by HANDLE (from `add` or `dump`) or, with `--key`, by its
    /// match fields; writable tables by MATCH.
    #[command(after_help = "Examples:\n  \
        hotplane table del ipv4_lpm 1621190520\n  \
        hotplane table del ipv4_lpm --key 10.0.1.1/32")]
    Del {
        table: String,
        #[arg(required = true)]
        args: Vec<String>,
        /// P4 tables: ARGS are the entry's match fields (then an optional priority).
        #[arg(long)]
        key: bool,
        #[arg(long)]
        priority: Option<u32>,
    },
    /// Delete every entry.
    Clear { table: String },
    /// Set the action run on a miss.
    #[command(
        after_help = "Examples:\n  hotplane table default ipv4_lpm drop\n  hotplane table default ipv4_lpm ipv4_forward 08:00:00:00:01:11 1"
    )]
    Default { table: String, action: String, params: Vec<String> },
}

/// Run a `hotplane table` command.
pub fn table(common: &Common, op: TableCmd) -> anyhow::Result<()> {
    let mut client = Client::connect(&common.socket)?;
    let p4 = match &op {
        TableCmd::List => None,
        TableCmd::Dump { table }
        | TableCmd::Add { table, .. }
        | TableCmd::Modify { table, .. }
        | TableCmd::Del { table, .. }
        | TableCmd::Clear { table }
        | TableCmd::Default { table, .. } => p4_table(&mut client, common, table)?,
    };
    if let Some(p4) = p4 {
        let line = cli_line(&p4, op)?;
        return print_answer(common, &p4_cli(&mut client, common, &line)?);
    }
    let request = match op {
        TableCmd::List => return list(&mut client, common),
        TableCmd::Dump { table } => Request::TableDump { table },
        TableCmd::Add { table, args, priority } => {
            Request::TableAdd(writable(table, args, priority)?)
        }
        TableCmd::Modify { table, args, priority, .. } => {
            Request::TableModify(writable(table, args, priority)?)
        }
        TableCmd::Del { table, mut args, priority, .. } => {
            if args.len() != 1 {
                bail!("a writable table's entry is deleted by its one MATCH");
            }
            Request::TableDel { table, matches: args.remove(0), priority: priority.unwrap_or(0) }
        }
        TableCmd::Clear { table } => Request::TableClear { table },
        TableCmd::Default { table, action, params } => {
            Request::TableDefault { table, action, params }
        }
    };
    let answer = client.call(&request)?;
    match common.json {
        true => println!("{}", serde_json::to_string_pretty(&answer)?),
        false => crate::human::print_value(&answer),
    }
    Ok(())
}

/// A P4 table, named as the running program names it (what `p4-cli` lines are built with),
/// and how many key fields it has (where the matches end when no `=>` says so).
struct P4Table {
    name: String,
    keys: usize,
}

/// The running P4 program's table called `name` (qualified or by its own name), if any.
fn p4_table(client: &mut Client, common: &Common, name: &str) -> anyhow::Result<Option<P4Table>> {
    let tables = match client.call(&Request::P4Tables { target: common.target.clone() }) {
        Ok(v) => v,
        // No P4 program runs (or this build has none): the name is a writable table's.
        Err(ClientError::Refused(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let tables: Vec<(&str, usize)> = tables["tables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| Some((t["name"].as_str()?, t["keys"].as_array().map_or(0, Vec::len))))
        .collect();
    let suffix = format!(".{name}");
    let found = tables.iter().find(|(n, _)| *n == name).or_else(|| {
        let mut m = tables.iter().filter(|(n, _)| n.ends_with(&suffix));
        m.next().filter(|_| m.next().is_none())
    });
    Ok(found.map(|&(n, keys)| P4Table { name: n.to_string(), keys }))
}

/// The simple_switch_CLI line a `hotplane table` command on a P4 table is.
fn cli_line(t: &P4Table, op: TableCmd) -> anyhow::Result<String> {
    // `=>` needs quoting in a shell (`>` redirects): without it, the matches are the table's
    // key fields' worth of words (or the one handle) after the action.
    let arrow = |mut args: Vec<String>, before: usize| {
        if !args.iter().any(|a| a == "=>") && args.len() >= before {
            args.insert(before, "=>".into());
        }
        args
    };
    let with_priority = |mut line: String, priority: Option<u32>| {
        if let Some(p) = priority {
            line.push_str(&format!(" {p}"));
        }
        line
    };
    let name = &t.name;
    Ok(match op {
        TableCmd::List => unreachable!("list names no table"),
        TableCmd::Dump { .. } => format!("table_dump {name}"),
        TableCmd::Clear { .. } => format!("table_clear {name}"),
        TableCmd::Add { args, priority, .. } => {
            if args.len() < 1 + t.keys {
                bail!(
                    "{name} is a P4 table with {} key field(s): give simple_switch_CLI's order, \
                     ACTION MATCH... [=>] PARAMS... [PRIORITY]",
                    t.keys
                );
            }
            let args = arrow(args, 1 + t.keys);
            with_priority(format!("table_add {name} {}", args.join(" ")), priority)
        }
        TableCmd::Modify { args, key, priority, .. } => {
            let (verb, before) =
                if key { ("table_modify_match", 1 + t.keys) } else { ("table_modify", 2) };
            let args = arrow(args, before);
            with_priority(format!("{verb} {name} {}", args.join(" ")), priority)
        }
        TableCmd::Del { args, key, priority, .. } => {
            let by_key = key || args.len() > 1;
            let verb = if by_key { "table_delete_match" } else { "table_delete" };
            with_priority(format!("{verb} {name} {}", args.join(" ")), priority)
        }
        TableCmd::Default { action, params, .. } => {
            let params: Vec<String> = params.into_iter().filter(|p| p != "=>").collect();
            format!("table_set_default {name} {action} {}", params.join(" "))
        }
    })
}

/// A writable table's entry from `MATCH ACTION PARAMS...` (or, for simple_switch_CLI's
/// habit, `ACTION MATCH => PARAMS...`).
fn writable(
    table: String,
    mut args: Vec<String>,
    priority: Option<u32>,
) -> anyhow::Result<TableEntrySpec> {
    let (matches, action, params) = match args.iter().position(|a| a == "=>") {
        Some(2) => {
            let params = args.split_off(3);
            (args[1].clone(), args[0].clone(), params)
        }
        Some(_) => bail!("a writable table has one match field: ACTION MATCH => PARAMS..."),
        None if args.len() >= 2 => {
            let params = args.split_off(2);
            (args[0].clone(), args[1].clone(), params)
        }
        None => bail!("give MATCH ACTION [PARAMS...]"),
    };
    Ok(TableEntrySpec { table, matches, action, params, priority: priority.unwrap_or(0) })
}

fn p4_cli(client: &mut Client, common: &Common, line: &str) -> Result<Value, ClientError> {
    client.call(&Request::P4Cli { target: common.target.clone(), line: line.to_string() })
}

fn print_answer(common: &Common, answer: &Value) -> anyhow::Result<()> {
    if common.json {
        println!("{}", serde_json::to_string(answer)?);
    } else if let Some(text) = answer["text"].as_str().filter(|t| !t.is_empty()) {
        println!("{text}");
    }
    if let Some(w) = answer["warning"].as_str() {
        eprintln!("hotplane: warning: {w}");
    }
    Ok(())
}

/// Writable tables and the P4 program's, as a table for people.
fn list(client: &mut Client, common: &Common) -> anyhow::Result<()> {
    let writable = match client.call(&Request::TableList {}) {
        Ok(v) => v,
        Err(ClientError::Refused(_)) => Value::Array(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let p4 = match client.call(&Request::P4Tables { target: common.target.clone() }) {
        Ok(v) => Some(v),
        Err(ClientError::Refused(_)) => None,
        Err(e) => return Err(e.into()),
    };
    if common.json {
        println!("{}", serde_json::json!({"writable": writable, "p4": p4}));
        return Ok(());
    }
    let rows = writable.as_array().cloned().unwrap_or_default();
    if !rows.is_empty() {
        println!("{:<24} {:<8} {:>8} {:>8}", "writable table", "kind", "entries", "size");
        for t in rows {
            println!(
                "{:<24} {:<8} {:>8} {:>8}",
                t["name"].as_str().unwrap_or("?"),
                t["kind"].as_str().unwrap_or("?"),
                t["entries"].as_u64().unwrap_or(0),
                t["size"].as_u64().unwrap_or(0)
            );
        }
    }
    if let Some(p4) = p4 {
        println!(
            "{:<40} {:>8} {:>8}  keys (P4 program at {})",
            "P4 table",
            "entries",
            "size",
            p4["target"].as_str().unwrap_or("?")
        );
        for t in p4["tables"].as_array().into_iter().flatten() {
            let keys: Vec<String> = t["keys"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|k| {
                    format!(
                        "{}:{}",
                        k["name"].as_str().unwrap_or("?"),
                        k["match"].as_str().unwrap_or("?")
                    )
                })
                .collect();
            println!(
                "{:<40} {:>8} {:>8}  {}",
                t["name"].as_str().unwrap_or("?"),
                t["entries"].as_u64().unwrap_or(0),
                t["size"].as_u64().unwrap_or(0),
                keys.join(", ")
            );
        }
    }
    Ok(())
}

/// Run simple_switch_CLI lines: `words` as one line, else every line of `file` (or of the
/// standard input; with a prompt on a terminal). A refused line is reported with its number
/// and the rest still run, as simple_switch_CLI does; the exit status says whether any was.
pub fn cli(common: &Common, words: &[String], file: Option<&Path>) -> anyhow::Result<()> {
    let mut client = Client::connect(&common.socket)?;
    if !words.is_empty() {
        let answer = p4_cli(&mut client, common, &words.join(" "))?;
        return print_answer(common, &answer);
    }
    let input: Box<dyn BufRead> = match file {
        Some(f) if f != Path::new("-") => Box::new(std::io::BufReader::new(
            std::fs::File::open(f).with_context(|| format!("{}", f.display()))?,
        )),
        _ => Box::new(std::io::stdin().lock()),
    };
    let prompt = file.is_none() && std::io::stdin().is_terminal();
    let source = file.map_or("stdin".to_string(), |f| f.display().to_string());
    let mut refused = 0;
    if prompt {
        eprintln!("simple_switch_CLI's commands (`help` lists them); end with Ctrl-D");
    }
    let mut lines = input.lines().enumerate();
    loop {
        if prompt {
            eprint!("hotplane> ");
            std::io::stderr().flush().ok();
        }
        let Some((i, line)) = lines.next() else { break };
        let line = line.with_context(|| format!("reading {source}"))?;
        if line.split('#').next().unwrap_or("").trim().is_empty() {
            continue;
        }
        match p4_cli(&mut client, common, &line) {
            Ok(answer) => print_answer(common, &answer)?,
            Err(ClientError::Refused(e)) => {
                refused += 1;
                eprintln!("{source}:{}: {e}", i + 1);
            }
            Err(e) => return Err(e.into()),
        }
    }
    if refused > 0 {
        bail!("{refused} command(s) refused");
    }
    Ok(())
}
