//! Program contexts. An XDP program reads `struct xdp_md` (32-bit fields); at load time the
//! verifier rewrites those reads to this runtime layout, as the kernel does, so that `data` and
//! `data_end` are full 64-bit pointers.

/// The context an XDP program gets in r1.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct XdpCtx {
    pub data: u64,
    pub data_end: u64,
    pub data_meta: u64,
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    pub egress_ifindex: u32,
    pub _pad: u32,
    /// The packet being processed (`*mut hotplane_core::Packet`), for helpers that change it;
    /// 0 for a bare frame, whose bounds cannot move.
    pub packet: u64,
}

/// A field of `struct xdp_md` as programs see it, and where it lives in [`XdpCtx`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpField {
    /// Offset in `struct xdp_md`.
    pub md_offset: i16,
    /// Offset in `XdpCtx`.
    pub ctx_offset: i16,
    /// Load size in `XdpCtx` (8 for pointers).
    pub ctx_size: usize,
    pub kind: XdpFieldKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpFieldKind {
    Data,
    DataEnd,
    DataMeta,
    Scalar,
}

pub const XDP_FIELDS: [XdpField; 6] = [
    XdpField { md_offset: 0, ctx_offset: 0, ctx_size: 8, kind: XdpFieldKind::Data },
    XdpField { md_offset: 4, ctx_offset: 8, ctx_size: 8, kind: XdpFieldKind::DataEnd },
    XdpField { md_offset: 8, ctx_offset: 16, ctx_size: 8, kind: XdpFieldKind::DataMeta },
    XdpField { md_offset: 12, ctx_offset: 24, ctx_size: 4, kind: XdpFieldKind::Scalar },
    XdpField { md_offset: 16, ctx_offset: 28, ctx_size: 4, kind: XdpFieldKind::Scalar },
    XdpField { md_offset: 20, ctx_offset: 32, ctx_size: 4, kind: XdpFieldKind::Scalar },
];

/// `struct xdp_md` is 24 bytes.
pub const XDP_MD_SIZE: i64 = 24;

pub fn xdp_field(md_offset: i64) -> Option<&'static XdpField> {
    XDP_FIELDS.iter().find(|f| f.md_offset as i64 == md_offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_rewrite_table() {
        let c = XdpCtx::default();
        let base = &c as *const _ as usize;
        assert_eq!(&c.data_end as *const _ as usize - base, XDP_FIELDS[1].ctx_offset as usize);
        assert_eq!(&c.data_meta as *const _ as usize - base, XDP_FIELDS[2].ctx_offset as usize);
        assert_eq!(
            &c.ingress_ifindex as *const _ as usize - base,
            XDP_FIELDS[3].ctx_offset as usize
        );
        assert_eq!(
            &c.rx_queue_index as *const _ as usize - base,
            XDP_FIELDS[4].ctx_offset as usize
        );
        assert_eq!(
            &c.egress_ifindex as *const _ as usize - base,
            XDP_FIELDS[5].ctx_offset as usize
        );
    }
}
