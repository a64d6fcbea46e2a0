//! Flow functions: the packet API, the sandbox, compile and runtime errors, runaways and the
//! watchdog.

mod common;

use common::{payload_of, udp, Worker};
use hotplane_core::Verdict;
use hotplane_lua::{CompileError, FunctionOpts, LuaConfig, LuaRuntime};
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn runtime() -> Arc<LuaRuntime> {
    LuaRuntime::new(2, LuaConfig::default())
}

fn compile(rt: &Arc<LuaRuntime>, src: &str) -> Compiled {
    let def = rt.compile(src.as_bytes(), "test", FunctionOpts::default(), None).unwrap();
    Compiled { stage: rt.stage(def.clone()), def }
}

/// A stage and its definition (to show the last Lua error when an assertion fails).
struct Compiled {
    stage: hotplane_core::StageRef,
    def: Arc<hotplane_lua::FunctionDef>,
}

impl Compiled {
    fn as_ref(&self) -> &dyn hotplane_core::Stage {
        self.stage.as_ref()
    }

    fn error(&self) -> String {
        self.def.last_error().unwrap_or_default()
    }
}

#[test]
fn packet_api_reads_and_writes_headers_and_payload() {
    let rt = runtime();
    let w = Worker::new();
    let f = compile(
        &rt,
        r#"
        return function(pkt)
          local u = pkt:getUdp4Packet()
          if not u then return pkt:drop() end
          assert(pkt:getTcp4Packet() == nil and u.tcp == nil and u.ip6 == nil)
          assert(u.ip4:getSrc() == 0x0a000001 and u.ip4:getDst() == 0xc0a80102, u.ip4:getDst())
          assert(u.udp:getSrcPort() == 1000 and u.udp:getDstPort() == 2000)
          assert(u.eth:getType() == 0x0800 and u.eth:getSrc() == 0x020000000001)
          assert(pkt:getSize() == 42 + 8 and u.payload:getLength() == 8)
          u.udp:setDstPort(53)
          u.ip4:setTTL(u.ip4:getTTL() - 1)
          u.ip4:calculateChecksum()
          u.payload.be16[0] = 0xbeef
          u.payload.uint8[2] = 7
          u.payload.be32[1] = 0xdeadbeef
          pkt:setMark(99)
          pkt:forward(3)
        end
        "#,
    );
    let out = w.run(f.as_ref(), &[udp("10.0.0.1", "192.168.1.2", 1000, 2000, &[0; 8])], 0);
    let o = &out[0];
    assert_eq!(o.verdict, Verdict::Pass, "{}", f.error());
    assert_eq!(o.out_port, 3);
    assert_eq!(o.user, 99);
    assert_eq!(&o.bytes[36..38], &53u16.to_be_bytes());
    assert_eq!(payload_of(&o.bytes), &[0xbe, 0xef, 7, 0, 0xde, 0xad, 0xbe, 0xef]);
    // TTL went down by one and the header checksum is valid again.
    let want = udp("10.0.0.1", "192.168.1.2", 1000, 2000, &[0; 8]);
    assert_eq!(o.bytes[22], want[22] - 1);
    let sum: u32 = o.bytes[14..34].chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]]) as u32).sum();
    assert_eq!((sum & 0xffff) + (sum >> 16), 0xffff, "IPv4 header checksum");
}

#[test]
fn host_order_views_match_libmoon_and_drop_works() {
    let rt = runtime();
    let w = Worker::new();
    let f = compile(
        &rt,
        "return function(pkt) local p = pkt:getPayload() \
           if p.uint32[0] == 0 then pkt:drop() else p.uint32[1] = p.uint32[0] + 1 end end",
    );
    let a = udp("10.0.0.1", "10.0.0.2", 1, 2, &[0; 8]);
    let mut bytes = 5u32.to_ne_bytes().to_vec();
    bytes.extend_from_slice(&[0; 4]);
    let b = udp("10.0.0.1", "10.0.0.2", 1, 2, &bytes);
    let out = w.run(f.as_ref(), &[a, b], 0);
    assert_eq!(out[0].verdict, Verdict::Drop);
    assert_eq!(out[1].verdict, Verdict::Pass, "{}", f.error());
    assert_eq!(&payload_of(&out[1].bytes)[4..8], &6u32.to_ne_bytes());
}

