//! Helper functions: what a program may call, how the verifier checks the call, and the native
//! function the engines invoke. Helper ids are per environment: the XDP environment uses the
//! Linux numbers (1 = map_lookup_elem, ...); the conformance suite wants helper 5 to return its
//! first argument.

/// Native helper: five argument registers in, r0 out.
pub type HelperFn = unsafe extern "C" fn(u64, u64, u64, u64, u64) -> u64;

/// What an argument register must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// Not used.
    None,
    /// Any initialised value (scalar or pointer).
    Anything,
    /// A scalar.
    Scalar,
    /// An optional value (a variadic argument the helper may not read): anything but a
    /// pointer, so no address reaches the helper's output.
    NoPointer,
    /// A map (from `lddw dst, map`).
    Map,
    /// A devmap (for `bpf_redirect_map`).
    DevMap,
    /// Readable memory of the map's key size.
    MapKey,
    /// Readable memory of the map's value size.
    MapValue,
    /// The program's context.
    Ctx,
    /// Readable memory whose size is the next argument.
    Mem,
    /// Memory the helper may write (need not be initialised); size in the next argument.
    UninitMem,
    /// A constant size for the previous memory argument (may be zero).
    Size,
}

/// What a helper returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ret {
    Scalar,
    /// A pointer to a value of the map in argument 1, or null.
    MapValueOrNull,
}

/// One helper.
#[derive(Clone, Copy)]
pub struct Helper {
    pub id: u32,
    pub name: &'static str,
    pub func: HelperFn,
    pub args: [Arg; 5],
    pub ret: Ret,
    /// The helper may move the packet's start or end: packet pointers are invalid afterwards.
    pub changes_packet: bool,
}

impl core::fmt::Debug for Helper {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}#{}", self.name, self.id)
    }
}

/// The helpers of one environment, by id. Shared, not copied: every loaded program keeps
/// its environment's table (about 10 KB for XDP's ids up to 188).
#[derive(Clone, Default, Debug)]
pub struct Helpers {
    by_id: std::sync::Arc<[Option<Helper>]>,
}

impl Helpers {
    pub fn new(list: &[Helper]) -> Self {
        let max = list.iter().map(|h| h.id as usize).max().unwrap_or(0);
        let mut by_id = vec![None; max + 1];
        for h in list {
            by_id[h.id as usize] = Some(*h);
        }
        Self { by_id: by_id.into() }
    }

    pub fn get(&self, id: u32) -> Option<&Helper> {
        self.by_id.get(id as usize).and_then(Option::as_ref)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Helper> {
        self.by_id.iter().flatten()
    }
}

unsafe extern "C" fn identity(a: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    a
}

/// The conformance suite's environment: helper 5 returns its first argument.
pub fn conformance() -> Helpers {
    Helpers::new(&[Helper {
        id: 5,
        name: "test_identity",
        func: identity,
        args: [Arg::Anything, Arg::None, Arg::None, Arg::None, Arg::None],
        ret: Ret::Scalar,
        changes_packet: false,
    }])
}
