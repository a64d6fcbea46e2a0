//! The verifier's negative corpus (`corpus/negative.rs`) is refused, case by case, at the
//! instruction and with the reason each case names.

#[path = "corpus/negative.rs"]
mod corpus;

use corpus::{spec, CASES};
use hotplane_ebpf::verifier::{self, Context, Env, MapInfo};
use hotplane_ebpf::xdp;

fn env_check(c: &corpus::Case) -> Result<verifier::Verified, verifier::VerifyError> {
    let spec = spec(c);
    let infos: Vec<MapInfo> = spec.maps.iter().map(|m| m.def.into()).collect();
    let helpers = xdp::helpers();
    let env = Env {
        helpers: &helpers,
        ctx: Context::Xdp,
        maps: &infos,
        complexity: verifier::DEFAULT_COMPLEXITY,
    };
    verifier::verify(&spec.insns, &env)
}

#[test]
fn the_corpus_is_refused_with_instruction_and_reason() {
    assert!(CASES.len() >= 100, "the corpus has {} programs", CASES.len());
    let mut failures = Vec::new();
    for c in CASES {
        let Ok(outcome) = std::panic::catch_unwind(|| env_check(c)) else {
            failures.push(format!("[{}] {}: the verifier panicked", c.class, c.name));
            continue;
        };
        match outcome {
            Ok(_) => failures.push(format!("[{}] {}: accepted", c.class, c.name)),
            Err(e) if e.pc != c.pc || !e.msg.contains(c.reason) => failures.push(format!(
                "[{}] {}: want instruction {} and `{}`, got {e}",
                c.class, c.name, c.pc, c.reason
            )),
            Err(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}

#[test]
fn every_class_has_cases() {
    let classes: std::collections::BTreeSet<&str> = CASES.iter().map(|c| c.class).collect();
    for want in [
        "packet bounds",
        "stack bounds",
        "uninitialised",
        "pointer arithmetic",
        "pointer leak",
        "context",
        "map value bounds",
        "null map value",
        "helper args",
        "calls and frames",
        "atomics",
        "alu32 end",
        "division",
        "jumps",
        "infinite loop",
        "too complex",
        "encoding",
    ] {
        assert!(classes.contains(want), "no case for {want}");
    }
}
