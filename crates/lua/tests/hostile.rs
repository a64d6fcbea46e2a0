//! Hostile flow functions (issue 18): forged and stale packet handles, lexical tricks that hide
//! a loop from the step checks, and capped library functions called with numeric strings.

mod common;

use common::{udp, Worker};
use hotplane_core::Verdict;
use hotplane_lua::{FunctionOpts, LuaConfig, LuaRuntime};
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn frame() -> Vec<u8> {
    udp("10.0.0.1", "10.0.0.2", 1, 2, &[0; 8])
}

fn compile_with(rt: &Arc<LuaRuntime>, src: &str, jit: bool) -> Arc<hotplane_lua::FunctionDef> {
    rt.compile(src.as_bytes(), "hostile", FunctionOpts { jit, opt_level: 3 }, None).unwrap()
}

/// Runs `src` on `frames` (one batch) with the JIT on and off; returns the outputs of each run
/// and the function's last error.
fn run_both(src: &str, frames: &[Vec<u8>]) -> Vec<(bool, Vec<common::Out>, String)> {
    [true, false]
        .into_iter()
        .map(|jit| {
            let rt = LuaRuntime::new(1, LuaConfig::default());
            let w = Worker::new();
            let def = compile_with(&rt, src, jit);
            let stage = rt.stage(def.clone());
            let out = w.run(stage.as_ref(), frames, 0);
            (jit, out, def.last_error().unwrap_or_default())
        })
        .collect()
}

/// A table (or any other Lua value) posing as a packet handle must not reach a descriptor:
/// `pkt.getSize({slot = N})` read, and `pkt.setMark({slot = N}, v)` wrote, outside the batch.
#[test]
fn forged_packet_handles_are_refused() {
    let src = r#"
        return function(pkt)
          local getSize, setMark, forward = pkt.getSize, pkt.setMark, pkt.forward
          local u = pkt:getUdp4Packet()
          local setDst = u.udp.setDstPort
          local forgeries = { {slot = 1}, {slot = 63}, {slot = -1}, {slot = 64},
                              {slot = 100000}, {slot = -100000}, {slot = 2^40}, {slot = 0.5},
                              {slot = "1"}, {}, 1, "x", true }
          for i, f in ipairs(forgeries) do
            if pcall(getSize, f) then error("getSize accepted forgery " .. i) end
            if pcall(setMark, f, 7) then error("setMark accepted forgery " .. i) end
            if pcall(forward, f, 7) then error("forward accepted forgery " .. i) end
            if pcall(setDst, f, 7) then error("setDstPort accepted forgery " .. i) end
          end
          -- Handles of another kind are not packets (nor packets header views).
          for i, f in ipairs({ u, u.udp, u.ip4, pkt:getFrame(), u.payload.be16 }) do
            if pcall(getSize, f) then error("getSize accepted a handle of another kind " .. i) end
          end
          if pcall(setDst, pkt, 7) or pcall(setDst, u.ip4, 7) then error("setDstPort took a non-UDP handle") end
          -- The genuine handle still works.
          setMark(pkt, 5)
          forward(pkt, 3)
        end
    "#;
    for (jit, out, err) in run_both(src, &[frame()]) {
        assert_eq!(
            (out[0].verdict, out[0].out_port, out[0].user),
            (Verdict::Pass, 3, 5),
            "jit {jit}: {err}"
        );
    }
}

