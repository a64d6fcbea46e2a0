use super::*;
use crate::asm::assemble;
use crate::helpers;
use crate::interp::{interpret, Region};
use crate::verifier::{verify, Context, Env, DEFAULT_COMPLEXITY};

/// Verify, JIT and run `text` on `mem`; also run the interpreter and check they agree.
fn run(text: &str, mem: &[u8]) -> u64 {
    let prog = assemble(text).unwrap();
    let h = helpers::conformance();
    let env = Env {
        helpers: &h,
        ctx: Context::Mem { len: mem.len() as u64 },
        maps: &[],
        complexity: DEFAULT_COMPLEXITY,
    };
    let v = verify(&prog, &env).unwrap();
    let code = compile(&v.insns, &h, v.stack_depth).unwrap();
    let mut m1 = mem.to_vec();
    // SAFETY: verified program over m1.
    let jit = unsafe { code.entry()(m1.as_mut_ptr() as u64, m1.len() as u64) };
    let mut m2 = mem.to_vec();
    let regions = [Region::of(&m2, true)];
    let interp =
        interpret(&v.insns, &h, &regions, m2.as_mut_ptr() as u64, m2.len() as u64, 1 << 20)
            .unwrap();
    assert_eq!(jit, interp, "JIT and interpreter disagree on\n{text}");
    assert_eq!(m1, m2, "memory differs after\n{text}");
    jit
}

#[test]
fn division_edge_cases_follow_ebpf_not_x86() {
    assert_eq!(run("mov %r0, 7\nmov %r1, 0\ndiv %r0, %r1\nexit", &[]), 0);
    assert_eq!(run("mov %r0, 7\nmov %r1, 0\nmod %r0, %r1\nexit", &[]), 7);
    assert_eq!(
        run("lddw %r0, 0x8000000000000000\nmov %r1, -1\nsdiv %r0, %r1\nexit", &[]),
        0x8000000000000000
    );
    assert_eq!(run("lddw %r0, 0x8000000000000000\nmov %r1, -1\nsmod %r0, %r1\nexit", &[]), 0);
    assert_eq!(run("mov32 %r0, 0x80000000\nmov32 %r1, -1\nsdiv32 %r0, %r1\nexit", &[]), 0x80000000);
    assert_eq!(run("lddw %r0, 0x1ffffffff\nmov %r1, 0\nmod32 %r0, %r1\nexit", &[]), 0xffffffff);
    // Dividend and divisor in rax/rdx/rcx.
    assert_eq!(run("mov %r0, 100\nmov %r3, 7\nmod %r3, %r0\nmov %r0, %r3\nexit", &[]), 7);
    assert_eq!(run("mov %r3, 100\nmov %r0, 7\ndiv %r3, %r0\nmov %r0, %r3\nexit", &[]), 14);
    assert_eq!(run("mov %r4, 100\nmov %r3, 9\ndiv %r4, %r3\nmov %r0, %r4\nexit", &[]), 11);
}

#[test]
fn shifts_through_rcx() {
    assert_eq!(run("mov %r4, 1\nmov %r1, 4\nlsh %r4, %r1\nmov %r0, %r4\nexit", &[]), 16);
    assert_eq!(run("mov %r1, 1\nmov %r4, 5\nlsh %r1, %r4\nmov %r0, %r1\nexit", &[]), 32);
    assert_eq!(run("mov %r4, 3\nlsh %r4, %r4\nmov %r0, %r4\nexit", &[]), 24);
    assert_eq!(run("mov %r0, -16\nmov %r4, 2\narsh32 %r0, %r4\nexit", &[]), 0xfffffffc);
}