#[test]
fn out_of_bounds_access_is_an_error_for_that_packet_only() {
    let rt = runtime();
    let w = Worker::new();
    let f = compile(
        &rt,
        "return function(pkt) local p = pkt:getPayload() p.uint32[p.uint8[0]] = 1 pkt:forward(1) end",
    );
    let frames: Vec<_> = [0u8, 200, 1]
        .iter()
        .map(|&i| udp("10.0.0.1", "10.0.0.2", 1, 2, &[i, 0, 0, 0, 0, 0, 0, 0]))
        .collect();
    let out = w.run(f.as_ref(), &frames, 0);
    assert_eq!(out[0].verdict, Verdict::Pass, "{}", f.error());
    assert_eq!(out[0].out_port, 1);
    assert_eq!(out[1].verdict, Verdict::Drop, "index 200 is outside the frame");
    assert_eq!(out[1].bytes, frames[1], "nothing written");
    assert_eq!(out[2].verdict, Verdict::Pass, "the batch went on after the error");
    assert_eq!(rt.stats.runtime_errors.load(Ordering::Relaxed), 1);
    let def = rt.installed_functions();
    assert!(def.is_empty(), "nothing recorded as installed yet");
}

#[test]
fn runtime_errors_pass_when_configured_and_are_counted_per_function() {
    let rt = LuaRuntime::new(1, LuaConfig { on_error: Verdict::Pass, ..LuaConfig::default() });
    let w = Worker::new();
    let def = rt
        .compile(
            b"return function(pkt) error('boom') end",
            "boomer",
            FunctionOpts::default(),
            Some("flow:x"),
        )
        .unwrap();
    rt.installed("flow:x", &def, 7);
    let f = rt.stage(def.clone());
    let frame = udp("10.0.0.1", "10.0.0.2", 1, 2, &[0; 8]);
    let out = w.run(f.as_ref(), &[frame.clone(), frame], 0);
    assert!(out.iter().all(|o| o.verdict == Verdict::Pass));
    assert_eq!(def.errors.load(Ordering::Relaxed), 2);
    let msg = def.last_error().unwrap();
    assert!(msg.contains("boomer:1: boom"), "{msg}");
    assert_eq!(def.placed(), Some(("flow:x".into(), 7)));
}

#[test]
fn sandbox_has_no_way_out() {
    let rt = runtime();
    let w = Worker::new();
    let f = compile(
        &rt,
        r#"
        local checks = {
          io == nil, os == nil, debug == nil, package == nil, require == nil, ffi == nil,
          jit == nil, load == nil, loadstring == nil, dofile == nil, getfenv == nil,
          setfenv == nil, string.dump == nil, collectgarbage == nil, newproxy == nil,
          string.find == nil, getmetatable("") == false,
          not pcall(function() return ("aaa"):find("a") end),
          not pcall(string.rep, "x", 1e9),
          not pcall(function() return (""):rep(2^31 - 1) end),
        }
        return function(pkt)
          for i = 1, #checks do if not checks[i] then error("check " .. i .. " failed") end end
          -- Packets are handles: no pointers to reach, nothing to change but through methods.
          assert(not pcall(function() return pkt.data end))
          assert(not pcall(function() return pkt[0] end))
          assert(type(pkt.turn) == "number")
          assert(not pcall(function() pkt.turn = pkt.turn + 1 end))
          assert(not pcall(function() return pkt + 1 end))
          local u = pkt:getUdp4Packet()
          assert(not pcall(function() u.payload.uint8.slot = 1 end))
          assert(not pcall(function() u.payload.uint8[-1] = 1 end))
          assert(not pcall(function() return u.payload.uint8[0.5] end))
          assert(not pcall(function() return u.payload.uint8["x"] end))
          pkt:forward(9)
        end
        "#,
    );
    let out = w.run(f.as_ref(), &[udp("10.0.0.1", "10.0.0.2", 1, 2, &[0; 8])], 0);
    assert_eq!(out[0].out_port, 9, "{}", f.error());
}

