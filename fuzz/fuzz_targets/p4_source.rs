//! P4 source text (from files, `hotplane push --p4` and update packets): the preprocessor,
//! lexer and parser must return a diagnostic for anything they cannot take, never panic, and
//! never run away on nesting or macro expansion.
#![no_main]

use hotplane_p4::diag::SourceMap;
use hotplane_p4::preprocess::BuiltinOnly;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut sources = SourceMap::default();
    if let Err(e) = hotplane_p4::parse_program(&mut sources, &mut BuiltinOnly, "fuzz.p4", text, &[]) {
        // Rendering must cope with every span the front-end can produce.
        assert!(!e.to_string().is_empty());
    }
});
