//! The per-worker side: one Lua state per worker, flow-function stages that run a whole batch
//! in one call into Lua, error containment, and the watchdog.

use crate::compile::{lua_message, CompileError, Compiler, FunctionDef, FunctionOpts};
use crate::state::{
    arm_watchdog, disarm_watchdog, CallError, Desc, LuaState, GATE_CLOSED, GATE_OPEN, MAX_BATCH,
};
use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use hotplane_core::batch::{Batch, Mask};
use hotplane_core::{Meta, Stage, StageRef, Verdict, WorkerCx};
use mlua::RegistryKey;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

/// Runtime settings (`[lua]` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LuaConfig {
    /// Bytes each Lua state may allocate.
    pub memory_limit: usize,
    /// Steps (loop iterations plus function calls) one packet may take in a flow function.
    pub max_steps: u32,
    /// A call into Lua running longer than this is stopped by the watchdog (at its next step
    /// check, or its next interpreted instruction).
    pub watchdog_ms: u64,
    /// What happens to a packet whose function raised an error or ran away.
    pub on_error: Verdict,
}

impl Default for LuaConfig {
    fn default() -> Self {
        Self {
            memory_limit: 64 << 20,
            max_steps: 1_000_000,
            watchdog_ms: 50,
            on_error: Verdict::Drop,
        }
    }
}

/// Runtime-wide counters.
#[derive(Default)]
pub struct LuaStats {
    pub compiled: AtomicU64,
    pub compile_errors: AtomicU64,
    pub runtime_errors: AtomicU64,
    pub runaways: AtomicU64,
    pub watchdog_fired: AtomicU64,
    pub states_created: AtomicU64,
    pub states_replaced: AtomicU64,
    /// Batches a worker could not run because another thread held its state (misuse).
    pub busy: AtomicU64,
}

struct WorkerLua {
    state: LuaState,
    loaded: HashMap<u64, RegistryKey>,
    /// The last function called and its driver's registry reference: most batches of a
    /// worker run the same few functions, so this skips the map.
    last: Option<(u64, std::ffi::c_int)>,
    opt_level: u8,
}

impl WorkerLua {
    fn new(state: LuaState) -> Self {
        Self { state, loaded: HashMap::new(), last: None, opt_level: 3 }
    }

    fn forget(&mut self, uid: u64) {
        if let Some(k) = self.loaded.remove(&uid) {
            let _ = self.state.lua().remove_registry_value(k);
        }
        if self.last.is_some_and(|(u, _)| u == uid) {
            self.last = None;
        }
    }
}

/// What each worker shares with the control thread.
struct WorkerSlot {
    cell: Mutex<Option<WorkerLua>>,
    /// A ready state for when the current one must be thrown away (prepared off the fast path).
    spare: ArrayQueue<LuaState>,
    /// Functions whose stages were dropped: their instances can go.
    retired: ArrayQueue<u64>,
    /// The state's `lua_State`, for the watchdog (null while there is none).
    raw: AtomicPtr<mlua::ffi::lua_State>,
    /// The state's watchdog gate (null while there is none); same lifetime rules as `raw`.
    gate: AtomicPtr<AtomicI32>,
    /// `now_ns` when the current call into Lua began, 0 outside Lua.
    in_lua_since: AtomicU64,
    armed: AtomicBool,
    arming: AtomicBool,
}

impl WorkerSlot {
    fn new() -> Self {
        Self {
            cell: Mutex::new(None),
            spare: ArrayQueue::new(1),
            retired: ArrayQueue::new(1024),
            raw: AtomicPtr::new(std::ptr::null_mut()),
            gate: AtomicPtr::new(std::ptr::null_mut()),
            in_lua_since: AtomicU64::new(0),
            armed: AtomicBool::new(false),
            arming: AtomicBool::new(false),
        }
    }
}

