//! The token GEMM (token.cl's `token_gemm_f32`, A-ViT's projections) as profiles name it: the
//! GEMM knobs in the sparse conv's convention, so one space and one roofline serve both: `TM`
//! output features and `TN` tokens (the sparse columns) per work-group, `WM` x `WN` of them per
//! work-item, `TK` reduction indices per stage. The kernel's rows are tokens, so its own tile
//! is these transposed. It has no split of the reduction (`KS` = 1) and one token per tile.

use crate::gpu::sparse_conv::knobs::{GemmKnobs, GpuLimits};
use dynaspa_runtime::dispatch::Schedule;
use dynaspa_runtime::sparsity::Granularity;

/// The kernel's defaults for `tokens` x `features` outputs (`gpu::kernels::Tile::for_output`),
/// as knobs.
pub fn default_knobs(tokens: usize, features: usize) -> GemmKnobs {
    let (rows, cols, w) = if tokens >= 64 && features >= 64 { (64, 64, 4) } else { (32, 32, 2) };
    GemmKnobs { tm: cols, tn: rows, tk: 16, wm: w, wn: w, ks: 1, wk: 1, et: false }
}

/// The tile calibration times over the active tokens on a device without a profile. On a
/// GPU, 16 features x 16 tokens per work-group: at a few dozen active tokens the default
/// tile leaves most of the device idle (the H100's tunes of A-ViT chose 16-32 x 16; full
/// A-ViT ran 1.67x faster with them than with the default). OpenCL CPU devices (PoCL) keep
/// the default, whose work-items do more each (its tunes chose 8 x 8 per work-item).
pub fn calibration_knobs(tokens: usize, features: usize, cpu_device: bool, limits: &GpuLimits) -> GemmKnobs {
    let small = GemmKnobs { tm: 16, tn: 16, tk: 32, wm: 1, wn: 1, ks: 1, wk: 1, et: false };
    if cpu_device || small.check(limits).is_err() {
        default_knobs(tokens, features)
    } else {
        small
    }
}

/// The knobs member `s` runs with (`None` for a dense member without knobs: the defaults),
/// or why the token GEMM cannot run it on a device with `limits`.
pub fn member_knobs(s: &Schedule, tokens: usize, features: usize, limits: &GpuLimits) -> Result<GemmKnobs, String> {
    if let Some(g) = s.granularity {
        if g != Granularity::new(1, 1) {
            return Err(format!("member '{}': granularity {g}; the token GEMM runs single tokens (1x1)", s.name));
        }
    }
    let k = GemmKnobs::from_map(&s.knobs, default_knobs(tokens, features)).map_err(|e| format!("member '{}': {e}", s.name))?;
    if k.ks != 1 || k.wk != 1 {
        return Err(format!("member '{}': KS = {}, WK = {}; the token GEMM does not split its reduction", s.name, k.ks, k.wk));
    }
    // token.cl declares its stages statically: no launch provides them memory.
    k.check(&GpuLimits { launch_local_bytes: 0, ..limits.clone() }).map_err(|e| format!("member '{}': {e}", s.name))?;
    Ok(k)
}

/// token_gemm_f32's defines for `k` (its tile transposed) and whether it is the dense member.
pub fn defines(k: &GemmKnobs, dense: bool) -> [(&'static str, i64); 6] {
    [("TM", k.tn as i64), ("TN", k.tm as i64), ("TK", k.tk as i64), ("WM", k.wn as i64), ("WN", k.wm as i64), ("DENSE", dense as i64)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim() -> GpuLimits {
        GpuLimits {
            wgsl: false,
            max_group_threads: 1024,
            local_mem_bytes: 48 * 1024,
            launch_local_bytes: 0,
            registers_per_group: 65536,
            registers_per_thread: 255,
            self_list: false,
        }
    }

    #[test]
    fn the_token_gemm_refuses_the_early_trigger_having_no_slices() {
        let cuda = GpuLimits { launch_local_bytes: 232_448, ..lim() };
        let member =
            GemmKnobs { tm: 32, tn: 16, tk: 16, wm: 2, wn: 2, ks: 1, wk: 1, et: true }.apply(Schedule::sparse("t", Granularity::new(1, 1)));
        assert!(member_knobs(&member, 196, 768, &cuda).unwrap_err().contains("ET"));
    }

    #[test]
    fn token_members_stay_within_static_local_memory_where_gemm_tiles_need_not() {
        // 64 x 64 of TK 128: 64 KiB of stages, past 48 KiB; the weights' stage is 32 KiB.
        let big = GemmKnobs { tm: 64, tn: 64, tk: 128, wm: 4, wn: 4, ks: 1, wk: 1, et: false };
        let cuda = GpuLimits { launch_local_bytes: 232_448, ..lim() };
        assert!(big.check(&cuda).is_ok());
        let member = big.apply(Schedule::sparse("big", Granularity::new(1, 1)));
        let e = member_knobs(&member, 196, 768, &cuda).unwrap_err();
        assert!(e.contains("member 'big'") && e.contains("local memory"), "{e}");
    }
}
