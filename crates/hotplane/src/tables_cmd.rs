//! Tables on the control API and the command line: match keys and parameters as text, entries
//! as JSON, and `hotplane table list|dump|add|del|clear|default`.

use hotplane_control::api::{Client, Request};
use std::path::Path;

pub fn call(socket: &Path, req: &Request) -> anyhow::Result<()> {
    let v = Client::connect(socket)?.call(req)?;
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}
