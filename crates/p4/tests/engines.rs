//! Native code and closures must agree: random programs (fields of many widths, nested
//! arithmetic, bitwise, shift, saturating, signed, slice, concatenation, conditional and
//! comparison expressions, slice and compound assignments, `if`s, calls with side effects in
//! expressions, `&&` and `?:`, bounded loops with `break` and `continue`, and lookahead-driven
//! parsing) run on both
//! engines over random packets, and every output packet must be identical; so must those of
//! the data plane's batched path.

mod common;

use hotplane_core::{Batch, Pool, PoolConfig, Qsbr};
use hotplane_p4::diag::SourceMap;
use hotplane_p4::exec::{Engine, Objects, Pipeline};
use hotplane_p4::preprocess::BuiltinOnly;
use hotplane_p4::v1model::{Output, Replication, V1Switch};
use std::fmt::Write;
use std::sync::Arc;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

const WIDTHS: &[u32] = &[1, 3, 4, 7, 8, 9, 12, 16, 17, 24, 31, 32, 33, 48, 63, 64, 65, 100, 128];

struct Gen {
    rng: Rng,
    /// Header fields (name, width).
    fields: Vec<(String, u32)>,
}

impl Gen {
    fn literal(&mut self, w: u32) -> String {
        let v = (self.rng.next() as u128) << 64 | self.rng.next() as u128;
        let v = if w == 128 { v } else { v & ((1u128 << w) - 1) };
        format!("{w}w{v}")
    }

    /// An expression of type `bit<w>`.
    fn expr(&mut self, w: u32, depth: u32) -> String {
        let leaf = depth == 0 || self.rng.below(4) == 0;
        if leaf {
            let same: Vec<String> =
                self.fields.iter().filter(|f| f.1 == w).map(|f| f.0.clone()).collect();
            return match self.rng.below(3) {
                0 if !same.is_empty() => {
                    format!("hdr.h.{}", same[self.rng.below(same.len() as u64) as usize])
                }
                1 => {
                    let (name, fw) =
                        self.fields[self.rng.below(self.fields.len() as u64) as usize].clone();
                    let _ = fw;
                    format!("((bit<{w}>)hdr.h.{name})")
                }
                _ => self.literal(w),
            };
        }
        let d = depth - 1;
        match self.rng.below(12) {
            0 => {
                let op = self.rng.pick(&["+", "-", "*", "&", "|", "^", "|+|", "|-|"]);
                format!("({} {op} {})", self.expr(w, d), self.expr(w, d))
            }
            1 => format!("(~{})", self.expr(w, d)),
            2 => format!("(-{})", self.expr(w, d)),
            3 => {
                let op = self.rng.pick(&["<<", ">>"]);
                let amount = match self.rng.below(2) {
                    0 => format!("8w{}", self.rng.below(w as u64 + 3)),
                    _ => self.expr(8, d),
                };
                format!("({} {op} {amount})", self.expr(w, d))
            }
            4 => {
                let cw = self.rng.pick(WIDTHS);
                let op = self.rng.pick(&["==", "!=", "<", "<=", ">", ">="]);
                let cond = format!("({} {op} {})", self.expr(cw, d), self.expr(cw, d));
                format!("({cond} ? {} : {})", self.expr(w, d), self.expr(w, d))
            }
            5 => {
                // Signed arithmetic and comparison through int<w>.
                let op = self.rng.pick(&["+", "-", ">>", "|+|", "|-|"]);
                let rhs = if op == ">>" {
                    format!("8w{}", self.rng.below(w as u64 + 2))
                } else {
                    format!("((int<{w}>){})", self.expr(w, d))
                };
                format!("((bit<{w}>)(((int<{w}>){}) {op} {rhs}))", self.expr(w, d))
            }
            6 => {
                let op = self.rng.pick(&["<", "<=", ">", ">="]);
                let cw = self.rng.pick(WIDTHS);
                format!(
                    "((((int<{cw}>){}) {op} ((int<{cw}>){})) ? {} : {})",
                    self.expr(cw, d),
                    self.expr(cw, d),
                    self.expr(w, d),
                    self.expr(w, d)
                )
            }
            7 if w < 128 => {
                // A slice of something wider.
                let wider: Vec<u32> = WIDTHS.iter().copied().filter(|&x| x > w).collect();
                let from = self.rng.pick(&wider);
                let lo = self.rng.below((from - w + 1) as u64) as u32;
                format!("({}[{}:{lo}])", self.expr(from, d), lo + w - 1)
            }
            8 if w > 1 => {
                let a = 1 + self.rng.below(w as u64 - 1) as u32;
                format!("({} ++ {})", self.expr(a, d), self.expr(w - a, d))
            }
            9 => {
                // A cast from another width (truncating or extending, signed or not).
                let from = self.rng.pick(WIDTHS);
                if self.rng.below(2) == 0 {
                    format!("((bit<{w}>){})", self.expr(from, d))
                } else {
                    format!("((bit<{w}>)((int<{w}>)((int<{from}>){})))", self.expr(from, d))
                }
            }
            10 => {
                let cw = self.rng.pick(WIDTHS);
                let a = format!("({} == {})", self.expr(cw, d), self.expr(cw, d));
                let b = format!("({} != {})", self.expr(cw, d), self.expr(cw, d));
                let op = self.rng.pick(&["&&", "||"]);
                format!("((({a} {op} !{b})) ? {} : {})", self.expr(w, d), self.expr(w, d))
            }
            _ => self.expr(w, 0),
        }
    }

