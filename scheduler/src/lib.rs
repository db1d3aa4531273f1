//! dynaspa-scheduler: the offline tuner (search spaces, roofline model, PolyKernel selection).
//! Empty until the tuner issue lands; the crate exists so the dependency order is fixed.