#[test]
fn functions_do_not_share_globals() {
    let rt = runtime();
    let w = Worker::new();
    let a = compile(&rt, "counter = 100 string.sub = nil return function(pkt) counter = counter + 1 pkt:setMark(counter) end");
    let b = compile(
        &rt,
        "return function(pkt) pkt:setMark(counter == nil and string.sub ~= nil and 1 or 2) end",
    );
    let frame = udp("10.0.0.1", "10.0.0.2", 1, 2, &[0; 8]);
    assert_eq!(w.run(a.as_ref(), std::slice::from_ref(&frame), 0)[0].user, 101);
    assert_eq!(w.run(a.as_ref(), std::slice::from_ref(&frame), 0)[0].user, 102);
    assert_eq!(w.run(b.as_ref(), std::slice::from_ref(&frame), 0)[0].user, 1);
    // Each worker has its own instance of the function's state.
    assert_eq!(w.run(a.as_ref(), &[frame], 1)[0].user, 101);
}

#[test]
fn compile_errors_name_the_problem() {
    let rt = runtime();
    let err =
        |src: &str| rt.compile(src.as_bytes(), "f", FunctionOpts::default(), None).err().unwrap();
    let e = err("return function(pkt)\n  pkt:drop(\nend");
    assert!(matches!(&e, CompileError::Syntax(m) if m.contains("f:3:")), "{e}");
    let e = err("return 42");
    assert!(e.to_string().contains("must return a function(pkt); it returned a number"), "{e}");
    let e = err("error('top level says no')");
    assert!(e.to_string().contains("top level says no"), "{e}");
    let e = err("local __hp_S = 1 return function() end");
    assert!(e.to_string().contains("reserved"), "{e}");
    let e = err("while true do end return function() end");
    assert!(e.to_string().contains("ran away"), "{e}");
    assert!(matches!(
        rt.compile(&[0xff, 0xfe], "f", FunctionOpts::default(), None),
        Err(CompileError::NotUtf8)
    ));
    assert!(matches!(
        rt.compile(b"return function() end", "f", FunctionOpts { jit: true, opt_level: 4 }, None),
        Err(CompileError::OptLevel(4))
    ));
    assert_eq!(rt.stats.compile_errors.load(Ordering::Relaxed), 7);
}

#[test]
fn memory_limit_is_an_error_not_a_crash() {
    let rt = LuaRuntime::new(1, LuaConfig { memory_limit: 8 << 20, ..LuaConfig::default() });
    let w = Worker::new();
    let f = compile(&rt, "local t = {} return function(pkt) for i = 1, 1e7 do t[i] = {i} end end");
    let out = w.run(f.as_ref(), &[udp("10.0.0.1", "10.0.0.2", 1, 2, &[0; 8])], 0);
    assert_eq!(out[0].verdict, Verdict::Drop);
    assert_eq!(
        rt.stats.runtime_errors.load(Ordering::Relaxed) + rt.stats.runaways.load(Ordering::Relaxed),
        1
    );
}

/// Every way to loop forever is stopped by the step budget, in the interpreter and in JIT code,
/// and the flow falls back to the function it had before.
#[test]
fn runaways_are_stopped_and_the_previous_function_takes_over() {
    let loops = [
        "while true do end",
        "repeat until false",
        "for i = 1, math.huge do end",
        "::top:: goto top",
        "local function f() return f() end f()",
        "local function f() while true do end end while true do pcall(f) end",
        "pcall(function() while true do end end)",
    ];
    for jit in [true, false] {
        for body in loops {
            let rt = LuaRuntime::new(1, LuaConfig { max_steps: 100_000, ..LuaConfig::default() });
            let w = Worker::new();
            let opts = FunctionOpts { jit, opt_level: 3 };
            let good = rt
                .compile(b"return function(pkt) pkt:forward(1) end", "good", opts, Some("t"))
                .unwrap();
            rt.installed("t", &good, 1);
            let bad_src = format!("return function(pkt) {body} pkt:forward(2) end");
            let bad = rt.compile(bad_src.as_bytes(), "bad", opts, Some("t")).unwrap();
            let stage = rt.stage(bad.clone());
            let frame = udp("10.0.0.1", "10.0.0.2", 1, 2, &[0; 8]);
            let out = w.run(stage.as_ref(), &[frame.clone(), frame.clone(), frame.clone()], 0);
            assert_eq!(out[0].verdict, Verdict::Drop, "{body} (jit {jit})");
            assert_eq!(
                (out[1].verdict, out[1].out_port),
                (Verdict::Pass, 1),
                "{body}: fallback runs the rest of the batch"
            );
            assert_eq!(out[2].out_port, 1);
            assert!(bad.is_condemned());
            assert_eq!(bad.runaways.load(Ordering::Relaxed), 1, "{body}");
            assert!(bad.last_error().unwrap().contains("ran away"), "{body}");
            assert_eq!(rt.stats.states_replaced.load(Ordering::Relaxed), 1);
            // Later batches go straight to the previous function.
            let out = w.run(stage.as_ref(), &[frame], 0);
            assert_eq!(out[0].out_port, 1);
        }
    }
}

