//! Executable memory for JIT code without a system call per program.
//!
//! Changing a page from writable to executable (`mprotect`) makes the kernel flush the TLBs
//! of every core running this process: an interrupt to each busy worker, tens of
//! microseconds in a virtual machine, on every update. Instead, code lives in chunks of a
//! memory file mapped twice: a writable view the compiler copies code into, and an
//! executable view the workers run. No page is ever both writable and executable through one
//! mapping, and after a chunk is mapped, loading a program costs no system call at all (the
//! kernel's BPF JIT does the same with its `bpf_prog_pack` and `text_poke`).
//!
//! Space is bump-allocated; a chunk whose programs have all been dropped (after their grace
//! period) is reused from its start.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Bytes per chunk (programs larger than this get a chunk of their own).
const CHUNK_BYTES: usize = 2 << 20;
/// Code alignment (a cache line).
const ALIGN: usize = 64;

pub(crate) struct Chunk {
    rw: *mut u8,
    rx: *mut u8,
    size: usize,
    /// Programs still alive in this chunk.
    live: AtomicUsize,
}

// SAFETY: the pointers are owned mappings; writes through `rw` happen under the arena lock
// into space no one else uses, and `rx` is only read/executed.
unsafe impl Send for Chunk {}
// SAFETY: as above.
unsafe impl Sync for Chunk {}

/// Executable memory the system would not give.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExecMemoryError {
    #[error("memfd_create: {0}")]
    MemfdCreate(std::io::Error),
    #[error("ftruncate: {0}")]
    Ftruncate(std::io::Error),
    #[error("mmap of the JIT arena: {0}")]
    ArenaMmap(std::io::Error),
    #[error("no JIT chunk")]
    NoChunk,
    #[error("mmap of {len} bytes failed: {source}")]
    Mmap { len: usize, source: std::io::Error },
    #[error("mprotect failed: {0}")]
    Mprotect(std::io::Error),
}

impl Chunk {
    fn new(size: usize) -> Result<Chunk, ExecMemoryError> {
        let size = size.div_ceil(4096) * 4096;
        // SAFETY: memfd_create takes a NUL-terminated name and flags; it creates a new file.
        let fd = unsafe { libc::memfd_create(c"hotplane-jit".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(ExecMemoryError::MemfdCreate(std::io::Error::last_os_error()));
        }
        let close = |fd| {
            // SAFETY: closing a descriptor we own; the mappings keep the memory alive.
            unsafe { libc::close(fd) };
        };
        // SAFETY: sizing the file we just created.
        if unsafe { libc::ftruncate(fd, size as libc::off_t) } != 0 {
            let e = std::io::Error::last_os_error();
            close(fd);
            return Err(ExecMemoryError::Ftruncate(e));
        }
        let map = |prot| {
            // SAFETY: a new shared mapping of our own file; no existing memory is affected.
            unsafe { libc::mmap(std::ptr::null_mut(), size, prot, libc::MAP_SHARED, fd, 0) }
        };
        let rw = map(libc::PROT_READ | libc::PROT_WRITE);
        let rx = map(libc::PROT_READ | libc::PROT_EXEC);
        close(fd);
        if rw == libc::MAP_FAILED || rx == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            for m in [rw, rx] {
                if m != libc::MAP_FAILED {
                    // SAFETY: unmapping a mapping made just above.
                    unsafe { libc::munmap(m, size) };
                }
            }
            return Err(ExecMemoryError::ArenaMmap(e));
        }
        // Pages are touched (and filled) only as code is placed: no 2 MB memset up front.
        Ok(Chunk { rw: rw as *mut u8, rx: rx as *mut u8, size, live: AtomicUsize::new(0) })
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: both views were mapped with `size` bytes; no program of this chunk is alive.
        unsafe {
            libc::munmap(self.rw as *mut libc::c_void, self.size);
            libc::munmap(self.rx as *mut libc::c_void, self.size);
        }
    }
}

struct State {
    /// The chunk being filled, and how far.
    current: Option<(Arc<Chunk>, usize)>,
    /// Chunks whose programs are all gone, ready to be refilled.
    spare: Vec<Arc<Chunk>>,
    /// Full chunks with programs still alive.
    full: Vec<Arc<Chunk>>,
}

static ARENA: OnceLock<Mutex<State>> = OnceLock::new();

fn arena() -> std::sync::MutexGuard<'static, State> {
    ARENA
        .get_or_init(|| Mutex::new(State { current: None, spare: Vec::new(), full: Vec::new() }))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Code placed in the arena; returned to it on drop.
pub(crate) struct Placed {
    pub chunk: Arc<Chunk>,
    pub offset: usize,
    pub len: usize,
}

impl Placed {
    pub fn ptr(&self) -> *const u8 {
        // SAFETY: offset + len <= chunk size (checked at placement).
        unsafe { self.chunk.rx.add(self.offset) }
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        if self.chunk.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The chunk's last program: if it is full, make it reusable.
            let mut st = arena();
            if let Some(i) = st.full.iter().position(|c| Arc::ptr_eq(c, &self.chunk)) {
                let c = st.full.swap_remove(i);
                if c.live.load(Ordering::Acquire) == 0 {
                    st.spare.push(c);
                } else {
                    st.full.push(c);
                }
            }
        }
    }
}

/// Copy `code` into executable memory.
pub(crate) fn place(code: &[u8]) -> Result<Placed, ExecMemoryError> {
    let need = code.len().div_ceil(ALIGN) * ALIGN;
    let mut st = arena();
    let fits =
        |c: &Option<(Arc<Chunk>, usize)>| c.as_ref().is_some_and(|(c, used)| used + need <= c.size);
    if !fits(&st.current) {
        if let Some((c, _)) = st.current.take() {
            if c.live.load(Ordering::Acquire) == 0 {
                st.spare.push(c);
            } else {
                st.full.push(c);
            }
        }
        let reuse = st.spare.iter().position(|c| c.size >= need);
        let chunk = match reuse {
            Some(i) => st.spare.swap_remove(i),
            None => Arc::new(Chunk::new(need.max(CHUNK_BYTES))?),
        };
        st.current = Some((chunk, 0));
    }
    let (chunk, used) = st.current.as_mut().ok_or(ExecMemoryError::NoChunk)?;
    let offset = *used;
    // SAFETY: [offset, offset + need) is inside the chunk and unused: no program runs there
    // (space is handed out once per fill, and a chunk is refilled only when all its programs
    // are gone).
    unsafe {
        std::ptr::copy_nonoverlapping(code.as_ptr(), chunk.rw.add(offset), code.len());
        // int3 in the padding, so that a stray jump past the code traps.
        std::ptr::write_bytes(chunk.rw.add(offset + code.len()), 0xcc, need - code.len());
    }
    *used += need;
    chunk.live.fetch_add(1, Ordering::AcqRel);
    Ok(Placed { chunk: chunk.clone(), offset, len: code.len() })
}
