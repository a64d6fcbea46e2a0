//! The Linux kernel as a reference: load the same program into the kernel with `bpf(2)` and
//! run it with `BPF_PROG_TEST_RUN`, for differential tests and for benchmarks. Needs root (or
//! CAP_BPF + CAP_PERFMON) and a kernel with BPF.

use crate::insn::{pseudo, Insn};
use crate::maps::{round8, MapKind};
use crate::program::ProgramSpec;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_LOOKUP_ELEM: u32 = 1;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_PROG_LOAD: u32 = 5;
const BPF_PROG_TEST_RUN: u32 = 10;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_F_NO_PREALLOC: u32 = 1;

#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapElem {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct TestRun {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
}

fn bpf<T>(cmd: u32, attr: &mut T) -> std::io::Result<i64> {
    // SAFETY: `attr` is a live, properly sized `union bpf_attr` prefix for `cmd`; the kernel
    // reads and writes at most size_of::<T>() bytes of it.
    let r = unsafe {
        libc::syscall(libc::SYS_bpf, cmd as libc::c_long, attr as *mut T, std::mem::size_of::<T>())
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn name16(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    for (d, c) in
        n.iter_mut().zip(s.bytes().filter(|c| c.is_ascii_alphanumeric() || *c == b'_').take(15))
    {
        *d = c;
    }
    n
}

/// Possible CPUs (per-CPU map values have one slot per possible CPU).
pub fn possible_cpus() -> usize {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    text.trim()
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap_or(0) + 1 - a.parse::<usize>().unwrap_or(0),
            None => usize::from(!r.is_empty()),
        })
        .sum::<usize>()
        .max(1)
}

/// One kernel map.
pub struct KernelMap {
    pub fd: OwnedFd,
    pub name: String,
    pub kind: MapKind,
    pub value_size: u32,
}

impl KernelMap {
    fn value_bytes(&self) -> usize {
        if self.kind.per_cpu() {
            round8(self.value_size) * possible_cpus()
        } else {
            self.value_size as usize
        }
    }

    /// Update; for per-CPU maps `value` is written to every CPU.
    pub fn update(&self, key: &[u8], value: &[u8]) -> std::io::Result<()> {
        let mut v = value.to_vec();
        if self.kind.per_cpu() {
            let stride = round8(self.value_size);
            v = vec![0; self.value_bytes()];
            for c in 0..possible_cpus() {
                v[c * stride..c * stride + value.len()].copy_from_slice(value);
            }
        }
        let mut a = MapElem {
            map_fd: self.fd.as_raw_fd() as u32,
            key: key.as_ptr() as u64,
            value: v.as_ptr() as u64,
            ..Default::default()
        };
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
    }

    /// The value(s) under `key`: one per possible CPU for per-CPU maps.
    pub fn lookup(&self, key: &[u8]) -> Option<Vec<Vec<u8>>> {
        let mut v = vec![0u8; self.value_bytes()];
        let mut a = MapElem {
            map_fd: self.fd.as_raw_fd() as u32,
            key: key.as_ptr() as u64,
            value: v.as_mut_ptr() as u64,
            ..Default::default()
        };
        bpf(BPF_MAP_LOOKUP_ELEM, &mut a).ok()?;
        if self.kind.per_cpu() {
            let stride = round8(self.value_size);
            Some(v.chunks(stride).map(|c| c[..self.value_size as usize].to_vec()).collect())
        } else {
            Some(vec![v])
        }
    }
}

/// A program loaded into the kernel, with its maps.
pub struct KernelProgram {
    pub fd: OwnedFd,
    pub maps: Vec<KernelMap>,
}

/// The outcome of one `BPF_PROG_TEST_RUN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRunResult {
    pub retval: u32,
    pub data: Vec<u8>,
    /// Mean nanoseconds per run, as the kernel measured it.
    pub duration_ns: u32,
}

/// What the kernel refused (the `bpf(2)` error, and for a program load the verifier log's tail).
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("map `{map}`: BPF_MAP_CREATE: {source}")]
    MapCreate { map: String, source: std::io::Error },
    #[error("map `{map}`: initial value: {source}")]
    MapInit { map: String, source: std::io::Error },
    #[error("instruction {pc}: map {map} does not exist")]
    NoSuchMap { pc: usize, map: i32 },
    #[error("BPF_PROG_LOAD: {source}\n{log}")]
    ProgLoad { source: std::io::Error, log: String },
    #[error("BPF_PROG_TEST_RUN: {0}")]
    TestRun(std::io::Error),
}

