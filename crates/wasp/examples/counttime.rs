use hotplane_wasp::asm::assemble;
use hotplane_wasp::cache::DecodeCache;
use hotplane_wasp::ess::{Ess, EssConfig};
use hotplane_wasp::filter::{process_with, FilterConfig};
use hotplane_wasp::frame::{active_frame, Hosts, Send};
use hotplane_wasp::wire::WaspRepr;
use hotplane_wasp::Env;
use std::time::Instant;
fn main() {
    let ess = Ess::new(&EssConfig::default()).unwrap();
    let src = std::env::args().nth(1).unwrap_or("examples/wasp/count.s".into());
    let code = assemble(&std::fs::read_to_string(src).unwrap()).unwrap().code;
    let repr = WaspRepr {
        next_header: 59,
        keys: vec![7],
        scratch: u64::MAX.to_be_bytes().to_vec(),
        code,
        ..Default::default()
    };
    let mut frame = active_frame(&Hosts::default(), Send::default(), &repr, &[0u8; 30]).unwrap();
    let mut cache = DecodeCache::new();
    let config = FilterConfig::default();
    let env = Env { time_ns: 1_000_000, ..Env::default() };
    let n = 20_000_000u64;
    let t = Instant::now();
    for _ in 0..n {
        let (head, shim) = frame.split_at_mut(42);
        let _ =
            std::hint::black_box(process_with(shim, &env, &head[14..], &ess, &config, &mut cache));
    }
    println!("process_with: {:.1} ns", t.elapsed().as_nanos() as f64 / n as f64);
}