    fn program(&mut self) -> String {
        // Fields whose widths add up to whole bytes.
        self.fields.clear();
        let mut bits = 0;
        let n = 3 + self.rng.below(6);
        for i in 0..n {
            let w = self.rng.pick(WIDTHS);
            self.fields.push((format!("f{i}"), w));
            bits += w;
        }
        let pad = (8 - bits % 8) % 8;
        if pad > 0 {
            self.fields.push(("pad".into(), pad));
        }
        let mut p = String::from("#include <core.p4>\n#include <v1model.p4>\nheader h_t {\n");
        for (name, w) in &self.fields {
            let _ = writeln!(p, "    bit<{w}> {name};");
        }
        p.push_str("}\nheader tag_t { bit<8> kind; }\n");
        p.push_str("struct headers { tag_t tag; h_t h; }\n");
        p.push_str(
            "struct metadata { bit<32> m32; bit<64> m64; bit<100> m100; bit<5> m5; bit<8> c8; }\n",
        );
        // A function with a side effect, for evaluation order, short circuits and `?:` arms.
        p.push_str("bit<8> tick(inout bit<8> c) { c = c + 1; return c; }\n");
        p.push_str(
            "parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {\n\
             state start { transition select(pk.lookahead<bit<8>>()) { 8w0 &&& 8w0x80: parse_tag; default: parse_h; } }\n\
             state parse_tag { pk.extract(hdr.tag); transition parse_h; }\n\
             state parse_h { pk.extract(hdr.h); transition accept; }\n}\n",
        );
        p.push_str("control VC(inout headers hdr, inout metadata meta) { apply { } }\n");
        p.push_str(
            "control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {\n    apply {\n        sm.egress_spec = 1;\n",
        );
        let targets: Vec<(String, u32)> = self.fields.clone();
        for _ in 0..(2 + self.rng.below(5)) {
            let (name, w) = targets[self.rng.below(targets.len() as u64) as usize].clone();
            match self.rng.below(9) {
                5 => {
                    // Calls with side effects inside expressions, `&&` and `?:`.
                    let (a, b) = (self.expr(8, 2), self.expr(8, 2));
                    let _ = writeln!(p, "        meta.c8 = {a};");
                    let _ = writeln!(
                        p,
                        "        hdr.h.{name} = (bit<{w}>)(meta.c8 + tick(meta.c8) + ({b} == 8w0 && tick(meta.c8) == 8w2 ? tick(meta.c8) : meta.c8));"
                    );
                }
                6 => {
                    let op = self.rng.pick(&["+=", "-=", "&=", "|=", "^=", "|+|=", "|-|="]);
                    let e = self.expr(w, 3);
                    if w > 2 && self.rng.below(2) == 0 {
                        let _ = writeln!(
                            p,
                            "        hdr.h.{name}[{}:1] {op} {};",
                            w - 1,
                            self.expr(w - 1, 2)
                        );
                    } else {
                        let _ = writeln!(p, "        hdr.h.{name} {op} {e};");
                    }
                }
                7 => {
                    // A loop bounded by a packet field, with break and continue.
                    let e = self.expr(w, 2);
                    let _ = writeln!(
                        p,
                        "        meta.c8 = 0; for (bit<4> i = 0; i < (bit<4>)hdr.h.{name}; i = i + 1) {{ if (i == 4w9) {{ break; }} if (i[0:0] == 1) {{ continue; }} meta.c8 = meta.c8 + (bit<8>)i; }} hdr.h.{name} = {e} ^ (bit<{w}>)meta.c8;"
                    );
                }
                8 => {
                    let (a, b) = (self.expr(w, 2), self.expr(w, 2));
                    let _ = writeln!(p, "        hdr.h.{name} = tick(meta.c8) == 8w1 ? {a} : {b};");
                }
                0 => {
                    let mw = self.rng.pick(&[32u32, 64, 100, 5]);
                    let m = match mw {
                        32 => "m32",
                        64 => "m64",
                        100 => "m100",
                        _ => "m5",
                    };
                    let e = self.expr(mw, 3);
                    let _ = writeln!(p, "        meta.{m} = {e};");
                    let _ = writeln!(p, "        hdr.h.{name} = (bit<{w}>)meta.{m};");
                }
                1 if w > 2 => {
                    let lo = self.rng.below(w as u64 - 1) as u32;
                    let hi = lo + self.rng.below((w - lo) as u64) as u32;
                    let e = self.expr(hi - lo + 1, 3);
                    let _ = writeln!(p, "        hdr.h.{name}[{hi}:{lo}] = {e};");
                }
                2 => {
                    let cw = self.rng.pick(WIDTHS);
                    let cond = format!("{} < {}", self.expr(cw, 2), self.expr(cw, 2));
                    let (a, b) = (self.expr(w, 3), self.expr(w, 3));
                    let _ = writeln!(
                        p,
                        "        if ({cond}) {{ hdr.h.{name} = {a}; }} else {{ hdr.h.{name} = {b}; }}"
                    );
                }
                _ => {
                    let e = self.expr(w, 4);
                    let _ = writeln!(p, "        hdr.h.{name} = {e};");
                }
            }
        }
        p.push_str(
            "        if (hdr.tag.isValid()) { hdr.tag.kind = hdr.tag.kind + 1; }\n    }\n}\n",
        );
        p.push_str(
            "control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }\n\
             control CC(inout headers hdr, inout metadata meta) { apply { } }\n\
             control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.tag); pk.emit(hdr.h); } }\n\
             V1Switch(P(), VC(), I(), E(), CC(), D()) main;\n",
        );
        p
    }
}