#[test]
fn atomics_on_the_stack() {
    let p = "mov %r1, 6\nstxdw [%r10-8], %r1\nmov %r2, 3\nlock fetch or [%r10-8], %r2\nldxdw %r0, [%r10-8]\nlsh %r0, 8\nor %r0, %r2\nexit";
    assert_eq!(run(p, &[]), (7 << 8) | 6);
    let p = "mov %r1, 6\nstxw [%r10-8], %r1\nmov %r0, 3\nlock fetch xor32 [%r10-8], %r0\nldxw %r1, [%r10-8]\nlsh %r0, 8\nor %r0, %r1\nexit";
    assert_eq!(run(p, &[]), (6 << 8) | 5);
    let p = "mov %r1, 6\nstxdw [%r10-8], %r1\nmov %r0, 6\nmov %r2, 9\nlock cmpxchg [%r10-8], %r2\nldxdw %r1, [%r10-8]\nlsh %r0, 8\nor %r0, %r1\nexit";
    assert_eq!(run(p, &[]), (6 << 8) | 9);
}

#[test]
fn byte_stores_from_sil_and_dil() {
    let mem = [0u8; 4];
    let p = "mov %r2, 0x41\nstxb [%r1+0], %r2\nmov %r3, 0x42\nstxb [%r1+1], %r3\nmov %r0, 0\nexit";
    run(p, &mem);
}

#[test]
fn long_programs_use_long_jumps() {
    let mut p = String::from("mov %r0, 0\njeq %r0, 0, far\n");
    for _ in 0..200 {
        p += "add %r0, 1\n";
    }
    p += "far:\nadd %r0, 1000\nexit\n";
    assert_eq!(run(&p, &[]), 1000);
}

mod differential {
    use super::*;
    use crate::insn::{alu, class, jmp, mem, op, SRC_X};
    use proptest::prelude::*;

    /// One random instruction over initialised registers r0..r9 and a pre-written stack.
    fn insn() -> impl Strategy<Value = Vec<Insn>> {
        let reg = 0u8..10;
        let alu_op = prop::sample::select(vec![
            alu::ADD,
            alu::SUB,
            alu::MUL,
            alu::DIV,
            alu::OR,
            alu::AND,
            alu::LSH,
            alu::RSH,
            alu::NEG,
            alu::MOD,
            alu::XOR,
            alu::MOV,
            alu::ARSH,
            alu::END,
        ]);
        let imm = prop_oneof![any::<i32>(), -2i32..3, Just(i32::MIN), Just(-1)];
        let alu_insn =
            (any::<bool>(), alu_op, reg.clone(), reg.clone(), any::<bool>(), imm.clone(), 0u8..3)
                .prop_map(|(wide, o, d, s, x, imm, variant)| {
                    let cls = if wide { class::ALU64 } else { class::ALU };
                    let mut off = 0i16;
                    let mut imm = imm;
                    let mut x = x;
                    match o {
                        alu::DIV | alu::MOD => off = (variant == 1) as i16,
                        alu::END => {
                            imm = [16, 32, 64][variant as usize];
                            if wide {
                                x = false;
                            }
                        }
                        alu::MOV if x && variant > 0 => {
                            off = if variant == 1 {
                                8
                            } else if wide {
                                32
                            } else {
                                16
                            }
                        }
                        alu::NEG => x = false,
                        _ => {}
                    }
                    vec![Insn::new(cls | o | if x { SRC_X } else { 0 }, d, s, off, imm)]
                });
        let slot = (1i16..9).prop_map(|k| -8 * k);
        let size = prop::sample::select(vec![mem::B, mem::H, mem::W, mem::DW]);
        let store = (size.clone(), slot.clone(), reg.clone())
            .prop_map(|(sz, off, s)| vec![Insn::new(class::STX | mem::MEM | sz, 10, s, off, 0)]);
        let load = (size, slot.clone(), reg.clone(), any::<bool>()).prop_map(|(sz, off, d, sx)| {
            let mode = if sx && sz != mem::DW { mem::MEMSX } else { mem::MEM };
            vec![Insn::new(class::LDX | mode | sz, d, 10, off, 0)]
        });
        let atomic_op =
            prop::sample::select(vec![0x00, 0x40, 0x50, 0xa0, 0x01, 0x41, 0x51, 0xa1, 0xe1, 0xf1]);
        let atomic = (any::<bool>(), slot, reg.clone(), atomic_op).prop_map(|(w, off, s, a)| {
            vec![Insn::new(
                class::STX | mem::ATOMIC | if w { mem::DW } else { mem::W },
                10,
                s,
                off,
                a,
            )]
        });
        let jop = prop::sample::select(vec![
            jmp::JEQ,
            jmp::JGT,
            jmp::JGE,
            jmp::JSET,
            jmp::JNE,
            jmp::JSGT,
            jmp::JSGE,
            jmp::JLT,
            jmp::JLE,
            jmp::JSLT,
            jmp::JSLE,
        ]);
        let jump = (any::<bool>(), jop, reg.clone(), reg, any::<bool>(), imm, 0i16..6).prop_map(
            |(wide, o, d, s, x, imm, off)| {
                let cls = if wide { class::JMP } else { class::JMP32 };
                vec![Insn::new(cls | o | if x { SRC_X } else { 0 }, d, s, off, imm)]
            },
        );
        prop_oneof![4 => alu_insn, 1 => store, 1 => load, 1 => atomic, 2 => jump]
    }

