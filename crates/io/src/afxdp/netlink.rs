//! Removing an XDP program attached through netlink (the way `ip link set dev X xdp ...` and
//! kernels before 5.9 attach). Programs attached through a bpf link go away with the process that
//! held the link, but a netlink-attached one stays after a crash and would block our attach.

use std::io;

const RTM_SETLINK: u16 = 19;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLMSG_ERROR: u16 = 2;
const IFLA_XDP: u16 = 43;
const NLA_F_NESTED: u16 = 1 << 15;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_FLAGS: u16 = 3;

fn attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(payload);
    while buf.len() % 4 != 0 {
        buf.push(0);
    }
}

/// Detach whatever XDP program is attached to `ifindex` with `flags` (XDP_FLAGS_*_MODE), in the
/// calling thread's network namespace.
pub fn detach(ifindex: u32, flags: u32) -> io::Result<()> {
    let mut nested = Vec::new();
    attr(&mut nested, IFLA_XDP_FD, &(-1i32).to_ne_bytes());
    attr(&mut nested, IFLA_XDP_FLAGS, &flags.to_ne_bytes());
    let mut body = Vec::new();
    // struct ifinfomsg: family, pad, type, index, flags, change
    body.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]);
    body.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    body.extend_from_slice(&0u32.to_ne_bytes());
    body.extend_from_slice(&0u32.to_ne_bytes());
    attr(&mut body, IFLA_XDP | NLA_F_NESTED, &nested);
    let mut msg = Vec::with_capacity(16 + body.len());
    msg.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&RTM_SETLINK.to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(&body);
    // SAFETY: plain socket creation.
    let fd = unsafe {
        libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE)
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let result = (|| {
        // SAFETY: sockaddr_nl is plain data; the kernel is pid 0.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        // SAFETY: sending our buffer to the kernel with a valid address.
        let rc = unsafe {
            libc::sendto(
                fd,
                msg.as_ptr() as *const libc::c_void,
                msg.len(),
                0,
                &sa as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut reply = [0u8; 1024];
        // SAFETY: receiving into a buffer of the length given.
        let n = unsafe { libc::recv(fd, reply.as_mut_ptr() as *mut libc::c_void, reply.len(), 0) };
        if n < 20 {
            return Err(io::Error::last_os_error());
        }
        let kind = u16::from_ne_bytes([reply[4], reply[5]]);
        let code = i32::from_ne_bytes([reply[16], reply[17], reply[18], reply[19]]);
        if kind == NLMSG_ERROR && code != 0 {
            return Err(io::Error::from_raw_os_error(-code));
        }
        Ok(())
    })();
    // SAFETY: fd is ours.
    unsafe { libc::close(fd) };
    result
}
