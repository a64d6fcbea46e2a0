//! XDP semantics: return codes, and the helpers an XDP program may call, under their Linux
//! numbers so that objects built against `bpf_helper_defs.h` run unchanged.
//!
//! Helpers are `extern "C"` functions with the eBPF calling convention (r1..r5 in, r0 out), so
//! the JIT calls them directly. State that Linux keeps per CPU (the redirect target, the
//! random generator, the trace_printk budget) is per worker thread here.

use crate::ctx::XdpCtx;
use crate::helpers::{Arg, Helper, Helpers, Ret};
use crate::maps::{current_cpu, errno, Map, MapKind};
use hotplane_core::Packet;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// XDP return codes (defined in `hotplane_core::xdp`, shared with every program kind).
pub use hotplane_core::xdp::{XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_REDIRECT, XDP_TX};

/// Linux helper numbers.
pub mod id {
    pub const MAP_LOOKUP_ELEM: u32 = 1;
    pub const MAP_UPDATE_ELEM: u32 = 2;
    pub const MAP_DELETE_ELEM: u32 = 3;
    pub const KTIME_GET_NS: u32 = 5;
    pub const TRACE_PRINTK: u32 = 6;
    pub const GET_PRANDOM_U32: u32 = 7;
    pub const GET_SMP_PROCESSOR_ID: u32 = 8;
    pub const REDIRECT: u32 = 23;
    pub const CSUM_DIFF: u32 = 28;
    pub const XDP_ADJUST_HEAD: u32 = 44;
    pub const REDIRECT_MAP: u32 = 51;
    pub const XDP_ADJUST_TAIL: u32 = 65;
    pub const KTIME_GET_BOOT_NS: u32 = 125;
    pub const XDP_GET_BUFF_LEN: u32 = 188;
}

/// No redirect pending.
pub const NO_REDIRECT: u32 = u32::MAX;

thread_local! {
    /// Port chosen by the last successful `bpf_redirect`/`bpf_redirect_map` of this worker.
    static REDIRECT_TO: Cell<u32> = const { Cell::new(NO_REDIRECT) };
    static RANDOM: Cell<u64> = const { Cell::new(0) };
    /// trace_printk lines left in the current second, and which second.
    static TRACE_BUDGET: Cell<(u64, u32)> = const { Cell::new((0, 0)) };
}

/// trace_printk lines per worker per second; the rest are counted in [`TRACE_SUPPRESSED`].
pub const TRACE_LINES_PER_SEC: u32 = 20;
/// trace_printk lines suppressed by the rate limit.
pub static TRACE_SUPPRESSED: AtomicU64 = AtomicU64::new(0);
/// trace_printk lines written.
pub static TRACE_LINES: AtomicU64 = AtomicU64::new(0);

/// Take the redirect target the program set (and clear it for the next packet).
pub fn take_redirect() -> Option<u32> {
    let t = REDIRECT_TO.with(|c| c.replace(NO_REDIRECT));
    (t != NO_REDIRECT).then_some(t)
}

unsafe extern "C" fn map_lookup_elem(map: u64, key: u64, _: u64, _: u64, _: u64) -> u64 {
    // SAFETY: the verifier proved r1 is a map of this program (the loader put the address of a
    // live `Map` there) and r2 points to key_size readable bytes.
    unsafe { (*(map as *const Map)).lookup_raw(key as *const u8) as u64 }
}

unsafe extern "C" fn map_update_elem(map: u64, key: u64, value: u64, flags: u64, _: u64) -> u64 {
    // SAFETY: as in map_lookup_elem; r3 points to value_size readable bytes.
    unsafe { (*(map as *const Map)).update_raw(key as *const u8, value as *const u8, flags) as u64 }
}

unsafe extern "C" fn map_delete_elem(map: u64, key: u64, _: u64, _: u64, _: u64) -> u64 {
    // SAFETY: as in map_lookup_elem.
    unsafe { (*(map as *const Map)).delete_raw(key as *const u8) as u64 }
}

unsafe extern "C" fn ktime_get_ns(_: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    hotplane_core::time::now_ns()
}

unsafe extern "C" fn get_prandom_u32(_: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    RANDOM.with(|r| {
        let mut x = r.get();
        if x == 0 {
            // Seed per thread from the clock and the thread's identity.
            x = hotplane_core::time::now_ns() ^ (r as *const _ as u64).rotate_left(32) | 1;
        }
        // xorshift64*
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        r.set(x);
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) & 0xffff_ffff
    })
}

unsafe extern "C" fn get_smp_processor_id(_: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    current_cpu() as u64
}

