//! The settings every backend's sparse ops share: calibration cache, a pinned member, a profile.

use dynaspa_runtime::sparsity::Granularity;
use std::sync::Arc;

/// Pins every sparse op to one member, for tests and for measuring members one by one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForceMember {
    Dense,
    /// The sparse member at this granularity, or the closest the op's PolyKernel has.
    Tiles(Granularity),
}

impl ForceMember {
    /// `dense` or a granularity `HxW` (both sides 1..=64).
    pub fn parse(s: &str) -> Option<ForceMember> {
        if s.eq_ignore_ascii_case("dense") {
            return Some(ForceMember::Dense);
        }
        let (h, w) = s.split_once(['x', 'X'])?;
        let (h, w): (u16, u16) = (h.trim().parse().ok()?, w.trim().parse().ok()?);
        ((1..=64).contains(&h) && (1..=64).contains(&w)).then_some(ForceMember::Tiles(Granularity::new(h, w)))
    }
}

/// How a backend runs sparse ops where no tuned choice is given: where calibrations are cached,
/// a member pinned for debugging, and the tuned profile to use (checked by the caller).
#[derive(Clone, Debug, Default)]
pub struct SparseConfig {
    /// Where calibrated PolyKernels and the GPU's vendor-conv race outcomes are cached (`None`:
    /// calibrate and race on every start).
    pub cache_dir: Option<std::path::PathBuf>,
    pub force: Option<ForceMember>,
    /// Tuned PolyKernels (`dynaspa tune`): used for the ops they cover, instead of calibrating,
    /// when the profile was made on this device; otherwise ignored with a warning.
    pub profile: Option<Arc<dynaspa_runtime::profile::Profile>>,
}

impl SparseConfig {
    /// The cache under `$DYNASPA_CACHE_DIR`, `$XDG_CACHE_HOME/dynaspa` or `~/.cache/dynaspa`;
    /// `DYNASPA_FORCE_MEMBER=dense` or `=HxW` pins the member (unparsable values are ignored
    /// with a warning).
    pub fn from_env() -> SparseConfig {
        let force = std::env::var("DYNASPA_FORCE_MEMBER").ok().and_then(|v| {
            let f = ForceMember::parse(&v);
            if f.is_none() {
                tracing::warn!("ignoring DYNASPA_FORCE_MEMBER={v}: expected 'dense' or HxW, e.g. 2x8");
            }
            f
        });
        SparseConfig { cache_dir: crate::cache_dir::cache_root(), force, profile: None }
    }
}