/// Lua for a whole data plane: the compiler, one state per worker, the counters.
pub struct LuaRuntime {
    cfg: LuaConfig,
    slots: Box<[CachePadded<WorkerSlot>]>,
    compiler: Mutex<Option<Compiler>>,
    /// States thrown away by workers, dropped by the control thread.
    graveyard: ArrayQueue<LuaState>,
    /// Newest function per target, the fallback for the next one installed there.
    latest: Mutex<HashMap<String, Arc<FunctionDef>>>,
    /// Every live stage this runtime built, by the address of its data: how the runtime
    /// recognises its own functions among the stages installed anywhere, by identity alone.
    /// The `Weak` keeps the allocation (not the stage), so while an entry is here no other
    /// stage can have its address.
    functions: Mutex<HashMap<usize, Weak<LuaFunction>>>,
    in_use: AtomicBool,
    pub stats: LuaStats,
}

impl LuaRuntime {
    pub fn new(workers: usize, cfg: LuaConfig) -> Arc<Self> {
        Arc::new(Self {
            cfg,
            slots: (0..workers.max(1)).map(|_| CachePadded::new(WorkerSlot::new())).collect(),
            compiler: Mutex::new(None),
            graveyard: ArrayQueue::new(64),
            latest: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            in_use: AtomicBool::new(false),
            stats: LuaStats::default(),
        })
    }

    pub fn config(&self) -> &LuaConfig {
        &self.cfg
    }

    fn new_state(&self) -> Result<LuaState, crate::state::StateError> {
        self.stats.states_created.fetch_add(1, Ordering::Relaxed);
        LuaState::new(self.cfg.memory_limit, self.cfg.max_steps)
    }