/// A handle is good for its own packet's turn only: kept and used later (for another packet of
/// the batch, or in a later batch where its slot holds nothing or another flow's packet) it is
/// refused.
#[test]
fn stale_packet_handles_are_refused() {
    let src = r#"
        local kept, kept_udp
        return function(pkt)
          if kept then
            if pcall(kept.setMark, kept, 9) then error("a kept packet handle still wrote") end
            if pcall(kept.getSize, kept) then error("a kept packet handle still read") end
            if pcall(function() return kept:getFrame() end) then error("kept handle made a view") end
            if pcall(kept_udp.setDstPort, kept_udp, 9) then error("a kept header view still wrote") end
          end
          local u = pkt:getUdp4Packet()
          if pkt:getInPort() == 0 and not kept then kept, kept_udp = pkt, u.udp end
          pkt:setMark(1)
        end
    "#;
    for jit in [true, false] {
        let rt = LuaRuntime::new(1, LuaConfig::default());
        let w = Worker::new();
        let def = compile_with(&rt, src, jit);
        let stage = rt.stage(def.clone());
        // Batch of three: the handle of the first packet is kept (slot 0) ... but a handle of
        // slot 2 kept and reused in a batch of one would reach a stale descriptor.
        let out = w.run(stage.as_ref(), &[frame(), frame(), frame()], 0);
        for o in &out {
            assert_eq!(
                (o.verdict, o.user),
                (Verdict::Pass, 1),
                "jit {jit}: {:?}",
                def.last_error()
            );
        }
        let out = w.run(stage.as_ref(), &[frame()], 0);
        assert_eq!(
            (out[0].verdict, out[0].user),
            (Verdict::Pass, 1),
            "jit {jit}: {:?}",
            def.last_error()
        );
        assert_eq!(def.errors.load(Ordering::Relaxed), 0, "jit {jit}: {:?}", def.last_error());
    }
}

/// A handle kept from the last packet of a batch of three, used in a later batch of one: its
/// slot holds a descriptor of packets that are gone.
#[test]
fn handles_of_slots_outside_the_current_batch_are_refused() {
    let src = r#"
        local n, kept = 0
        return function(pkt)
          n = n + 1
          if n == 3 then kept = pkt end
          if n == 4 then
            if pcall(kept.getSize, kept) then error("stale slot read") end
            if pcall(kept.setSize, kept, 0) then error("stale slot written") end
          end
          pkt:forward(4)
        end
    "#;
    for jit in [true, false] {
        let rt = LuaRuntime::new(1, LuaConfig::default());
        let w = Worker::new();
        let def = compile_with(&rt, src, jit);
        let stage = rt.stage(def.clone());
        w.run(stage.as_ref(), &[frame(), frame(), frame()], 0);
        let out = w.run(stage.as_ref(), &[frame()], 0);
        assert_eq!(
            (out[0].verdict, out[0].out_port),
            (Verdict::Pass, 4),
            "jit {jit}: {:?}",
            def.last_error()
        );
    }
}

/// Sources whose loop hides behind a line end LuaJIT knows and the old scanner did not. Each
/// loop runs 10^6 times, more than the budget, so with its check it must run away.
#[test]
fn loops_after_every_kind_of_line_end_are_bounded() {
    let hidden = [
        "-- a comment ended by CR\rwhile i < 1e6 do i = i + 1 end",
        "-- CRLF\r\nwhile i < 1e6 do i = i + 1 end",
        "-- LFCR\n\rwhile i < 1e6 do i = i + 1 end",
        "--[==[ long ]] still ]=] comment ]==] while i < 1e6 do i = i + 1 end",
        "local s = [==[ ]] ]=] ]==] while i < 1e6 do i = i + 1 end",
        "local s = 'a\\\rb' while i < 1e6 do i = i + 1 end",
        "local s = 'a\\z \r\n  b' while i < 1e6 do i = i + 1 end",
        "--[=x not long\rrepeat i = i + 1 until i >= 1e6",
        "::top:: i = i + 1 if i < 1e6 then goto top end",
        "local function f(k) if k > 0 then return f(k - 1) end end f(1e6) i = 1e6",
    ];
    for body in hidden {
        for jit in [true, false] {
            let rt = LuaRuntime::new(1, LuaConfig { max_steps: 10_000, ..LuaConfig::default() });
            let w = Worker::new();
            let src = format!("return function(pkt) local i = 0 {body}\npkt:forward(2) end");
            let def = compile_with(&rt, &src, jit);
            let stage = rt.stage(def.clone());
            let out = w.run(stage.as_ref(), &[frame()], 0);
            assert_eq!(out[0].verdict, Verdict::Drop, "{body:?} (jit {jit}) ran unchecked");
            assert_eq!(def.runaways.load(Ordering::Relaxed), 1, "{body:?} (jit {jit})");
        }
    }
}

