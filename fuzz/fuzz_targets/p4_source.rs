//! P4 source text (from files, `hotplane push --p4` and update packets): the preprocessor,
//! lexer, parser and type checker must return a diagnostic for anything they cannot take,
//! never panic, and never run away on nesting, inlining, includes or declared sizes (the
//! budgets of `hotplane_p4::budget`); a program they accept must
//! compile and run packets (owned and in place) without panicking, and the chain fold
//! (`hotplane_p4::chain`) must take it and leave a program that compiles.
#![no_main]

use hotplane_core::Qsbr;
use hotplane_p4::diag::SourceMap;
use hotplane_p4::exec::Pipeline;
use hotplane_p4::preprocess::BuiltinOnly;
use hotplane_p4::v1model::{Replication, V1Switch};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    // The name a pushed program gives itself: any bytes, and named again, it reads back.
    let _ = hotplane_p4::naming::source_name(data);
    let Ok(text) = std::str::from_utf8(data) else { return };
    // (A NUL ends the source in an update's payload: entries follow it.)
    if !text.contains('\0') {
        let named = hotplane_p4::naming::named_source("fuzz.p4", text.to_string());
        assert_eq!(hotplane_p4::naming::source_name(named.as_bytes()), Some("fuzz.p4"));
    }
    let mut sources = SourceMap::default();
    let ir = match hotplane_p4::check_program(&mut sources, &mut BuiltinOnly, "fuzz.p4", text, &[])
    {
        Ok(ir) => ir,
        Err(e) => {
            // Rendering must cope with every span the front-end can produce.
            let text = e.to_string();
            assert!(!text.is_empty());
            // A budget refusal names the budget and its limit (seeds at and over each limit
            // are in fuzz/seeds/p4_source).
            if let Some(x) = e.exceeded {
                assert!(text.contains(&format!("`{}` budget (limit {})", x.budget, x.limit)));
            }
            return;
        }
    };
    // P4Info generation takes any program the front-end accepts.
    let _ = hotplane_p4::p4info::text(&ir);
    // So does the chain fold, whatever the shape (made from the input's first bytes); the
    // folded program must compile too.
    let mut shape = hotplane_core::shape::PacketShape::with_len(14, 1518);
    for (k, pair) in data.chunks_exact(2).take(8).enumerate() {
        shape.set_known(u16::from(pair[0] % 64) + k as u16, &[pair[1]]);
    }
    let mut folded = ir.clone();
    let fold = hotplane_p4::chain::fold_parser(&mut folded, &shape);
    let qsbr = Qsbr::new();
    let Ok(p) = Pipeline::new(ir, &qsbr) else { return };
    if !fold.decided.is_empty() {
        // Only transitions changed: what compiled before compiles folded.
        let _ = Pipeline::new(folded, &Qsbr::new()).expect("a folded program compiles");
    }
    let reader = qsbr.register("fuzz");
    let mut sw = V1Switch::new(Arc::new(p));
    let mut out = Vec::new();
    let pool =
        hotplane_core::Pool::new(hotplane_core::PoolConfig { buffers: 8, ..Default::default() })
            .expect("an eight-buffer pool");
    // Packets of several lengths, including empty and short ones, made from the input; each
    // through the owned path, then all in one batch in pool buffers as the data plane runs
    // them (whole packets one after another in one native frame).
    let mut batch = hotplane_core::Batch::new(8);
    for len in [0usize, 1, 14, 34, 64, data.len().min(1500)] {
        let pkt: Vec<u8> = data.iter().copied().cycle().take(len).collect();
        sw.process(&pkt, 1, &Replication::default(), &reader.guard(), 1, &mut out);
        out.clear();
        if let Some(mut buf) = pool.alloc() {
            if buf.set_frame(&pkt).is_ok() {
                buf.meta.in_port = 1;
                let _ = batch.push(buf);
            }
        }
    }
    let all = batch.all();
    let pre = Replication::default();
    sw.process_batch(&mut batch, all, &pre, &reader.guard(), 1, &mut out, |_, _, out| out.clear());
});
