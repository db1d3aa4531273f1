//! The kernel sources the GPU executor launches, one program per `Src`, declared once here:
//! its `.cl` file (the name the executor and the caches know it by), the headers compiled before
//! it, and whether wgpu has a WGSL twin (`wgpu/shaders.rs`, which maps the same names). Every
//! program compiles as OpenCL C and, behind the CUDA prelude, under NVRTC; a program is an
//! algorithm, its variants `#if`s of its own defines. Each program is `kernels/common.h`, its
//! headers and its file, each part behind a `#line` naming it, so compiler messages point into
//! the right file and line. The device prepends its own prelude (`prelude_opencl.h` for
//! OpenCL), which defines the few macros the sources use (`KERNEL`, `GLOBAL`, `LOCAL`,
//! `LOCAL_PTR`, `FUNC`, `LOCAL_BARRIER()`, `GROUP_ID(d)`, `LOCAL_ID(d)`, `GLOBAL_ID(d)`, the
//! math wrappers `EXPF`...), so a CUDA prelude compiles the same files under NVRTC.
//! Schedule knobs enter as `-D NAME=VALUE` defines (`KernelSpec::defines`).

use super::device::{KernelDialect, KernelSpec};

macro_rules! source {
    ($($file:literal),+) => {
        concat!("#line 1 \"common.h\"\n", include_str!("kernels/common.h") $(, "\n#line 1 \"", $file, "\"\n", include_str!(concat!("kernels/", $file)))+)
    };
}

/// One kernel program (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    Elementwise,
    Movement,
    Reduce,
    Matmul,
    Conv,
    Pool,
    Attention,
    /// The sparse conv as an implicit GEMM over DISTiles, and its split-K finish.
    SparseConvGemm,
    /// The depthwise sparse conv.
    SparseConvDw,
    /// The sparse conv's residual fill and the Cached blend.
    SparseConvFill,
    Bitmask,
    Token,
}

/// What a `Src` is: its file, its full source, and whether a WGSL twin exists.
pub(crate) struct Program {
    pub file: &'static str,
    pub source: &'static str,
    pub wgsl: bool,
}

/// `program!(file; headers...; wgsl)`: the program `file`, compiled after common.h and
/// `headers`, with a WGSL twin where `wgsl` is true.
macro_rules! program {
    ($file:literal; $($part:literal),*; $wgsl:expr) => {
        Program { file: $file, source: source!($($part,)* $file), wgsl: $wgsl }
    };
}

impl Src {
    pub(crate) const ALL: [Src; 12] = [
        Src::Elementwise,
        Src::Movement,
        Src::Reduce,
        Src::Matmul,
        Src::Conv,
        Src::Pool,
        Src::Attention,
        Src::SparseConvGemm,
        Src::SparseConvDw,
        Src::SparseConvFill,
        Src::Bitmask,
        Src::Token,
    ];

    pub(crate) fn program(self) -> Program {
        match self {
            Src::Elementwise => program!("elementwise.cl";; true),
            Src::Movement => program!("movement.cl";; true),
            Src::Reduce => program!("reduce.cl";; true),
            Src::Matmul => program!("matmul.cl";; true),
            Src::Conv => program!("conv.cl";; true),
            Src::Pool => program!("pool.cl";; true),
            Src::Attention => program!("attention.cl";; true),
            Src::SparseConvGemm => {
                program!("sparse_conv_gemm.cl"; "sparse_conv_common.h", "sparse_conv_knobs.h", "sparse_conv_stage.h", "sparse_conv_list.h"; true)
            }
            Src::SparseConvDw => program!("sparse_conv_dw.cl"; "sparse_conv_common.h"; true),
            Src::SparseConvFill => program!("sparse_conv_fill.cl"; "sparse_conv_common.h"; true),
            Src::Bitmask => program!("bitmask.cl";; true),
            Src::Token => program!("token.cl";; true),
        }
    }

    pub(crate) fn file(self) -> &'static str {
        self.program().file
    }

    pub(crate) fn source(self) -> &'static str {
        self.program().source
    }

    /// The dialects this program's kernels compile in: OpenCL C and CUDA always, WGSL where it
    /// has a twin.
    pub(crate) fn dialects(self) -> &'static [KernelDialect] {
        if self.program().wgsl {
            &[KernelDialect::OpenCl, KernelDialect::Cuda, KernelDialect::Wgsl]
        } else {
            &[KernelDialect::OpenCl, KernelDialect::Cuda]
        }
    }
}

/// The spec of `entry` in `src` with schedule defines (sorted, so equal schedules share a build).
pub(crate) fn spec(src: Src, entry: &'static str, defines: &[(&str, i64)]) -> KernelSpec {
    let mut d: Vec<(String, String)> = defines.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    d.sort();
    KernelSpec { file: src.file(), source: src.source(), entry, defines: d }
}