fn run(p: &Arc<Pipeline>, qsbr: &Qsbr, packets: &[Vec<u8>]) -> Vec<Vec<Output>> {
    let reader = qsbr.register("engines");
    let mut sw = V1Switch::new(Arc::clone(p));
    packets
        .iter()
        .map(|pkt| {
            let mut out = Vec::new();
            sw.process(pkt, 0, &Replication::default(), &reader.guard(), 1, &mut out);
            out
        })
        .collect()
}

/// The packets in batches of 8 through `process_batch`, as the data plane runs them.
fn run_batched(
    p: &Arc<Pipeline>,
    qsbr: &Qsbr,
    pool: &Pool,
    packets: &[Vec<u8>],
) -> Vec<Vec<Output>> {
    let reader = qsbr.register("engines, batched");
    let mut sw = V1Switch::new(Arc::clone(p));
    let mut outs = Vec::new();
    for chunk in packets.chunks(8) {
        let mut batch = Batch::new(chunk.len());
        for data in chunk {
            let mut pkt = pool.alloc().expect("buffer");
            pkt.set_frame(data).expect("fits");
            batch.push(pkt).expect("room");
        }
        outs.extend(common::run_batch(
            &mut sw,
            &mut batch,
            &Replication::default(),
            &reader.guard(),
            1,
        ));
    }
    outs
}

#[test]
fn native_code_and_closures_agree_on_random_programs() {
    let qsbr = Qsbr::new();
    let mut g = Gen { rng: Rng(0x9e37_79b9_7f4a_7c15), fields: Vec::new() };
    let (mut compared, mut rejected) = (0, Vec::new());
    let pool = Pool::new(PoolConfig { buffers: 64, ..Default::default() }).expect("pool");
    let mut whole = 0;
    for round in 0..150 {
        let text = g.program();
        let mut sources = SourceMap::default();
        let ir =
            match hotplane_p4::check_program(&mut sources, &mut BuiltinOnly, "r.p4", &text, &[]) {
                Ok(ir) => ir,
                Err(e) => {
                    rejected.push(format!("{e}"));
                    continue;
                }
            };
        let build = |engine| {
            let objects = Objects::new(&ir, &qsbr).expect("objects");
            let p = Pipeline::with_engine(ir.clone(), objects, engine).expect("pipeline");
            assert_eq!(p.native_error(), None, "round {round}:\n{text}");
            assert_eq!(p.engine(), engine);
            Arc::new(p)
        };
        let (native, closures) = (build(Engine::Native), build(Engine::Closures));
        let packets: Vec<Vec<u8>> = (0..24)
            .map(|i| {
                // Some short packets (parser errors), with and without the tag.
                let len = if i % 8 == 7 { g.rng.below(6) as usize } else { 40 + i };
                (0..len).map(|_| g.rng.next() as u8).collect()
            })
            .collect();
        let (a, b) = (run(&native, &qsbr, &packets), run(&closures, &qsbr, &packets));
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(x, y, "round {round}, packet {i}:\n{text}");
        }
        // The data plane's path, whole packets one after another in one native frame.
        let c = run_batched(&native, &qsbr, &pool, &packets);
        for (i, (x, y)) in a.iter().zip(&c).enumerate() {
            assert_eq!(x, y, "round {round}, packet {i} in a batch:\n{text}");
        }
        whole += native.runs_whole_packets() as u32;
        compared += 1;
    }
    // The generator must mostly write valid programs, or the test checks little.
    eprintln!("compared {compared} ({whole} as whole packets), rejected {}", rejected.len());
    assert!(whole >= compared / 2, "only {whole} of {compared} programs ran whole packets");
    assert!(
        compared >= 120,
        "only {compared} programs compiled; first errors: {:?}",
        &rejected[..rejected.len().min(3)]
    );
}