/// hotplane port `p` is interface index `p + 1` to programs (0 means "no interface", as in
/// Linux): `ingress_ifindex`, `bpf_redirect` and devmap values all use it.
pub fn port_of_ifindex(ifindex: u64) -> Option<u16> {
    ifindex.checked_sub(1).and_then(|p| u16::try_from(p).ok()).filter(|p| *p != u16::MAX)
}

unsafe extern "C" fn redirect(ifindex: u64, flags: u64, _: u64, _: u64, _: u64) -> u64 {
    match port_of_ifindex(ifindex) {
        Some(port) if flags == 0 => {
            REDIRECT_TO.with(|c| c.set(port as u32));
            XDP_REDIRECT
        }
        _ => XDP_ABORTED,
    }
}

unsafe extern "C" fn redirect_map(map: u64, key: u64, flags: u64, _: u64, _: u64) -> u64 {
    // SAFETY: the verifier proved r1 is a devmap of this program.
    let m = unsafe { &*(map as *const Map) };
    // The low two bits of flags are the action when the key has no entry (Linux >= 5.6).
    let fallback = flags & 3;
    if m.def.kind != MapKind::DevMap {
        return fallback;
    }
    let k = (key as u32).to_ne_bytes();
    // SAFETY: a 4-byte key for a devmap.
    let v = unsafe { m.lookup_raw(k.as_ptr()) };
    if v.is_null() {
        return fallback;
    }
    // SAFETY: devmap values are at least 4 bytes, the first being the interface index.
    let ifindex = unsafe { (v as *const u32).read_unaligned() };
    match port_of_ifindex(ifindex as u64) {
        Some(port) => {
            REDIRECT_TO.with(|c| c.set(port as u32));
            XDP_REDIRECT
        }
        None => fallback,
    }
}

/// One's-complement sum of 32-bit words with end-around carry, as `csum_partial` (unfolded).
fn csum_add(mut sum: u64, bytes: &[u8]) -> u64 {
    for w in bytes.chunks_exact(4) {
        sum += u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as u64;
    }
    sum
}

fn fold32(mut sum: u64) -> u64 {
    while sum >> 32 != 0 {
        sum = (sum & 0xffff_ffff) + (sum >> 32);
    }
    sum
}

unsafe extern "C" fn csum_diff(from: u64, from_size: u64, to: u64, to_size: u64, seed: u64) -> u64 {
    if from_size % 4 != 0 || to_size % 4 != 0 || from_size > 512 || to_size > 512 {
        return (-errno::EINVAL) as u64;
    }
    // SAFETY: the verifier proved [from, from + from_size) and [to, to + to_size) readable (or
    // the size is zero).
    let (f, t) = unsafe {
        (
            if from_size == 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(from as *const u8, from_size as usize)
            },
            if to_size == 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(to as *const u8, to_size as usize)
            },
        )
    };
    // sum(to) - sum(from) + seed, in one's complement: adding ~x subtracts x.
    let mut sum = seed as u32 as u64;
    sum = csum_add(sum, t);
    for w in f.chunks_exact(4) {
        sum += !u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as u64;
    }
    fold32(sum)
}

/// The packet behind an XDP context, and the context refreshed after the packet changed.
/// A context without a packet (a bare frame another program handed over, which cannot grow or
/// shrink) fails with `-EINVAL` and stays as it was.
///
/// # Safety
/// `ctx` must be the `XdpCtx` the runtime passed to the program, whose `packet` is live or 0.
unsafe fn with_packet(ctx: u64, f: impl FnOnce(&mut Packet) -> bool) -> u64 {
    // SAFETY: per the contract.
    let c = unsafe { &mut *(ctx as *mut XdpCtx) };
    if c.packet == 0 {
        return (-errno::EINVAL) as u64;
    }
    // SAFETY: per the contract, `packet` points to the packet being processed, borrowed
    // exclusively by this run.
    let p = unsafe { &mut *(c.packet as *mut Packet) };
    let ok = f(p);
    let data = p.data_mut();
    c.data = data.as_mut_ptr() as u64;
    c.data_end = c.data + data.len() as u64;
    c.data_meta = c.data;
    if ok {
        0
    } else {
        (-errno::EINVAL) as u64
    }
}

unsafe extern "C" fn xdp_adjust_head(ctx: u64, delta: u64, _: u64, _: u64, _: u64) -> u64 {
    let delta = delta as i32 as isize;
    // SAFETY: the verifier proved r1 is the context.
    unsafe {
        with_packet(ctx, |p| {
            // Linux keeps at least an Ethernet header.
            p.len() as isize - delta >= 14 && p.adjust_head(delta).is_ok()
        })
    }
}