/// Tile shape of the GEMM-like kernels (matmul.cl, conv.cl): a TM x TN output tile per work-group,
/// TK-deep slices, WM x WN outputs per work-item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Tile {
    pub tm: u32,
    pub tn: u32,
    pub tk: u32,
    pub wm: u32,
    pub wn: u32,
}

impl Tile {
    /// 64 x 64 tiles of 4 x 4 per work-item: for large outputs.
    pub(crate) const LARGE: Tile = Tile { tm: 64, tn: 64, tk: 16, wm: 4, wn: 4 };
    /// 32 x 32 tiles of 2 x 2: small outputs waste less of a tile.
    pub(crate) const SMALL: Tile = Tile { tm: 32, tn: 32, tk: 16, wm: 2, wn: 2 };

    /// Roofline-free default until the tuner writes profiles: large tiles once both output
    /// extents fill them.
    pub(crate) fn for_output(m: usize, n: usize) -> Tile {
        if m >= 64 && n >= 64 {
            Tile::LARGE
        } else {
            Tile::SMALL
        }
    }

    pub(crate) fn defines(self) -> [(&'static str, i64); 5] {
        [("TM", self.tm as i64), ("TN", self.tn as i64), ("TK", self.tk as i64), ("WM", self.wm as i64), ("WN", self.wn as i64)]
    }

    /// Work-items per work-group along x (columns) and y (rows).
    pub(crate) fn local(self) -> [u32; 3] {
        [self.tn / self.wn, self.tm / self.wm, 1]
    }

    /// Bytes of local memory a work-group uses.
    pub(crate) fn local_bytes(self) -> u64 {
        4 * (self.tk as u64) * (self.tm as u64 + self.tn as u64)
    }
}

/// Work-items of the work-group reductions (reduce.cl, attention.cl).
pub(crate) const REDUCE_WG: u32 = 256;
pub(crate) const ATTENTION_WG: u32 = 128;
/// Work-items per group of the one-item-per-element kernels.
pub(crate) const LINEAR_WG: u32 = 256;

/// The name of the kernel whose head follows `KERNEL ` in `after`: `name(`, or with a
/// register bound first, `LAUNCH_BOUNDS(..) name(` (the preludes') or CUDA's
/// `__launch_bounds__(..) name(`, either followed by upper-case attribute macros without
/// arguments (a CUDA cluster shape, say). `None` where no kernel head follows (the preludes'
/// own `#define KERNEL ...`).
pub(crate) fn kernel_name(after: &str) -> Option<&str> {
    let mut rest = after.trim_start();
    for attr in ["LAUNCH_BOUNDS(", "__launch_bounds__("] {
        if let Some(r) = rest.strip_prefix(attr) {
            let mut depth = 1;
            let close = r.find(|c: char| {
                depth += match c {
                    '(' => 1,
                    ')' => -1,
                    _ => 0,
                };
                depth == 0
            })?;
            rest = r[close + 1..].trim_start();
        }
    }
    loop {
        let n = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let after_word = rest[n..].trim_start();
        if n > 0 && after_word.starts_with('(') {
            return Some(&rest[..n]);
        }
        // An attribute macro: an upper-case word with the head going on after it.
        let word = &rest[..n];
        let attribute = n > 0 && word.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !attribute || after_word.len() == rest[n..].len() {
            return None;
        }
        rest = after_word;
    }
}

/// The entry points (`KERNEL name(`, see `kernel_name`) of a kernel source, in file order.
#[cfg(test)]
pub(crate) fn entries(source: &'static str) -> Vec<&'static str> {
    source.split("KERNEL ").skip(1).filter_map(kernel_name).collect()
}

/// Every schedule the lowering (gpu/lower/*) asks for of `entry`: keep in step with the
/// `cx.kernel(..)` calls there. CI compiles each through NVRTC with the CUDA prelude.
#[cfg(test)]
fn schedules(src: Src, entry: &str) -> Vec<Vec<(&'static str, i64)>> {
    match (src, entry) {
        (Src::Matmul, "gemm_f32") | (Src::Conv, "conv_gemm_f32" | "convt_gemm_f32") => {
            vec![Tile::LARGE.defines().to_vec(), Tile::SMALL.defines().to_vec()]
        }
        (Src::Reduce, _) => vec![vec![("WG", REDUCE_WG as i64)]],
        // TP: positions per work-group (lower/conv.rs).
        (Src::Conv, "conv_thin_f32") => [8, 16, 32].into_iter().map(|tp| vec![("TP", tp)]).collect(),
        // TK_MAX: the key count rounded up to a power of two, at least 64, as long as the row
        // fits local memory (8192 keys in 48 KiB).
        (Src::Attention, _) => (6..=13).map(|p| vec![("WG", ATTENTION_WG as i64), ("TK_MAX", 1i64 << p)]).collect(),
        (Src::SparseConvGemm | Src::SparseConvDw | Src::SparseConvFill, e) => {
            super::sparse_conv::ci_schedules::all(e).into_iter().map(|d| d.to_vec()).collect()
        }
        // HOST_COUNTS: CUDA's mapped host counts (sparse/bitmask.rs).
        (Src::Bitmask, _) => {
            let b = ("BLOCK", super::sparse::bitmask::BITMASK_BLOCK as i64);
            vec![vec![b], vec![b, ("LWORDS", 50)], vec![b, ("LWORDS", 50), ("HOST_COUNTS", 1)], vec![b, ("HOST_COUNTS", 1)]]
        }
        (Src::Token, "token_compact") => vec![vec![("BLOCK", super::sparse::bitmask::BITMASK_BLOCK as i64)]],
        // EARLY_EXIT: 1 on GPUs, 0 on OpenCL CPU devices (token/launches.rs); DENSE: the
        // PolyKernel's dense member. Profiles' tiles are compiled from the profiles.
        (Src::Token, "token_gemm_f32") => {
            let mut v: Vec<Vec<(&'static str, i64)>> = [Tile::LARGE, Tile::SMALL]
                .into_iter()
                .flat_map(|t| (0..4).map(move |v| t.defines().into_iter().chain([("EARLY_EXIT", v & 1), ("DENSE", v >> 1)]).collect()))
                .collect();
            for d in super::sparse_conv::ci_schedules::token_gemm_defines() {
                v.push(d.into_iter().chain([("EARLY_EXIT", 1)]).collect());
            }
            v.sort();
            v.dedup();
            v
        }
        // token_attention_tiled_f32 (token/lower.rs): each TK_MAX and DMAX whose local memory
        // fits the 48 KiB of static shared memory a CUDA block may have.
        (Src::Token, "token_attention_tiled_f32") => {
            use super::token::lower::TiledAttention;
            (6..=12)
                .flat_map(|p| [16usize, 32, 64, 128].into_iter().filter_map(move |d| TiledAttention::new(1 << p, d, d)))
                .filter(|t| t.local_bytes() <= 48 * 1024)
                .map(|t| t.defines().to_vec())
                .collect()
        }
        // token_attention_f32 keeps the row's scores and their tokens: 4096 keys in 48 KiB.
        (Src::Token, _) => (6..=12)
            .flat_map(|p| (0..2).map(move |e| vec![("WG", ATTENTION_WG as i64), ("TK_MAX", 1i64 << p), ("EARLY_EXIT", e)]))
            .collect(),
        _ => vec![vec![]],
    }
}

/// A program's code path: its defines with the sizes left out (values other than 0 and 1, and
/// a granularity's height and width), which is what selects code by `#if`.
#[cfg(test)]
pub(crate) fn code_path(defines: &[(String, String)]) -> Vec<(String, String)> {
    defines
        .iter()
        .map(|(k, v)| {
            (k.clone(), if matches!(v.as_str(), "0" | "1") && !matches!(k.as_str(), "GH" | "GW") { v.clone() } else { String::new() })
        })
        .collect()
}

/// Every (source, entry, schedule) the executor can launch.
#[cfg(test)]
pub(crate) fn all_specs() -> Vec<KernelSpec> {
    let mut v = Vec::new();
    for src in Src::ALL {
        for entry in entries(src.source()) {
            for defines in schedules(src, entry) {
                v.push(spec(src, entry, &defines));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::Src;

    /// Every part of a program is the file on disk behind a `#line` naming it, in order, the
    /// program's own `.cl` last; no header under `kernels/` is left out of every program.
    #[test]
    fn programs_are_their_parts_behind_line_markers() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/gpu/kernels");
        let mut used = vec!["common.h".to_string()];
        for src in Src::ALL {
            let text = src.source();
            let mut at = 0;
            let mut last = "";
            for line in text.lines() {
                if let Some(name) = line.strip_prefix("#line 1 \"").and_then(|r| r.strip_suffix('"')) {
                    last = name;
                    used.push(name.to_string());
                    let on_disk = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
                    let body = &text[at + line.len() + 1..];
                    assert!(body.starts_with(&on_disk), "{}: the part after the {name} marker is not the file", src.file());
                }
                at += line.len() + 1;
            }
            assert!(text.starts_with("#line 1 \"common.h\"\n"), "{}", src.file());
            assert_eq!(last, src.file(), "the program's own file comes last");
        }
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".h") && name != "prelude_opencl.h" {
                assert!(used.contains(&name), "kernels/{name} is in no program");
            }
        }
    }
}
