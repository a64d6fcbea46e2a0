//! Any frame through the flow classifier and the flow-key rebuild used by the flow table.
#![no_main]

use hotplane_core::flowtable::key_of;
use hotplane_core::{classify, Meta};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut m = Meta::default();
    let k = classify(data, &mut m);
    assert!(m.payload_off as usize <= data.len());
    let k2 = key_of(data, &m);
    assert_eq!(k, k2, "the flow table must see the key the classifier saw");
});