/// The watchdog stops interpreted code the step budget would let run for a long time.
#[test]
fn watchdog_stops_a_long_interpreted_call() {
    let cfg = LuaConfig { max_steps: i32::MAX as u32, watchdog_ms: 20, ..LuaConfig::default() };
    let rt = LuaRuntime::new(1, cfg);
    let w = Worker::new();
    let opts = FunctionOpts { jit: false, opt_level: 3 };
    let def =
        rt.compile(b"return function(pkt) while true do end end", "spin", opts, None).unwrap();
    let stage = rt.stage(def.clone());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dog = {
        let (rt, stop) = (rt.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                rt.maintain(hotplane_core::time::now_ns());
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        })
    };
    let out = w.run(stage.as_ref(), &[udp("10.0.0.1", "10.0.0.2", 1, 2, &[0; 8])], 0);
    stop.store(true, Ordering::Relaxed);
    dog.join().unwrap();
    assert_eq!(out[0].verdict, Verdict::Drop);
    assert_eq!(rt.stats.watchdog_fired.load(Ordering::Relaxed), 1);
    assert!(def.is_condemned());
    assert!(def.last_error().unwrap().contains("watchdog"), "{:?}", def.last_error());
}

/// Run `body` while a control thread calls `maintain` every 2 ms, as the engine's does.
fn with_watchdog<T>(rt: &Arc<LuaRuntime>, body: impl FnOnce() -> T) -> T {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dog = {
        let (rt, stop) = (rt.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                rt.maintain(hotplane_core::time::now_ns());
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        })
    };
    let r = body();
    stop.store(true, Ordering::Relaxed);
    dog.join().unwrap();
    r
}

/// Two 4 MiB strings that differ in their last byte, compared in a loop: each iteration is one
/// step but reads 4 MiB (the left operand changes, so the comparison cannot be hoisted out of
/// the loop). The loop first runs on short strings, so it is compiled (LuaJIT calls
/// no hook from compiled code) before the long ones come in.
const BIG_COMPARE_LOOP: &str = "local big = ('x'):rep(2^20) for i = 1, 2 do big = big .. big end \
     local small, large = {'a', 'b'}, {big .. 'a', big .. 'b'} \
     return function(pkt) \
       local t, i = small, 0 \
       while true do \
         if i == 1000 then t = large end \
         if t[1 + i % 2] <= t[2] then i = i + 1 end \
       end \
     end";

/// The watchdog stops JIT-compiled code whose operators work on large strings: with the default
/// budget the steps alone would allow hours (10^6 comparisons of 4 MiB). The error must come
/// from the watchdog, not from the step budget.
#[test]
fn watchdog_stops_compiled_code_working_on_large_strings() {
    let cfg = LuaConfig { watchdog_ms: 100, ..LuaConfig::default() };
    assert_eq!(cfg.max_steps, 1_000_000);
    let rt = LuaRuntime::new(1, cfg);
    let opts = FunctionOpts { jit: true, opt_level: 3 };
    let good =
        rt.compile(b"return function(pkt) pkt:forward(1) end", "good", opts, Some("t")).unwrap();
    rt.installed("t", &good, 1);
    let def = rt.compile(BIG_COMPARE_LOOP.as_bytes(), "compare", opts, Some("t")).unwrap();
    let stage = rt.stage(def.clone());
    let frame = udp("10.0.0.1", "10.0.0.2", 1, 2, &[0; 8]);
    let frames = vec![frame.clone(), frame];
    // Without a working watchdog the call takes hours.
    let (first, next) = with_watchdog(&rt, || {
        guarded(move || {
            let w = Worker::new();
            let first = w.run(stage.as_ref(), &frames, 0);
            // The next batch on the same worker runs normally (the stop is not left behind).
            let next = w.run(stage.as_ref(), &frames, 0);
            (first, next)
        })
        .expect("the watchdog did not stop a compiled loop over large strings")
    });
    assert!(def.last_error().unwrap().contains("watchdog"), "{:?}", def.last_error());
    assert_eq!(rt.stats.watchdog_fired.load(Ordering::Relaxed), 1);
    assert_eq!(def.runaways.load(Ordering::Relaxed), 1);
    assert!(def.is_condemned());
    assert_eq!(first[0].verdict, Verdict::Drop);
    assert_eq!((first[1].verdict, first[1].out_port), (Verdict::Pass, 1));
    assert!(next.iter().all(|o| o.verdict == Verdict::Pass && o.out_port == 1));
}