/// `string.rep` counts like Lua does: a numeric string is a number, so it meets the cap too.
#[test]
fn capped_functions_coerce_numeric_strings_before_checking() {
    let src = r#"
        return function(pkt)
          local tries = {
            function() return string.rep("x", "10000000") end,
            function() return ("x"):rep("1e7") end,
            function() return string.rep("x", " 0x1000000 ") end,
            function() return string.rep("ab", "600000") end,
            function() return string.rep("x", "600000", ("y"):rep(10)) end,
            function() return string.rep(12345, 1e6) end,
          }
          for i, f in ipairs(tries) do
            local ok, r = pcall(f)
            if ok then error("try " .. i .. " made " .. #r .. " bytes") end
          end
          -- Below the cap, numeric strings still work as counts.
          assert(#string.rep("x", "1000") == 1000)
          pkt:forward(6)
        end
    "#;
    for (jit, out, err) in run_both(src, &[frame()]) {
        assert_eq!((out[0].verdict, out[0].out_port), (Verdict::Pass, 6), "jit {jit}: {err}");
    }
}

/// Ways to repeat work without a loop keyword of one's own: recursion through `pcall`, error
/// handlers, coroutines, iterators, metamethods, library callbacks. Each ends as a runaway.
#[test]
fn repetition_without_loop_keywords_is_bounded() {
    let bodies = [
        "local function f() pcall(f) pcall(f) end f()",
        "xpcall(function() while true do end end, function() while true do end end) while true do end",
        "local co = coroutine.wrap(function() while true do coroutine.yield() end end) while true do co() end",
        "local function g() coroutine.wrap(g)() end g()",
        "for _ in function() return 1 end do end",
        "local t = setmetatable({}, {__index = function(t, k) return t[k + 1] end}) local _ = t[1]",
        "local t = {} for i = 1, 200 do t[i] = i end while true do table.sort(t, function(a, b) return a > b end) end",
        "local mt = {} mt.__add = function(a, b) return a + b end local x = setmetatable({}, mt) local _ = x + 1",
        "local s = tostring(setmetatable({}, {__tostring = function(t) return tostring(t) end}))",
    ];
    for body in bodies {
        for jit in [true, false] {
            let rt = LuaRuntime::new(1, LuaConfig { max_steps: 20_000, ..LuaConfig::default() });
            let w = Worker::new();
            let src = format!("return function(pkt) {body}\npkt:forward(2) end");
            let def = compile_with(&rt, &src, jit);
            let stage = rt.stage(def.clone());
            let out = w.run(stage.as_ref(), &[frame()], 0);
            assert_eq!(
                out[0].verdict,
                Verdict::Drop,
                "{body:?} (jit {jit}): {:?}",
                def.last_error()
            );
            let err = def.last_error().unwrap_or_default();
            assert!(
                def.runaways.load(Ordering::Relaxed) == 1 || err.contains("stack overflow"),
                "{body:?} (jit {jit}): {err}"
            );
        }
    }
}

/// Library functions pay steps for the data they make or move: a few thousand calls on large
/// values exhaust a budget their iteration count alone would not.
#[test]
fn library_work_is_charged_to_the_step_budget() {
    let bodies = [
        "for i = 1, 2000 do local s = string.rep('x', 2^20) end",
        "local big = ('x'):rep(2^20) for i = 1, 2000 do local s = big:upper() end",
        "local big = ('x'):rep(2^20) for i = 1, 2000 do local s = big:sub(2) end",
        "local big = ('x'):rep(2^20) for i = 1, 2000 do local s = string.format('%s', big) end",
        "local big = ('1'):rep(2^20) for i = 1, 2000 do local s = tonumber(big) end",
        "local t = {} for i = 1, 50000 do t[i] = 'x' end for i = 1, 2000 do local s = table.concat(t) end",
        "local t = {} for i = 1, 50000 do t[i] = i end for i = 1, 2000 do table.insert(t, 1, i) end",
        "local t = {} for i = 1, 50000 do t[i] = i end for i = 1, 2000 do table.remove(t, 1) end",
        "local t = {} for i = 1, 50000 do t[i] = i end for i = 1, 2000 do table.sort(t) end",
        "local t = {} for i = 1, 50000 do t[i] = i end for i = 1, 2000 do local m = table.maxn(t) end",
        "local t = {} for i = 1, 7000 do t[i] = i end for i = 1, 2000 do local a = select('#', unpack(t)) end",
        "local big = ('x'):rep(7000) for i = 1, 2000 do local a = select('#', big:byte(1, -1)) end",
        "for i = 1, 2000 do local a = select('#', unpack({}, 1, 7000)) end",
    ];
    for body in bodies {
        let rt = LuaRuntime::new(1, LuaConfig { max_steps: 150_000, ..LuaConfig::default() });
        let w = Worker::new();
        let src = format!("return function(pkt) {body}\npkt:forward(2) end");
        let def = compile_with(&rt, &src, true);
        let stage = rt.stage(def.clone());
        let out = w.run(stage.as_ref(), &[frame()], 0);
        assert_eq!(out[0].verdict, Verdict::Drop, "{body:?} was not charged");
        assert_eq!(def.runaways.load(Ordering::Relaxed), 1, "{body:?}: {:?}", def.last_error());
    }
}

/// The charged wrappers still do what the library functions do.
#[test]
fn charged_library_functions_keep_their_results() {
    let src = r##"
        return function(pkt)
          local s = "Hello, World"
          assert(s:sub(1, 5) == "Hello" and s:sub(-5) == "World" and string.sub(s, 8, -1) == "World")
          assert(s:upper() == "HELLO, WORLD" and s:lower() == "hello, world" and ("abc"):reverse() == "cba")
          assert(string.format("%d-%s-%5.2f", 7, "x", 1.5) == "7-x- 1.50")
          assert(s:byte() == 72 and s:byte(2) == 101 and select("#", s:byte(1, -1)) == 12)
          assert(select(3, s:byte(-3, -1)) == 100 and select("#", s:byte(5, 2)) == 0)
          assert(string.char(72, 105) == "Hi" and string.char() == "")
          assert(string.rep("ab", 3, ",") == "ab,ab,ab" and string.rep("x", "3") == "xxx" and string.rep("x", 0) == "")
          assert(string.rep(12, 2) == "1212" and string.len(s) == 12)
          local t = {3, 1, 2}
          table.sort(t) assert(t[1] == 1 and t[3] == 3)
          table.sort(t, function(a, b) return a > b end) assert(t[1] == 3)
          table.insert(t, 4) table.insert(t, 1, 0) assert(#t == 5 and t[1] == 0 and t[5] == 4)
          assert(table.remove(t) == 4 and table.remove(t, 1) == 0 and #t == 3)
          assert(table.concat({1, 2, 3}, "-") == "1-2-3" and table.concat({1, 2, 3}, "", 2, 3) == "23")
          assert(table.maxn({[1] = 1, [7] = 1, x = 1}) == 7 and table.maxn({}) == 0)
          local a, b, c = unpack({1, 2, 3}) assert(a == 1 and c == 3)
          assert(select("#", unpack({1, 2, 3}, 2)) == 2 and unpack({}, 1, 0) == nil)
          assert(tonumber("0x10") == 16 and tonumber("z", 36) == 35 and tonumber("x") == nil and tonumber(5) == 5)
          pkt:forward(8)
        end
    "##;
    for (jit, out, err) in run_both(src, &[frame()]) {
        assert_eq!((out[0].verdict, out[0].out_port), (Verdict::Pass, 8), "jit {jit}: {err}");
    }
}

/// Loop text inside strings and comments is data: the instrumenter leaves it as it is.
#[test]
fn loops_in_strings_and_comments_are_left_alone() {
    let src = "local a, b = 'while true do end', [==[\rrepeat until false ]] ::x:: goto x]==]\n\
               local c = \"function() do end\\z\r\n   \" -- while true do end\r\
               return function(pkt) --[[ for i = 1, 1e9 do end ]] pkt:setMark(#a * 1000000 + #b * 1000 + #c) end";
    for (jit, out, err) in run_both(src, &[frame()]) {
        assert_eq!(out[0].user, 17_000_000 + 34_000 + 17, "jit {jit}: {err}");
    }
}

/// The lexer against LuaJIT itself: sources made of pairs of lexically tricky fragments.
/// Whatever LuaJIT's parser accepts must instrument and compile (a lexer disagreement shows up
/// as a lexer error, an instrumented text that no longer parses, or an unchecked loop in the
/// bytecode); what it refuses is a syntax error.
#[test]
fn tricky_fragment_pairs_compile_whenever_luajit_accepts_them() {
    let fragments = [
        "-- c\r",
        "-- c\n",
        "-- c\r\n",
        "-- c\n\r",
        "--[[ ]]",
        "--[==[ ]] ]=] ]==]",
        "--[ x\r",
        "--[=",
        "[[ do ]]",
        "[=[ ]] ]=]",
        "'a\\\rb'",
        "'a\\z \r\n b'",
        "\"\\x41\\u{48}\\065\"",
        "'it\\'s'",
        "0x1p4",
        "1e-3",
        "0x1e+1",
        "5ULL",
        ".5",
        "a..b",
        "...",
        "::l::",
        "goto l",
        "while x do",
        "repeat",
        "until x",
        "for i = 1, 2 do",
        "for k in pairs(t) do",
        "end",
        "function f(a)",
        "local function g(...)",
        "return",
        "x = 1",
        "(",
        ")",
        "\r",
        "\n",
        "do",
        "doé",
        "#",
        "[",
        "]",
        "=",
        "==",
        "~=",
        ";",
        "é",
    ];
    let rt = LuaRuntime::new(1, LuaConfig { max_steps: 1000, ..LuaConfig::default() });
    let mut accepted = 0;
    for a in fragments {
        for b in fragments {
            let src = format!("local t, x = {{}}, false {a} {b} return function(pkt) end");
            match rt.compile(src.as_bytes(), "pair", FunctionOpts::default(), None) {
                Ok(_) => accepted += 1,
                Err(
                    hotplane_lua::CompileError::Syntax(_) | hotplane_lua::CompileError::Init(_),
                ) => {}
                Err(e) => panic!("{src:?}: LuaJIT accepts it but {e}"),
            }
        }
    }
    // The pairs exercise the lexer, not only the syntax check.
    assert!(accepted > 150, "only {accepted} pairs compiled");
}

/// Found by the fuzzer: LuaJIT takes `goto` as a name where it is not a goto statement, and the
/// check inserted before it broke the text (a refusal of a valid function).
#[test]
fn goto_used_as_a_name_compiles() {
    let rt = LuaRuntime::new(1, LuaConfig { max_steps: 1000, ..LuaConfig::default() });
    let w = Worker::new();
    let src = "local goto = 3 local t = {goto = goto}\n\
               return function(pkt) -- ended by CR\rwhile goto do goto = false end pkt:setMark(t.goto) end";
    let def = rt.compile(src.as_bytes(), "g", FunctionOpts::default(), None).unwrap();
    let stage = rt.stage(def.clone());
    assert_eq!(w.run(stage.as_ref(), &[frame()], 0)[0].user, 3, "{:?}", def.last_error());
}
