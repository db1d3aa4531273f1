//! The sparse conv: spatially masked convs run on DISTiles of the frame's mask, with a member
//! chosen per frame from a PolyKernel. `select` decides which convs it runs, `knobs` is the
//! schedule space profiles and the tuner name, `schedule` the kernel variants a member launches,
//! `features` the paths whose choice depends on the device, `lower` the launches of one
//! schedule, `build` an op's members, fill and calibrated PolyKernel at compile time, and
//! `timer` one op timed at any schedule for the tuner. Its kernels are kernels/sparse_conv*.

pub(crate) mod build;
#[cfg(test)]
pub(crate) mod ci_schedules;
pub mod features;
pub mod knobs;
pub(crate) mod lower;
pub(crate) mod schedule;
pub(crate) mod select;
pub(crate) mod timer;
