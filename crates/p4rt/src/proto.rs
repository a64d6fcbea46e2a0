//! The P4Runtime messages and service, generated from hotplane's own `.proto` files
//! (`proto/`, checked wire-equal to the upstream v1.5.0 files by `tests/wire.rs`).

#![allow(clippy::all, missing_docs)]

pub mod p4 {
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/p4.v1.rs"));
    }
    pub mod config {
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/p4.config.v1.rs"));
        }
    }
    pub mod tmp {
        include!(concat!(env!("OUT_DIR"), "/p4.tmp.rs"));
    }
}

pub mod google {
    pub mod rpc {
        include!(concat!(env!("OUT_DIR"), "/google.rpc.rs"));
    }
}

/// The encoded descriptor set of every file above (for P4Info text and reflection).
pub const DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/p4runtime.fds"));
