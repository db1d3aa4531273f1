//! Dispatch: per frame and sparse op, pick the PolyKernel member predicted fastest for this
//! frame's mask. A [`PolyKernel`] holds up to [`MAX_MEMBERS`] [`Schedule`]s (exactly one dense),
//! each with a [`DispatchTable`] of measured time against DISTile count; the runtime counts the
//! mask's tiles at every member's granularity (one [`BitMask::count_tiles_many`] call) and takes
//! the argmin of the tables.
//!
//! Everything here is serde-serialisable (profiles and the on-disk cache store it), and
//! deserialising validates, so a loaded PolyKernel upholds the same invariants as a built one.
//!
//! [`BitMask::count_tiles_many`]: crate::sparsity::BitMask::count_tiles_many

pub mod polykernel;
pub mod schedule;
pub mod table;

pub use polykernel::{Member, PolyKernel, MAX_MEMBERS};
pub use schedule::Schedule;
pub use table::DispatchTable;
