//! A last-level-cache miss counter for the calling thread through `perf_event_open`, where the
//! kernel and the (virtual) CPU provide one; benchmarks report `null` otherwise.

/// PERF_TYPE_HARDWARE / PERF_COUNT_HW_CACHE_MISSES (last-level cache misses).
const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_COUNT_HW_CACHE_MISSES: u64 = 3;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const PERF_EVENT_IOC_RESET: libc::c_ulong = 0x2403;

pub struct LlcMisses {
    fd: libc::c_int,
}

impl LlcMisses {
    /// Open a disabled counter for this thread, user space only. `Err` says why not.
    pub fn open() -> Result<Self, String> {
        // struct perf_event_attr, version 5 layout (112 bytes), as words: type and size share
        // the first; config is the second; the flag bits are the sixth.
        let mut attr = [0u64; 14];
        attr[0] = PERF_TYPE_HARDWARE as u64 | (112u64 << 32);
        attr[1] = PERF_COUNT_HW_CACHE_MISSES;
        // disabled (bit 0), exclude_kernel (bit 5), exclude_hv (bit 6).
        attr[5] = 1 | 1 << 5 | 1 << 6;
        // SAFETY: `attr` is a valid, zero-padded perf_event_attr of the size it declares; the
        // syscall reads it and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, 0u64) }
            as libc::c_int;
        if fd < 0 {
            return Err(format!("perf_event_open: {}", std::io::Error::last_os_error()));
        }
        Ok(Self { fd })
    }

    pub fn start(&self) {
        // SAFETY: ioctls on our own perf fd; no memory is passed.
        unsafe {
            libc::ioctl(self.fd, PERF_EVENT_IOC_RESET, 0);
            libc::ioctl(self.fd, PERF_EVENT_IOC_ENABLE, 0);
        }
    }

    /// Stop and read the count.
    pub fn stop(&self) -> Option<u64> {
        let mut v = 0u64;
        // SAFETY: as above; `read` writes at most 8 bytes into `v`.
        let n = unsafe {
            libc::ioctl(self.fd, PERF_EVENT_IOC_DISABLE, 0);
            libc::read(self.fd, &mut v as *mut u64 as *mut libc::c_void, 8)
        };
        (n == 8).then_some(v)
    }
}

impl Drop for LlcMisses {
    fn drop(&mut self) {
        // SAFETY: closing the fd we opened, once.
        unsafe { libc::close(self.fd) };
    }
}
