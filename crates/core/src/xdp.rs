//! XDP actions: the values an XDP program returns (Linux's `enum xdp_action`), defined once for
//! every kind of code that speaks them: eBPF programs, P4 externs that call an extern slot, and
//! stages answering such a call.

use crate::Verdict;

pub const XDP_ABORTED: u64 = 0;
pub const XDP_DROP: u64 = 1;
pub const XDP_PASS: u64 = 2;
pub const XDP_TX: u64 = 3;
pub const XDP_REDIRECT: u64 = 4;

/// The name of an action as Linux spells it (`XDP_PASS`), or `None` for a value that is not one.
pub fn action_name(action: u64) -> Option<&'static str> {
    const NAMES: [&str; 5] = ["XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX", "XDP_REDIRECT"];
    NAMES.get(usize::try_from(action).ok()?).copied()
}

/// The action a stage's verdict stands for when the stage answers a call that expects an XDP
/// action (a P4 extern calling a slot holding a non-eBPF stage). A punt is not something the
/// caller can do with the packet, so it reads as a drop.
pub const fn action_of(verdict: Verdict) -> u64 {
    match verdict {
        Verdict::Pass => XDP_PASS,
        Verdict::Tx => XDP_TX,
        Verdict::Drop | Verdict::Punt => XDP_DROP,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_map_to_their_actions() {
        assert_eq!(action_of(Verdict::Pass), XDP_PASS);
        assert_eq!(action_of(Verdict::Tx), XDP_TX);
        assert_eq!(action_of(Verdict::Drop), XDP_DROP);
        assert_eq!(action_of(Verdict::Punt), XDP_DROP);
        assert_eq!(action_name(XDP_REDIRECT), Some("XDP_REDIRECT"));
        assert_eq!(action_name(XDP_ABORTED), Some("XDP_ABORTED"));
        assert_eq!(action_name(5), None);
        assert_eq!(action_name(u64::MAX), None);
    }
}