/// Run `f` on another thread; `None` if it has not finished after two minutes (a harness
/// guard against a hang, not a timing assertion).
fn guarded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(120)).ok()
}

/// The trial run of a chunk's top level (on the control thread, while compiling) is stopped by
/// a watchdog too: a top level comparing large strings in a compiled loop would otherwise hold
/// the control thread (and with it `remove` and `shutdown`) until its step budget ran out.
#[test]
fn watchdog_stops_a_long_top_level_at_compile_time() {
    let rt = LuaRuntime::new(1, LuaConfig { watchdog_ms: 20, ..LuaConfig::default() });
    let src = "local big = ('x'):rep(2^20) for i = 1, 2 do big = big .. big end \
               local t = {big .. 'a', big .. 'b'} \
               local i = 0 while t[1 + i % 2] <= t[2] do i = i + 1 end \
               return function(pkt) end";
    let r = guarded(move || rt.compile(src.as_bytes(), "slow-top", FunctionOpts::default(), None))
        .expect("compiling a long top level did not end");
    match r {
        Err(CompileError::Init(msg)) => assert!(msg.contains("watchdog"), "{msg}"),
        Err(e) => panic!("stopped by something else: {e}"),
        Ok(_) => panic!("a top level that never ends compiled"),
    }
}

/// `table.sort` without a comparator compares inside C: on large strings one call could run
/// for minutes where no step check is. It is stopped by the watchdog within the call.
#[test]
fn watchdog_stops_a_sort_of_large_strings() {
    // Long enough for the top level, which builds the table (it is watched too).
    let cfg = LuaConfig { watchdog_ms: 250, ..LuaConfig::default() };
    let rt = LuaRuntime::new(1, cfg);
    // 10^5 references to two 8 MiB strings: about 1.7 * 10^6 comparisons of 8 MiB in one call.
    let src = "local big = ('x'):rep(2^20) for i = 1, 3 do big = big .. big end \
               local a, b = big .. 'a', big .. 'b' \
               local t = {} for i = 1, 100000 do t[i] = (i % 2 == 0) and a or b end \
               return function(pkt) table.sort(t) pkt:forward(9) end";
    let opts = FunctionOpts { jit: true, opt_level: 3 };
    let def = rt.compile(src.as_bytes(), "sort", opts, None).unwrap();
    let stage = rt.stage(def.clone());
    let frame = udp("10.0.0.1", "10.0.0.2", 1, 2, &[0; 8]);
    let out = with_watchdog(&rt, || {
        guarded(move || Worker::new().run(stage.as_ref(), &[frame], 0))
            .expect("the watchdog did not stop table.sort")
    });
    assert_eq!(out[0].verdict, Verdict::Drop);
    assert!(def.last_error().unwrap().contains("watchdog"), "{:?}", def.last_error());
}

/// A stop the watchdog meant for one call never reaches a later one: many short calls of a
/// compiled loop, each with step checks, under a watchdog that keeps looking, all finish.
#[test]
fn watchdog_leaves_short_calls_alone() {
    // 250 ms: far above one call (microseconds), so only a stop meant for an earlier call
    // could fire, not a test thread that a loaded machine left unscheduled for a while.
    let rt = LuaRuntime::new(1, LuaConfig { watchdog_ms: 250, ..LuaConfig::default() });
    let w = Worker::new();
    let f = compile(
        &rt,
        "return function(pkt) local s = 0 for i = 1, 1000 do s = s + i end pkt:forward(s % 17) end",
    );
    let frame = udp("10.0.0.1", "10.0.0.2", 1, 2, &[0; 8]);
    with_watchdog(&rt, || {
        for _ in 0..2000 {
            let out = w.run(f.as_ref(), &[frame.clone(), frame.clone()], 0);
            assert!(out.iter().all(|o| o.out_port == 3), "{}", f.error());
        }
    });
    assert_eq!(rt.stats.watchdog_fired.load(Ordering::Relaxed), 0);
    assert_eq!(rt.stats.runaways.load(Ordering::Relaxed), 0);
}

