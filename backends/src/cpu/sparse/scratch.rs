//! Per-thread scratch buffers, reused across calls so a sparse call allocates nothing in steady
//! state, and 64-byte aligned so a 16-float panel row never straddles two cache lines.

use std::cell::RefCell;

/// Which buffer: a call may hold `Shared` on the calling thread while its parallel tasks (some
/// of which run on that same thread) hold `Panel` and `Acc`.
#[derive(Clone, Copy)]
pub(super) enum Slot {
    Shared,
    Panel,
    Acc,
}

thread_local! {
    static SLOTS: [RefCell<Vec<f32>>; 3] = const {
        [RefCell::new(Vec::new()), RefCell::new(Vec::new()), RefCell::new(Vec::new())]
    };
}

const ALIGN_FLOATS: usize = 16;

/// Runs `f` on `len` floats of the slot's buffer (contents unspecified).
pub(super) fn with<R>(slot: Slot, len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    SLOTS.with(|s| match s[slot as usize].try_borrow_mut() {
        Ok(mut v) => {
            if v.len() < len + ALIGN_FLOATS {
                v.resize(len + ALIGN_FLOATS, 0.0);
            }
            let skip = v.as_ptr().align_offset(64).min(ALIGN_FLOATS);
            f(&mut v[skip..skip + len])
        }
        // Rayon ran a task of another call on this thread while the slot was held.
        Err(_) => f(&mut vec![0.0; len]),
    })
}