    /// Compile `source` into a function (control thread). `target` names where it will be
    /// installed: the function installed there before becomes its fallback.
    pub fn compile(
        &self,
        source: &[u8],
        name: &str,
        opts: FunctionOpts,
        target: Option<&str>,
    ) -> Result<Arc<FunctionDef>, CompileError> {
        let previous = target.and_then(|t| self.latest_at(t));
        let mut guard = self.compiler.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            let trial_limit = std::time::Duration::from_millis(self.cfg.watchdog_ms);
            *guard = Some(Compiler::new(self.cfg.memory_limit, self.cfg.max_steps, trial_limit)?);
        }
        let compiler = guard.as_mut().expect("just created");
        let r = compiler.compile(source, name, opts, previous);
        drop(guard);
        match r {
            Ok(def) => {
                self.stats.compiled.fetch_add(1, Ordering::Relaxed);
                self.in_use.store(true, Ordering::Relaxed);
                // Spares come later, from `maintain`: the first update should not wait for them.
                self.prepare_states_with(false);
                Ok(Arc::new(def))
            }
            Err(e) => {
                self.stats.compile_errors.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// The stage that runs `def` on whichever worker calls it.
    pub fn stage(self: &Arc<Self>, def: Arc<FunctionDef>) -> StageRef {
        let function = Arc::new(LuaFunction { rt: self.clone(), def });
        let mut known = self.functions.lock().unwrap_or_else(|e| e.into_inner());
        // Stages are built on the control thread, a few at a time: forgetting the dropped ones
        // here keeps the map as small as the set of live functions.
        known.retain(|_, f| f.strong_count() > 0);
        known.insert(address_of(&*function), Arc::downgrade(&function));
        function
    }

    /// The definition behind `stage` if it is a function this runtime built, else `None`.
    pub fn function_of(&self, stage: &StageRef) -> Option<Arc<FunctionDef>> {
        let known = self.functions.lock().unwrap_or_else(|e| e.into_inner());
        let function = known.get(&address_of(&**stage))?.upgrade()?;
        Some(function.def.clone())
    }

    /// Record what a publish put at `target`: a function of this runtime learns where it runs
    /// (its error reports name it, and the next function installed there falls back to it if
    /// that one runs away); anything else there (another kind's program, or nothing) makes
    /// the target forget its Lua function.
    pub fn published(&self, target: &str, program: Option<&StageRef>, version: u64) {
        match program.and_then(|p| self.function_of(p)) {
            Some(def) => self.installed(target, &def, version),
            None => self.removed(target),
        }
    }

    /// Record that `def` now runs at `target` as slot version `version`.
    pub fn installed(&self, target: &str, def: &Arc<FunctionDef>, version: u64) {
        def.set_placed(target, version);
        self.latest.lock().unwrap_or_else(|e| e.into_inner()).insert(target.into(), def.clone());
    }

    /// Forget the function at `target` (it was removed).
    pub fn removed(&self, target: &str) {
        self.latest.lock().unwrap_or_else(|e| e.into_inner()).remove(target);
    }

    pub fn latest_at(&self, target: &str) -> Option<Arc<FunctionDef>> {
        self.latest.lock().unwrap_or_else(|e| e.into_inner()).get(target).cloned()
    }

    /// Functions currently installed, by target.
    pub fn installed_functions(&self) -> Vec<(String, Arc<FunctionDef>)> {
        let m = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = m.iter().map(|(t, d)| (t.clone(), d.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Make sure every worker has a state to take (control thread; creating one takes about a
    /// millisecond, which a worker should not spend). States are handed over through the
    /// worker's spare queue: the control thread never locks a worker's state, so the worker's
    /// `try_lock` cannot fail because of it. With `spares`, workers that already run a state
    /// get a spare too.
    pub fn prepare_states_with(&self, spares: bool) {
        for slot in self.slots.iter() {
            let has_state = !slot.raw.load(Ordering::Acquire).is_null();
            if (spares || !has_state) && slot.spare.is_empty() {
                match self.new_state() {
                    Ok(s) => {
                        let _ = slot.spare.push(s);
                    }
                    Err(e) => tracing::error!("{e}"),
                }
            }
        }
    }

    /// Give every worker a state and a spare.
    pub fn prepare_states(&self) {
        self.prepare_states_with(true);
    }

    /// Periodic work for a caller with one maintenance thread: `housekeeping`, then `watchdog`.
    pub fn maintain(&self, now_ns: u64) {
        self.housekeeping();
        self.watchdog(now_ns);
    }

    /// Periodic control-thread work: spare states, and freeing dead ones.
    pub fn housekeeping(&self) {
        if !self.in_use.load(Ordering::Relaxed) {
            return;
        }
        while let Some(dead) = self.graveyard.pop() {
            drop(dead);
        }
        if self.slots.iter().any(|s| s.spare.is_empty()) {
            self.prepare_states();
        }
    }

    /// Stop every call into Lua that has run longer than `watchdog_ms`. Call it every few
    /// milliseconds from one thread only (the arming handshake assumes a single watchdog), one
    /// that nothing else keeps busy: the bound on a call is `watchdog_ms` plus this period.
    pub fn watchdog(&self, now_ns: u64) {
        if !self.in_use.load(Ordering::Relaxed) {
            return;
        }
        let limit = self.cfg.watchdog_ms.saturating_mul(1_000_000);
        for slot in self.slots.iter() {
            let since = slot.in_lua_since.load(Ordering::SeqCst);
            if since == 0
                || now_ns.saturating_sub(since) < limit
                || slot.armed.load(Ordering::SeqCst)
            {
                continue;
            }
            // Dekker-style with the worker (see `call_lua`): whichever of armed=true and
            // in_lua_since=0 comes first, neither the hook nor the closed gate outlives the call
            // it was meant for (the worker reopens the gate before its next call).
            slot.arming.store(true, Ordering::SeqCst);
            slot.armed.store(true, Ordering::SeqCst);
            if slot.in_lua_since.load(Ordering::SeqCst) == since {
                let l = slot.raw.load(Ordering::SeqCst);
                let gate = slot.gate.load(Ordering::SeqCst);
                if !l.is_null() && !gate.is_null() {
                    // SAFETY: the worker frees a state only after storing null in `raw` and
                    // `gate` and waiting for `arming` to clear, so both point into a live state.
                    // The hook stops interpreted code; the gate stops compiled code, whose step
                    // checks read it (LuaJIT calls no hook from a trace).
                    unsafe {
                        (*gate).store(GATE_CLOSED, Ordering::SeqCst);
                        arm_watchdog(l);
                    }
                    self.stats.watchdog_fired.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        "Lua watchdog: a flow function ran for more than {} ms",
                        self.cfg.watchdog_ms
                    );
                }
            }
            slot.arming.store(false, Ordering::SeqCst);
        }
    }

    /// Throw the worker's state away (after a runaway) and take the spare. The descriptors of
    /// the batch in flight move to the new state, so the rest of the batch can go on there.
    fn replace_state(&self, slot: &WorkerSlot, w: &mut Option<WorkerLua>) {
        slot.raw.store(std::ptr::null_mut(), Ordering::SeqCst);
        slot.gate.store(std::ptr::null_mut(), Ordering::SeqCst);
        while slot.arming.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
        let mut in_flight = None;
        if let Some(old) = w.take() {
            self.stats.states_replaced.fetch_add(1, Ordering::Relaxed);
            in_flight = Some(old.state.shared().descs);
            if let Err(state) = self.graveyard.push(old.state) {
                drop(state);
            }
        }
        self.install_spare(slot, w);
        if let (Some(descs), Some(new)) = (in_flight, w.as_mut()) {
            new.state.shared_mut().descs = descs;
        }
    }

    fn install_spare(&self, slot: &WorkerSlot, w: &mut Option<WorkerLua>) {
        let state = match slot.spare.pop() {
            Some(s) => s,
            // No control thread prepared one: build it here (slow, once).
            None => match self.new_state() {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!("{e}");
                    return;
                }
            },
        };
        slot.gate.store(state.gate().cast_mut(), Ordering::SeqCst);
        slot.raw.store(state.raw(), Ordering::SeqCst);
        *w = Some(WorkerLua::new(state));
    }

    /// Run `def` over the packets of `batch` in `sel`.
    fn run<P: Packets>(&self, def: &Arc<FunctionDef>, packets: &mut P, cx: &mut WorkerCx<'_>) {
        let n = packets.count();
        if n == 0 {
            return;
        }
        let Some(slot) = self.slots.get(cx.worker) else {
            self.stats.busy.fetch_add(1, Ordering::Relaxed);
            return packets.fail(self.cfg.on_error);
        };
        let Ok(mut cell) = slot.cell.try_lock() else {
            self.stats.busy.fetch_add(1, Ordering::Relaxed);
            return packets.fail(self.cfg.on_error);
        };
        while let Some(uid) = slot.retired.pop() {
            if let Some(w) = cell.as_mut() {
                w.forget(uid);
            }
        }
        if cell.is_none() {
            self.install_spare(slot, &mut cell);
        }
        let Some(w) = cell.as_mut() else { return packets.fail(self.cfg.on_error) };
        packets.fill(&mut w.state.shared_mut().descs);
        let mut start = 0;
        while start < n {
            let Some(d) = def.effective() else {
                // Ran away and nothing to fall back to.
                mark(&mut cell, start..n, self.cfg.on_error);
                break;
            };
            match self.call_lua(slot, &mut cell, d, start, n, cx) {
                Ok(()) => break,
                Err(next) => start = next,
            }
        }
        if let Some(w) = cell.as_ref() {
            packets.write_back(&w.state.shared().descs);
        }
        let pw = &def.per_worker[cx.worker.min(def.per_worker.len() - 1)];
        pw.packets.store(pw.packets.load(Ordering::Relaxed) + n as u64, Ordering::Relaxed);
        pw.batches.store(pw.batches.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// One call into Lua for packets `start..n` with `def`. On an error, returns where to go on.
    fn call_lua(
        &self,
        slot: &WorkerSlot,
        cell: &mut Option<WorkerLua>,
        def: &Arc<FunctionDef>,
        start: usize,
        n: usize,
        cx: &WorkerCx<'_>,
    ) -> Result<(), usize> {
        let Some(w) = cell.as_mut() else {
            mark(cell, start..n, self.cfg.on_error);
            return Ok(());
        };
        if w.last.is_none_or(|(u, _)| u != def.uid) && !w.loaded.contains_key(&def.uid) {
            let t0 = Instant::now();
            let name = format!("={}", def.name);
            w.state.shared_mut().fuel = 0;
            // The top level is watched like a call: it may run as long as the trial run did.
            slot.in_lua_since.store(cx.now_ns.max(1), Ordering::SeqCst);
            let loaded = w.state.instantiate(&def.bytecode, &name, def.opts.jit);
            leave_lua(slot, &w.state);
            match loaded {
                Ok(k) => {
                    w.loaded.insert(def.uid, k);
                    def.loads.fetch_add(1, Ordering::Relaxed);
                    def.load_ns_max.fetch_max(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
                Err(e) => {
                    // Its top level passed the trial run but fails here (memory, a runaway):
                    // retrying on every batch would cost a load each time, so it is condemned
                    // and the batch goes on with the function before it.
                    self.report_error(def, &lua_message(&e));
                    def.condemn();
                    if w.state.shared().fuel < 0 {
                        self.replace_state(slot, cell);
                    }
                    return Err(start);
                }
            }
        }
        let w = cell.as_mut().expect("checked above");
        if def.opts.jit && w.opt_level != def.opts.opt_level {
            w.state.set_opt_level(def.opts.opt_level);
            w.opt_level = def.opts.opt_level;
        }
        let driver = match w.last {
            Some((u, id)) if u == def.uid => id,
            _ => {
                let id = w.loaded.get(&def.uid).expect("loaded above").id();
                w.last = Some((def.uid, id));
                id
            }
        };
        slot.in_lua_since.store(cx.now_ns.max(1), Ordering::SeqCst);
        let r = w.state.call(driver, start, n);
        let watchdog = leave_lua(slot, &w.state);
        let cur = (w.state.shared_mut().cur.max(0) as usize).clamp(start, n.saturating_sub(1));
        match r {
            Ok(()) => Ok(()),
            Err(CallError::Error(msg)) if !watchdog => {
                w.state.shared_mut().descs[cur].verdict = self.cfg.on_error as u8;
                self.report_error(def, &msg);
                Err(cur + 1)
            }
            Err(CallError::Error(msg)) | Err(CallError::Runaway(msg)) => {
                w.state.shared_mut().descs[cur].verdict = self.cfg.on_error as u8;
                def.runaways.fetch_add(1, Ordering::Relaxed);
                self.stats.runaways.fetch_add(1, Ordering::Relaxed);
                def.record_error(&msg);
                def.condemn();
                tracing::warn!(function = %def.name, placed = ?def.placed(), "{msg}; falling back to the previous function and a fresh Lua state");
                self.replace_state(slot, cell);
                Err(cur + 1)
            }
        }
    }

    fn report_error(&self, def: &FunctionDef, msg: &str) {
        self.stats.runtime_errors.fetch_add(1, Ordering::Relaxed);
        def.record_error(msg);
        tracing::debug!(function = %def.name, placed = ?def.placed(), "Lua error: {msg}");
    }
}

/// The worker is out of Lua: if the watchdog stopped this call, wait until it is done arming
/// and reopen the gate and remove the hook, so the stop never reaches the next call (see
/// `maintain`). Returns whether the watchdog fired.
fn leave_lua(slot: &WorkerSlot, state: &LuaState) -> bool {
    slot.in_lua_since.store(0, Ordering::SeqCst);
    let watchdog = slot.armed.load(Ordering::SeqCst);
    if watchdog {
        while slot.arming.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
        disarm_watchdog(state.raw());
        // SAFETY: the gate lives as long as `state`.
        unsafe { (*state.gate()).store(GATE_OPEN, Ordering::SeqCst) };
        slot.armed.store(false, Ordering::SeqCst);
    }
    watchdog
}

fn mark(cell: &mut Option<WorkerLua>, range: std::ops::Range<usize>, v: Verdict) {
    if let Some(w) = cell.as_mut() {
        for d in &mut w.state.shared_mut().descs[range] {
            d.verdict = v as u8;
        }
    }
}

/// The packets one call into Lua describes: the selected packets of a batch, or one frame
/// another program hands over (`Stage::run_one`).
trait Packets {
    fn count(&self) -> usize;
    /// Describe the packets to Lua.
    fn fill(&mut self, descs: &mut [Desc; MAX_BATCH]);
    /// Apply what Lua decided.
    fn write_back(&mut self, descs: &[Desc; MAX_BATCH]);
    /// Give every packet `verdict` (the function could not run).
    fn fail(&mut self, verdict: Verdict);
}

fn desc(data: &mut [u8], cap: usize, m: &Meta) -> Desc {
    Desc {
        data: data.as_mut_ptr(),
        user: m.user,
        len: data.len() as u32,
        cap: cap as u32,
        flow_hash: m.flow_hash,
        in_port: m.in_port,
        out_port: m.out_port,
        l3: m.l3_off,
        l4: m.l4_off,
        payload: m.payload_off,
        layers: m.layers,
        verdict: m.verdict as u8,
    }
}

fn decided(d: &Desc, m: &mut Meta) {
    m.verdict = if d.verdict == Verdict::Drop as u8 { Verdict::Drop } else { Verdict::Pass };
    m.out_port = d.out_port;
    m.user = d.user;
}

impl Packets for (&mut Batch, Mask) {
    fn count(&self) -> usize {
        self.1.count() as usize
    }

    #[inline]
    fn fill(&mut self, descs: &mut [Desc; MAX_BATCH]) {
        let (batch, sel) = (&mut *self.0, self.1);
        let pkts = batch.as_mut_slice();
        for (d, i) in descs.iter_mut().zip(sel) {
            let cap = pkts[i].max_len();
            let (data, meta) = pkts[i].frame_mut();
            *d = desc(data, cap, meta);
        }
    }

    #[inline]
    fn write_back(&mut self, descs: &[Desc; MAX_BATCH]) {
        let (batch, sel) = (&mut *self.0, self.1);
        let pkts = batch.as_mut_slice();
        for (d, i) in descs.iter().zip(sel) {
            let p = &mut pkts[i];
            decided(d, &mut p.meta);
            if d.len as usize != p.len() {
                // setSize checked len <= cap; set_len checks again.
                let _ = p.set_len(d.len as usize);
            }
        }
    }

    fn fail(&mut self, verdict: Verdict) {
        let pkts = self.0.as_mut_slice();
        for i in self.1 {
            pkts[i].meta.verdict = verdict;
        }
    }
}

/// A caller's frame: Lua works on it in place. Its capacity is its length (the caller's
/// buffer cannot grow), so `setSize` may only shrink the packet Lua sees; the frame keeps
/// its length.
struct Frame<'a> {
    data: &'a mut [u8],
    meta: &'a mut Meta,
}

impl Packets for Frame<'_> {
    fn count(&self) -> usize {
        1
    }

    fn fill(&mut self, descs: &mut [Desc; MAX_BATCH]) {
        let cap = self.data.len();
        descs[0] = desc(self.data, cap, self.meta);
    }

    fn write_back(&mut self, descs: &[Desc; MAX_BATCH]) {
        decided(&descs[0], self.meta);
    }

    fn fail(&mut self, verdict: Verdict) {
        self.meta.verdict = verdict;
    }
}

/// A flow function (or a function at a pipeline position): the compiled definition plus the
/// runtime whose per-worker states run it.
pub struct LuaFunction {
    rt: Arc<LuaRuntime>,
    def: Arc<FunctionDef>,
}

impl LuaFunction {
    pub fn def(&self) -> &Arc<FunctionDef> {
        &self.def
    }
}

impl Stage for LuaFunction {
    fn name(&self) -> &str {
        &self.def.name
    }

    fn run(&self, batch: &mut Batch, sel: Mask, cx: &mut WorkerCx<'_>) {
        self.rt.run(&self.def, &mut (batch, sel), cx);
    }

    /// On the caller's frame in place (a P4 program asking for the flow function): no copy.
    fn run_one(&self, frame: &mut [u8], meta: &mut Meta, cx: &mut WorkerCx<'_>) -> u64 {
        meta.verdict = Verdict::Pass;
        self.rt.run(&self.def, &mut Frame { data: frame, meta }, cx);
        hotplane_core::xdp::action_of(meta.verdict)
    }

    fn describe(&self) -> String {
        self.def.describe()
    }
}

/// A stage's identity: the address of its data (the same through `Arc<LuaFunction>` and
/// `Arc<dyn Stage>`, whose vtable part is dropped here).
fn address_of<S: Stage + ?Sized>(stage: &S) -> usize {
    stage as *const S as *const () as usize
}

impl Drop for LuaFunction {
    fn drop(&mut self) {
        for slot in self.rt.slots.iter() {
            let _ = slot.retired.push(self.def.uid);
        }
    }
}