/// Enough batches for LuaJIT to compile traces of the driver and of the packet API.
#[test]
fn hot_functions_run_compiled() {
    let bodies = [
        "return function(pkt) end",
        "return function(pkt) pkt:getSize() end",
        "return function(pkt) local u = pkt:getUdp4Packet() end",
        "return function(pkt) local u = pkt:getUdp4Packet() if u then u.udp:setDstPort(7) end end",
        "return function(pkt) local p = pkt:getPayload() local x = p.uint8 end",
        "return function(pkt) local p = pkt:getPayload() local x = p.uint8[0] end",
        "return function(pkt) local u = pkt:getUdp4Packet() if u then u.payload.be16[0] = 0x0101 end end",
    ];
    for body in bodies {
        let rt = runtime();
        let w = Worker::new();
        let f = compile(&rt, body);
        let frames: Vec<_> = (0..32).map(|_| udp("10.0.0.1", "10.0.0.2", 1, 2, &[0; 8])).collect();
        let mut batch = hotplane_core::Batch::new(64);
        for fr in &frames {
            assert!(batch.push(w.packet(fr)).is_ok());
        }
        let reader = w.qsbr.register("t");
        let guard = reader.guard();
        let mut cx = hotplane_core::WorkerCx::new(0, 1, &guard);
        let all = batch.all();
        for _ in 0..20_000 {
            f.as_ref().run(&mut batch, all, &mut cx);
        }
        assert!(batch.iter().all(|p| p.meta.verdict == Verdict::Pass), "{body}: {}", f.error());
        assert_eq!(f.def.errors.load(Ordering::Relaxed), 0, "{body}");
    }
}

/// The calling convention between kinds: a P4 program asking for the flow function hands over
/// its own buffer; the function reads and writes it in place, and its verdict comes back as an
/// XDP action. The frame cannot grow: `setSize` past its length is refused by the packet API.
#[test]
fn run_one_works_on_the_callers_frame_in_place() {
    let rt = runtime();
    let w = Worker::new();
    let f = compile(
        &rt,
        r#"
        return function(pkt)
          local u = pkt:getUdp4Packet()
          if not u then return pkt:drop() end
          u.payload.be16[0] = 0xbeef
          pkt:setMark(7)
          if u.udp:getDstPort() == 9 then pkt:drop() end
        end
        "#,
    );
    let reader = w.qsbr.register("test");
    let guard = reader.guard();
    let mut cx = hotplane_core::WorkerCx::new(0, hotplane_core::time::now_ns(), &guard);
    for (dport, action) in
        [(2000u16, hotplane_core::xdp::XDP_PASS), (9, hotplane_core::xdp::XDP_DROP)]
    {
        let mut frame = udp("10.0.0.1", "192.168.1.2", 1000, dport, &[0; 8]);
        let len = frame.len();
        let mut meta = hotplane_core::Meta::default();
        hotplane_core::classify(&frame, &mut meta);
        let at = meta.payload_off as usize;
        let answer = f.as_ref().run_one(&mut frame, &mut meta, &mut cx);
        assert_eq!(answer, action, "dport {dport}: {}", f.error());
        assert_eq!(&frame[at..at + 2], &[0xbe, 0xef], "written in the caller's buffer");
        assert_eq!((frame.len(), meta.user), (len, 7));
    }
    let grow = compile(&rt, "return function(pkt) pkt:setSize(pkt:getSize() + 64) end");
    let mut frame = udp("10.0.0.1", "192.168.1.2", 1000, 2000, &[0; 8]);
    let mut meta = hotplane_core::Meta::default();
    hotplane_core::classify(&frame, &mut meta);
    grow.as_ref().run_one(&mut frame, &mut meta, &mut cx);
    let e = grow.error();
    assert!(e.contains("from 0 to 50"), "growing the caller's frame is an error: {e}");
}