unsafe extern "C" fn xdp_adjust_tail(ctx: u64, delta: u64, _: u64, _: u64, _: u64) -> u64 {
    let delta = delta as i32 as isize;
    // SAFETY: the verifier proved r1 is the context.
    unsafe { with_packet(ctx, |p| p.len() as isize + delta >= 14 && p.adjust_tail(delta).is_ok()) }
}

unsafe extern "C" fn xdp_get_buff_len(ctx: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    // SAFETY: the verifier proved r1 is the context.
    let c = unsafe { &*(ctx as *const XdpCtx) };
    c.data_end - c.data
}

/// Render a trace_printk format with up to three arguments (%d %i %u %x %X %ld %lu %lx %lld
/// %llu %llx %p %c %%; %s is shown as `?`: its pointer was not verified).
pub fn format_trace(fmt: &[u8], args: [u64; 3]) -> String {
    let fmt = fmt.split(|b| *b == 0).next().unwrap_or(&[]);
    let mut out = String::new();
    let mut args = args.iter();
    let mut i = 0;
    while i < fmt.len() {
        let b = fmt[i];
        i += 1;
        if b != b'%' {
            out.push(if b.is_ascii() && (b >= 0x20 || b == b'\t') { b as char } else { '.' });
            continue;
        }
        let mut longs = 0;
        while i < fmt.len() && fmt[i] == b'l' {
            longs += 1;
            i += 1;
        }
        let Some(&conv) = fmt.get(i) else { break };
        i += 1;
        if conv == b'%' {
            out.push('%');
            continue;
        }
        let v = args.next().copied().unwrap_or(0);
        let narrow = longs == 0;
        match conv {
            b'd' | b'i' => {
                let s = if narrow { v as i32 as i64 } else { v as i64 };
                out += &s.to_string();
            }
            b'u' => out += &(if narrow { v as u32 as u64 } else { v }).to_string(),
            b'x' => out += &format!("{:x}", if narrow { v as u32 as u64 } else { v }),
            b'X' => out += &format!("{:X}", if narrow { v as u32 as u64 } else { v }),
            b'p' => out += &format!("{v:#x}"),
            b'c' => out.push(if (v as u8).is_ascii_graphic() { v as u8 as char } else { '.' }),
            b's' => out.push('?'),
            other => {
                out.push('%');
                out.push(other as char);
            }
        }
    }
    out
}

unsafe extern "C" fn trace_printk(fmt: u64, size: u64, a: u64, b: u64, c: u64) -> u64 {
    // SAFETY: the verifier proved [fmt, fmt + size) readable.
    let f = unsafe { std::slice::from_raw_parts(fmt as *const u8, size as usize) };
    let second = hotplane_core::time::now_ns() / 1_000_000_000;
    let allowed = TRACE_BUDGET.with(|t| {
        let (s, left) = t.get();
        let left = if s != second { TRACE_LINES_PER_SEC } else { left };
        t.set((second, left.saturating_sub(1)));
        left > 0
    });
    if !allowed {
        TRACE_SUPPRESSED.fetch_add(1, Ordering::Relaxed);
        return 0;
    }
    let line = format_trace(f, [a, b, c]);
    TRACE_LINES.fetch_add(1, Ordering::Relaxed);
    tracing::info!(target: "hotplane::ebpf::trace", cpu = current_cpu(), "{}", line.trim_end());
    line.len() as u64
}

const NONE5: [Arg; 5] = [Arg::None; 5];

fn h(
    id: u32,
    name: &'static str,
    func: crate::helpers::HelperFn,
    args: &[Arg],
    ret: Ret,
) -> Helper {
    let mut a = NONE5;
    a[..args.len()].copy_from_slice(args);
    Helper { id, name, func, args: a, ret, changes_packet: false }
}

/// The XDP helpers whose results depend only on their arguments and the maps: no clock, no
/// random numbers, no rate-limited trace. Two runs of one program on one packet from the same
/// maps then agree, which is what differential checks (the fuzzers, the chain checker) need.
pub fn deterministic_helpers() -> Helpers {
    let nondeterministic =
        [id::KTIME_GET_NS, id::TRACE_PRINTK, id::GET_PRANDOM_U32, id::KTIME_GET_BOOT_NS];
    let keep: Vec<_> =
        helpers().iter().filter(|h| !nondeterministic.contains(&h.id)).copied().collect();
    Helpers::new(&keep)
}