impl KernelProgram {
    /// Create the maps, link them into the instructions and load an XDP program.
    pub fn load_xdp(spec: &ProgramSpec) -> Result<Self, KernelError> {
        let mut maps = Vec::new();
        for m in &spec.maps {
            let mut a = MapCreate {
                map_type: m.def.kind as u32,
                key_size: m.def.key_size,
                value_size: m.def.value_size,
                max_entries: m.def.max_entries,
                map_flags: if m.def.kind == MapKind::LpmTrie { BPF_F_NO_PREALLOC } else { 0 },
                map_name: name16(m.name.rsplit('/').next().unwrap_or("")),
                ..Default::default()
            };
            let fd = bpf(BPF_MAP_CREATE, &mut a)
                .map_err(|source| KernelError::MapCreate { map: m.name.clone(), source })?;
            // SAFETY: the kernel returned a new file descriptor that nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
            let km = KernelMap {
                fd,
                name: m.name.clone(),
                kind: m.def.kind,
                value_size: m.def.value_size,
            };
            if let Some(init) = &m.init {
                km.update(&0u32.to_ne_bytes(), init)
                    .map_err(|source| KernelError::MapInit { map: m.name.clone(), source })?;
            }
            maps.push(km);
        }
        let mut insns: Vec<Insn> = spec.insns.clone();
        let mut pc = 0;
        while pc < insns.len() {
            let i = insns[pc];
            if i.is_lddw() && (i.src == pseudo::MAP_FD || i.src == pseudo::MAP_VALUE) {
                let m =
                    maps.get(i.imm as usize).ok_or(KernelError::NoSuchMap { pc, map: i.imm })?;
                insns[pc].imm = m.fd.as_raw_fd();
            }
            pc += if i.is_lddw() { 2 } else { 1 };
        }
        let words: Vec<u64> = insns.iter().map(|i| i.to_u64()).collect();
        let license = c"GPL";
        let mut log = vec![0u8; 1 << 20];
        let mut a = ProgLoad {
            prog_type: BPF_PROG_TYPE_XDP,
            insn_cnt: words.len() as u32,
            insns: words.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: 1,
            log_size: log.len() as u32,
            log_buf: log.as_mut_ptr() as u64,
            prog_name: name16(&spec.name),
            ..Default::default()
        };
        let fd = match bpf(BPF_PROG_LOAD, &mut a) {
            Ok(fd) => fd,
            Err(e) => {
                let text =
                    String::from_utf8_lossy(&log[..log.iter().position(|b| *b == 0).unwrap_or(0)])
                        .into_owned();
                let tail: Vec<&str> = text.lines().rev().take(8).collect();
                let log = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
                return Err(KernelError::ProgLoad { source: e, log });
            }
        };
        // SAFETY: a new file descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        Ok(Self { fd, maps })
    }

    /// Run the program `repeat` times on `data` (the packet as it is after the last run).
    pub fn test_run(&self, data: &[u8], repeat: u32) -> Result<TestRunResult, KernelError> {
        let mut out = vec![0u8; data.len() + 512];
        let mut a = TestRun {
            prog_fd: self.fd.as_raw_fd() as u32,
            data_size_in: data.len() as u32,
            data_size_out: out.len() as u32,
            data_in: data.as_ptr() as u64,
            data_out: out.as_mut_ptr() as u64,
            repeat,
            ..Default::default()
        };
        bpf(BPF_PROG_TEST_RUN, &mut a).map_err(KernelError::TestRun)?;
        out.truncate(a.data_size_out as usize);
        Ok(TestRunResult { retval: a.retval, data: out, duration_ns: a.duration })
    }

    pub fn map(&self, name: &str) -> Option<&KernelMap> {
        self.maps.iter().find(|m| m.name == name)
    }
}

/// Whether this process may load XDP programs (checked by loading a trivial one).
pub fn available() -> Result<(), KernelError> {
    let spec = ProgramSpec::bytecode(
        "probe",
        vec![
            Insn::new(crate::insn::op::MOV64_IMM, 0, 0, 0, 2),
            Insn::new(crate::insn::op::EXIT, 0, 0, 0, 0),
        ],
    );
    KernelProgram::load_xdp(&spec).map(|_| ())
}
