//! dynaspa-scheduler: the offline tuner (DynaSpa section 3.2-3.3). For each sparse op of a
//! model it builds the schedule space ([`space`]), ranks it with the roofline model
//! ([`roofline`], [`devices`]) and prunes it, searches it on the learned cost model
//! ([`cost_model`], [`search`]) with measurements on the real backend ([`measure`]) over
//! mini-batches of real masks ([`masks`]), and selects the PolyKernel greedily
//! ([`polykernel`]); [`tune`] drives the whole and writes the profile.

pub mod cost_model;
pub mod devices;
pub mod masks;
pub mod measure;
pub mod microbench;
pub mod polykernel;
pub mod predict;
pub mod rng;
pub mod roofline;
pub mod search;
pub mod space;
pub mod stats;
pub mod tune;