/// The helpers of XDP programs.
pub fn helpers() -> Helpers {
    use Arg::*;
    let mut list = vec![
        h(
            id::MAP_LOOKUP_ELEM,
            "bpf_map_lookup_elem",
            map_lookup_elem,
            &[Map, MapKey],
            Ret::MapValueOrNull,
        ),
        h(
            id::MAP_UPDATE_ELEM,
            "bpf_map_update_elem",
            map_update_elem,
            &[Map, MapKey, MapValue, Scalar],
            Ret::Scalar,
        ),
        h(id::MAP_DELETE_ELEM, "bpf_map_delete_elem", map_delete_elem, &[Map, MapKey], Ret::Scalar),
        h(id::KTIME_GET_NS, "bpf_ktime_get_ns", ktime_get_ns, &[], Ret::Scalar),
        h(id::KTIME_GET_BOOT_NS, "bpf_ktime_get_boot_ns", ktime_get_ns, &[], Ret::Scalar),
        h(
            id::TRACE_PRINTK,
            "bpf_trace_printk",
            trace_printk,
            // The values: never pointers (`%lx` would print an address).
            &[Mem, Size, NoPointer, NoPointer, NoPointer],
            Ret::Scalar,
        ),
        h(id::GET_PRANDOM_U32, "bpf_get_prandom_u32", get_prandom_u32, &[], Ret::Scalar),
        h(
            id::GET_SMP_PROCESSOR_ID,
            "bpf_get_smp_processor_id",
            get_smp_processor_id,
            &[],
            Ret::Scalar,
        ),
        h(id::REDIRECT, "bpf_redirect", redirect, &[Scalar, Scalar], Ret::Scalar),
        h(id::CSUM_DIFF, "bpf_csum_diff", csum_diff, &[Mem, Size, Mem, Size, Scalar], Ret::Scalar),
        h(id::XDP_ADJUST_HEAD, "bpf_xdp_adjust_head", xdp_adjust_head, &[Ctx, Scalar], Ret::Scalar),
        h(
            id::REDIRECT_MAP,
            "bpf_redirect_map",
            redirect_map,
            &[DevMap, Scalar, Scalar],
            Ret::Scalar,
        ),
        h(id::XDP_ADJUST_TAIL, "bpf_xdp_adjust_tail", xdp_adjust_tail, &[Ctx, Scalar], Ret::Scalar),
        h(id::XDP_GET_BUFF_LEN, "bpf_xdp_get_buff_len", xdp_get_buff_len, &[Ctx], Ret::Scalar),
    ];
    for hp in &mut list {
        hp.changes_packet = matches!(hp.id, id::XDP_ADJUST_HEAD | id::XDP_ADJUST_TAIL);
    }
    Helpers::new(&list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_formats_like_printk() {
        let s = format_trace(b"port %d len %u x=%x %% %s\0junk", [(-5i64) as u64, 60, 255]);
        assert_eq!(s, "port -5 len 60 x=ff % ?");
        assert_eq!(format_trace(b"%llu %lx", [1 << 40, 1 << 36, 0]), "1099511627776 1000000000");
    }

    #[test]
    fn csum_diff_matches_a_recomputed_checksum() {
        // Changing 4 bytes of a buffer: fold(diff + old_sum) == new_sum.
        let fold16 = |mut s: u64| {
            while s >> 16 != 0 {
                s = (s & 0xffff) + (s >> 16);
            }
            s as u16
        };
        let old = [0x45u8, 0, 0, 60, 1, 2, 3, 4];
        let mut new = old;
        new[4..8].copy_from_slice(&[9, 9, 9, 9]);
        let sum = |b: &[u8]| fold16(csum_add(0, b));
        // SAFETY: 4-byte slices.
        let d = unsafe { csum_diff(old[4..].as_ptr() as u64, 4, new[4..].as_ptr() as u64, 4, 0) };
        assert_eq!(fold16(d + sum(&old) as u64), sum(&new));
    }

    #[test]
    fn redirect_records_the_port() {
        // SAFETY: no pointers involved.
        assert_eq!(unsafe { redirect(3, 0, 0, 0, 0) }, XDP_REDIRECT);
        assert_eq!(take_redirect(), Some(2), "ifindex 3 is port 2");
        assert_eq!(unsafe { redirect(0, 0, 0, 0, 0) }, XDP_ABORTED);
        assert_eq!(take_redirect(), None);
        assert_eq!(unsafe { redirect(3, 1, 0, 0, 0) }, XDP_ABORTED);
    }
}
