//! Keys in a chosen cluster slot, found without asking a server thousands
//! of times: the slot is computed as the module computes it
//! (`hashlock_core::slot`, checked there against `CLUSTER KEYSLOT`).

pub use hashlock_core::slot::key_slot;

pub const SLOTS: u16 = 16384;

/// A hash tag (no braces) that lands in `slot`, from `prefix` plus a number:
/// wrap it in braces to put any key in that slot, e.g. `{tag}:lock`.
pub fn tag_for_slot(slot: u16, prefix: &str) -> String {
    assert!(slot < SLOTS, "slot {slot} out of range");
    (0u64..)
        .map(|i| format!("{prefix}{i}"))
        .find(|t| key_slot(t.as_bytes()) == slot)
        .expect("every slot is reached by some number")
}

/// A key in `slot`: `{<tag>}<suffix>`.
pub fn key_in_slot(slot: u16, prefix: &str, suffix: &str) -> String {
    format!("{{{}}}{suffix}", tag_for_slot(slot, prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_land_in_their_slot() {
        for slot in [0, 1, 5460, 5461, 16383] {
            let k = key_in_slot(slot, "t", ":lock");
            assert_eq!(key_slot(k.as_bytes()), slot, "{k}");
        }
    }
}