    fn program() -> impl Strategy<Value = Vec<Insn>> {
        (prop::collection::vec(any::<i64>(), 10), prop::collection::vec(insn(), 1..60)).prop_map(
            |(init, body)| {
                let mut p = Vec::new();
                for (r, v) in init.iter().enumerate() {
                    p.push(Insn::new(op::LDDW, r as u8, 0, 0, *v as u32 as i32));
                    p.push(Insn::new(0, 0, 0, 0, (*v as u64 >> 32) as u32 as i32));
                }
                for k in 1..9 {
                    p.push(Insn::new(
                        class::STX | mem::MEM | mem::DW,
                        10,
                        (k % 10) as u8,
                        -8 * k,
                        0,
                    ));
                }
                let body: Vec<Insn> = body.into_iter().flatten().collect();
                let n = body.len();
                for (k, mut i) in body.into_iter().enumerate() {
                    // Keep jumps forward and inside the body (or onto the epilogue).
                    if matches!(i.class(), class::JMP | class::JMP32) {
                        i.off = i.off.min((n - k) as i16);
                    }
                    p.push(i);
                }
                // Fold every register into r0 so that all of them are compared.
                for r in 1..10u8 {
                    p.push(Insn::new(class::ALU64 | alu::MUL | SRC_X, 0, 0, 0, 0));
                    p.push(Insn::new(class::ALU64 | alu::ADD | SRC_X, 0, r, 0, 0));
                }
                for k in 1..9 {
                    p.push(Insn::new(class::LDX | mem::MEM | mem::DW, 1, 10, -8 * k, 0));
                    p.push(Insn::new(class::ALU64 | alu::XOR | SRC_X, 0, 1, 0, 0));
                    p.push(Insn::new(class::ALU64 | alu::LSH, 0, 0, 0, 1));
                }
                p.push(Insn::new(op::EXIT, 0, 0, 0, 0));
                p
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
        #[test]
        fn jit_agrees_with_the_interpreter(prog in program()) {
            let h = helpers::conformance();
            let env = Env { helpers: &h, ctx: Context::Mem { len: 0 }, maps: &[], complexity: DEFAULT_COMPLEXITY };
            let v = match verify(&prog, &env) {
                Ok(v) => v,
                Err(e) => return Err(TestCaseError::reject(e.to_string())),
            };
            let code = compile(&v.insns, &h, v.stack_depth).unwrap();
            // SAFETY: verified; r1 is a dangling pointer to zero bytes of memory the program never uses.
            let jit = unsafe { code.entry()(8, 0) };
            let interp = interpret(&v.insns, &h, &[], 8, 0, 1 << 20).unwrap();
            prop_assert_eq!(jit, interp, "\n{}", crate::asm::disassemble(&v.insns));
        }
    }
}
