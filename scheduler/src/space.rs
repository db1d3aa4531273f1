//! Schedule spaces per op kind, as data: the knobs, their values, and which combinations a
//! device can run. A point of a space is a list of indices into the knob domains; the tuner
//! walks points (the annealer changes one knob by one step) and turns the chosen ones into
//! [`Schedule`]s for profiles.
//!
//! Two targets. The CPU sparse kernels have one knob, the DISTile granularity (the gather and
//! the packed GEMM's register tile are fixed in the kernel). The GPU spaces are the knobs of the
//! GPU sparse conv kernels themselves, under the names their defines and profiles use (`TM TN
//! TK WM WN KS`, see `dynaspa_backends::gpu::sparse_conv_knobs`), checked against the device's limits
//! by the same function the executor checks a profile with, so every point is a schedule the
//! kernels run; points that run but waste most of a work-group or of the split reduction are
//! left out too.

use crate::devices::DeviceDesc;
use dynaspa_backends::gpu::sparse_conv_knobs::{schedule_name, GemmKnobs, GEMM_DOMAINS};
use dynaspa_runtime::dispatch::Schedule;
use dynaspa_runtime::graph::{Graph, MaskKind, Node, Op};
use dynaspa_runtime::sparsity::Granularity;

/// What the cost of a sparse op depends on, read once from the graph.
#[derive(Clone, Debug, PartialEq)]
pub struct OpGeometry {
    pub kind: OpKind,
    pub images: usize,
    /// Input channels, output channels, groups.
    pub c_in: usize,
    pub c_out: usize,
    pub groups: usize,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    /// Mask plane (conv: output positions; token ops: 1 x tokens).
    pub h: usize,
    pub w: usize,
    /// Attention: heads and head size (0 otherwise).
    pub heads: usize,
    pub head_dim: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    Conv,
    /// One input channel per group: no reduction over channels, a direct kernel.
    Depthwise,
    /// Token rows times a weight matrix.
    TokenLinear,
    /// Queries of active tokens against all keys.
    Attention,
}

impl OpGeometry {
    /// The geometry of a sparse node, `None` for ops the tuner has no space for (no sparse kernel).
    pub fn of(g: &Graph, n: &Node) -> Option<OpGeometry> {
        let spec = n.sparse.as_ref()?;
        let shape = |i: usize| n.inputs.get(i).copied().flatten().map(|v| g.values[v].shape.clone());
        let out = g.values[*n.outputs.first()?].shape.clone();
        let blank = OpGeometry {
            kind: OpKind::Conv,
            images: out.first().copied().unwrap_or(1),
            c_in: 0,
            c_out: 0,
            groups: 1,
            kh: 1,
            kw: 1,
            sh: 1,
            sw: 1,
            h: 1,
            w: 1,
            heads: 0,
            head_dim: 0,
        };
        match (&n.op, spec.kind) {
            (Op::Conv(p), MaskKind::Spatial) => {
                let (x, wt) = (shape(0)?, shape(1)?);
                if x.len() != 4 || wt.len() != 4 || out.len() != 4 {
                    return None;
                }
                let s = |i: usize| p.window.strides.get(i).copied().unwrap_or(1).max(1);
                let kind = if wt[1] == 1 { OpKind::Depthwise } else { OpKind::Conv };
                Some(OpGeometry {
                    kind,
                    c_in: x[1],
                    c_out: out[1],
                    groups: p.group.max(1),
                    kh: wt[2],
                    kw: wt[3],
                    sh: s(0),
                    sw: s(1),
                    h: out[2],
                    w: out[3],
                    ..blank
                })
            }
            (Op::MatMul, MaskKind::Token) => {
                let (x, wt) = (shape(0)?, shape(1)?);
                if wt.len() != 2 || x.len() < 2 {
                    return None;
                }
                let images = if out.len() == 3 { out[0] } else { 1 };
                Some(OpGeometry { kind: OpKind::TokenLinear, images, c_in: wt[0], c_out: wt[1], w: x[x.len() - 2], ..blank })
            }
            (Op::Attention(a), MaskKind::Token) if out.len() == 4 => Some(OpGeometry {
                kind: OpKind::Attention,
                heads: a.heads,
                head_dim: out[3],
                c_in: out[1] * out[3],
                c_out: out[1] * out[3],
                w: out[2],
                ..blank
            }),
            _ => None,
        }
    }

    /// Multiply-adds per computed output position (conv) or token (token ops).
    pub fn macs_per_position(&self) -> f64 {
        match self.kind {
            OpKind::Conv => (self.c_in / self.groups * self.kh * self.kw * self.c_out) as f64,
            OpKind::Depthwise => (self.kh * self.kw * self.c_out) as f64,
            OpKind::TokenLinear => (self.c_in * self.c_out) as f64,
            // Scores and the weighted sum, over every key.
            OpKind::Attention => (2 * self.heads * self.head_dim * self.w) as f64,
        }
    }

    /// The GEMM reduction length per output (K of the implicit GEMM).
    pub fn k_dim(&self) -> usize {
        match self.kind {
            OpKind::Conv => self.c_in / self.groups * self.kh * self.kw,
            OpKind::Depthwise => self.kh * self.kw,
            OpKind::TokenLinear => self.c_in,
            OpKind::Attention => self.head_dim,
        }
    }

    pub fn is_token(&self) -> bool {
        matches!(self.kind, OpKind::TokenLinear | OpKind::Attention)
    }
}

/// One knob and the values it may take, in the order the annealer steps through them.
#[derive(Clone, Debug, PartialEq)]
pub struct Knob {
    pub name: &'static str,
    pub values: Vec<i64>,
}

/// A schedule space: granularities times knob values, minus what `valid` refuses.
#[derive(Clone, Debug)]
pub struct Space {
    pub target: Target,
    pub op: OpGeometry,
    pub granularities: Vec<Granularity>,
    pub knobs: Vec<Knob>,
    /// Device limits for the validity check (GPU spaces).
    pub device: Option<DeviceDesc>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Cpu,
    Gpu,
}

/// Indices: `[granularity, knob 0, knob 1, ...]`.
pub type Point = Vec<u16>;

/// Granularities of the CPU space: sides that divide the reduced models' maps and sides that
/// do not (3, 5, 6, 12 leave phantom edges on 18x24, 9x12, 48x64), so the tuner sees the
/// phantom cost rather than assuming divisibility.
const CPU_SIDES_H: [u16; 7] = [1, 2, 3, 4, 5, 6, 8];
const CPU_SIDES_W: [u16; 8] = [1, 2, 3, 4, 6, 8, 12, 16];
const GPU_SIDES_H: [u16; 6] = [1, 2, 3, 4, 6, 8];
const GPU_SIDES_W: [u16; 6] = [1, 2, 4, 6, 8, 16];

impl Space {
    /// The CPU backend's space for `op`: every granularity the kernel can run (token ops: single
    /// tokens only, since their rows are written as computed).
    pub fn cpu(op: OpGeometry) -> Space {
        let granularities = if op.is_token() {
            vec![Granularity::new(1, 1)]
        } else {
            CPU_SIDES_H.iter().flat_map(|&h| CPU_SIDES_W.iter().map(move |&w| Granularity::new(h, w))).collect()
        };
        Space { target: Target::Cpu, op, granularities, knobs: vec![], device: None }
    }

    /// The GPU space for `op` on `dev`: the knobs of the GPU sparse kernels as profiles name
    /// them (`dynaspa_backends::gpu::sparse_conv_knobs`: `TM TN TK WM WN KS` for the implicit GEMM,
    /// the granularity alone for depthwise; the token GEMM's tile without a split, over single
    /// tokens). Attention has no schedule choice on a GPU: its space is empty.
    pub fn gpu(op: OpGeometry, dev: &DeviceDesc) -> Space {
        let sides = || GPU_SIDES_H.iter().flat_map(|&h| GPU_SIDES_W.iter().map(move |&w| Granularity::new(h, w))).collect();
        let gemm = |split: bool| -> Vec<Knob> {
            GEMM_DOMAINS
                .iter()
                .map(|&(name, values)| Knob { name, values: if name == "KS" && !split { vec![1] } else { values.to_vec() } })
                .collect()
        };
        let (granularities, knobs) = match op.kind {
            OpKind::Conv => (sides(), gemm(true)),
            OpKind::Depthwise => (sides(), vec![]),
            OpKind::TokenLinear => (vec![Granularity::new(1, 1)], gemm(false)),
            OpKind::Attention => (vec![], vec![]),
        };
        Space { target: Target::Gpu, op, granularities, knobs, device: Some(dev.clone()) }
    }

    /// Points before the validity check.
    pub fn raw_size(&self) -> usize {
        self.knobs.iter().map(|k| k.values.len()).product::<usize>() * self.granularities.len()
    }

    pub fn granularity(&self, p: &Point) -> Granularity {
        self.granularities[p[0] as usize]
    }

    /// The value of knob `name` at `p`.
    pub fn knob(&self, p: &Point, name: &str) -> Option<i64> {
        self.knobs.iter().position(|k| k.name == name).map(|i| self.knobs[i].values[p[i + 1] as usize])
    }

    /// Every valid point, in a fixed order.
    pub fn points(&self) -> Vec<Point> {
        let radices: Vec<usize> = std::iter::once(self.granularities.len()).chain(self.knobs.iter().map(|k| k.values.len())).collect();
        let mut out = Vec::new();
        let mut p: Point = vec![0; radices.len()];
        'outer: loop {
            if self.valid(&p).is_ok() {
                out.push(p.clone());
            }
            for i in (0..p.len()).rev() {
                p[i] += 1;
                if (p[i] as usize) < radices[i] {
                    continue 'outer;
                }
                p[i] = 0;
            }
            break;
        }
        out
    }

    /// Points one step away along one knob (or one granularity side), valid ones only.
    pub fn neighbours(&self, p: &Point) -> Vec<Point> {
        let mut out = Vec::new();
        let radix = |i: usize| if i == 0 { self.granularities.len() } else { self.knobs[i - 1].values.len() };
        for i in 0..p.len() {
            for d in [-1i32, 1] {
                let v = p[i] as i32 + d;
                if v >= 0 && (v as usize) < radix(i) {
                    let mut q = p.clone();
                    q[i] = v as u16;
                    if self.valid(&q).is_ok() {
                        out.push(q);
                    }
                }
            }
        }
        out
    }

    /// The GEMM knobs of a GPU point (`None` for depthwise and CPU points).
    pub fn gemm(&self, p: &Point) -> Option<GemmKnobs> {
        let k = |n: &str| self.knob(p, n).map(|v| v as u32);
        Some(GemmKnobs { tm: k("TM")?, tn: k("TN")?, tk: k("TK")?, wm: k("WM")?, wn: k("WN")?, ks: k("KS")?, wk: 1, et: false })
    }

    /// Threads one work-group of a GPU GEMM point launches.
    pub fn threads(&self, p: &Point) -> Option<usize> {
        self.gemm(p).map(|k| k.threads() as usize)
    }

    /// Bytes of local memory one work-group of a GPU GEMM point uses.
    pub fn local_bytes(&self, p: &Point) -> usize {
        let wgsl = self.device.as_ref().is_some_and(|d| d.wgsl());
        self.gemm(p).map_or(0, |k| k.local_bytes(wgsl) as usize)
    }

    /// 32-bit registers per thread of a GPU GEMM point, estimated (see `GemmKnobs::registers`).
    pub fn registers(&self, p: &Point) -> usize {
        self.gemm(p).map_or(24, |k| k.registers() as usize)
    }

    /// Why a point cannot run, or `Ok`. CPU points are valid when the kernel supports them;
    /// GPU points must fit the device and not waste most of a work-group.
    pub fn valid(&self, p: &Point) -> Result<(), String> {
        if p.len() != self.knobs.len() + 1 || p[0] as usize >= self.granularities.len() {
            return Err(format!("point {p:?} does not belong to this space"));
        }
        for (i, k) in self.knobs.iter().enumerate() {
            if p[i + 1] as usize >= k.values.len() {
                return Err(format!("knob {} index {} out of range", k.name, p[i + 1]));
            }
        }
        if self.target == Target::Cpu {
            return Ok(());
        }
        let dev = self.device.as_ref().ok_or("a GPU space needs a device")?;
        let Some(k) = self.gemm(p) else {
            // Depthwise: any granularity; attention has no points.
            return if self.op.is_token() { Err("no GPU schedules for attention".into()) } else { Ok(()) };
        };
        // What the kernels can run on the device: the same check the executor applies to a
        // profile's members.
        k.check(&dev.limits())?;
        // What they can run, but only by wasting most of the work-group or the reduction.
        let o = &self.op;
        let threads = k.threads();
        if threads < dev.simd_width / 2 {
            return Err(format!("{threads} work-items per group leave most of a {}-wide SIMD unit idle", dev.simd_width));
        }
        if k.tm as usize > o.c_out.next_power_of_two().max(16) {
            return Err(format!("TM = {} output channels per group for an op with {}", k.tm, o.c_out));
        }
        if o.kind == OpKind::TokenLinear && k.tn as usize > (o.h * o.w).next_power_of_two().max(16) {
            return Err(format!("TN = {} tokens per group for an op with {}", k.tn, o.h * o.w));
        }
        if k.ks > 1 && (k.ks * k.tk) as usize > o.k_dim() {
            return Err(format!("KS = {} splits of TK = {} for a reduction of {}: some splits get no stage", k.ks, k.tk, o.k_dim()));
        }
        Ok(())
    }

    /// The schedule of a point, with a name unique within the space (profiles, logs and
    /// caches key on it).
    pub fn schedule(&self, p: &Point) -> Schedule {
        let g = self.granularity(p);
        let gemm = self.gemm(p);
        let mut s = Schedule::sparse(schedule_name(Some(g), gemm.as_ref()), g);
        for (i, k) in self.knobs.iter().enumerate() {
            s = s.with_knob(k.name, k.values[p[i + 1] as usize]);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices;

    pub(crate) fn conv(c: usize, m: usize, h: usize, w: usize) -> OpGeometry {
        OpGeometry { kind: OpKind::Conv, images: 1, c_in: c, c_out: m, groups: 1, kh: 3, kw: 3, sh: 1, sw: 1, h, w, heads: 0, head_dim: 0 }
    }

    #[test]
    fn cpu_space_has_non_dividing_granularities_and_unique_names() {
        let s = Space::cpu(conv(16, 16, 18, 24));
        let pts = s.points();
        assert_eq!(pts.len(), 56);
        let grans: Vec<_> = pts.iter().map(|p| s.granularity(p)).collect();
        assert!(grans.contains(&Granularity::new(5, 16)), "5 divides neither 18 nor 24");
        let mut names: Vec<String> = pts.iter().map(|p| s.schedule(p).name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), pts.len());
        let tok = Space::cpu(OpGeometry { kind: OpKind::TokenLinear, ..conv(64, 64, 1, 109) });
        assert_eq!(tok.points().len(), 1);
    }

    /// The members that won on an H200 at density 0.1 (benches/RESULTS.md, "which tiles fill 132
    /// SMs") are points of the tuner's space on a CUDA device: 128 x 32 tiles of 4 x 4 split 6
    /// and 12 ways for the 1x1 conv, 24 ways for the 3x3.
    #[test]
    fn the_measured_winners_are_points_of_the_gpu_space() {
        let orin = devices::builtin("orin").unwrap();
        for (kh, ks) in [(1, 6), (1, 12), (3, 24)] {
            let sp = Space::gpu(OpGeometry { kh, kw: kh, ..conv(256, 256, 40, 40) }, &orin);
            let idx = |name: &str, v: i64| {
                sp.knobs.iter().find(|k| k.name == name).unwrap().values.iter().position(|&x| x == v).map(|i| i as u16)
            };
            let p: Option<Point> = [("TM", 128), ("TN", 32), ("TK", 16), ("WM", 4), ("WN", 4), ("KS", ks)]
                .iter()
                .map(|&(n, v)| idx(n, v))
                .collect::<Option<Vec<u16>>>()
                .map(|k| [vec![0], k].concat());
            let p = p.unwrap_or_else(|| panic!("{kh}x{kh} conv: KS = {ks} is not in the space's domain"));
            sp.valid(&p).unwrap_or_else(|e| panic!("{kh}x{kh} conv, KS = {ks}: {e}"));
            assert_eq!(sp.gemm(&p).unwrap().ks, ks as u32);
        }
    }

    #[test]
    fn gpu_points_are_schedules_the_kernels_run_on_the_device() {
        let op = conv(64, 64, 12, 16);
        let xavier = devices::builtin("xavier").unwrap();
        let adreno = devices::builtin("adreno650").unwrap();
        let sx = Space::gpu(op.clone(), &xavier);
        assert_eq!(sx.knobs.iter().map(|k| k.name).collect::<Vec<_>>(), ["TM", "TN", "TK", "WM", "WN", "KS"]);
        let pts = sx.points();
        assert!(pts.len() > 1000 && pts.len() < sx.raw_size(), "{} of {}", pts.len(), sx.raw_size());
        for p in pts.iter().step_by(97) {
            let k = sx.gemm(p).unwrap();
            assert!(k.threads() <= xavier.max_group_threads && k.threads() >= 16, "{p:?}: {k}");
            assert!(sx.local_bytes(p) <= xavier.local_mem_per_group as usize);
            assert_eq!(k.tm % k.wm, 0);
            // The schedule names exactly the kernel's defines, and reads back as the same knobs.
            let s = sx.schedule(p);
            assert_eq!(GemmKnobs::from_map(&s.knobs, GemmKnobs { tm: 1, tn: 1, tk: 1, wm: 1, wn: 1, ks: 1, wk: 1, et: false }).unwrap(), k);
            assert!(s.name.starts_with(&format!("tiles{}_m{}n{}", sx.granularity(p), k.tm, k.tn)), "{}", s.name);
            // Every neighbour is valid too.
            for q in sx.neighbours(p) {
                sx.valid(&q).unwrap();
            }
        }
        // A point over the device's work-group limit, with the reason: 128 x 128 outputs of
        // 1 x 1 per work-item.
        let idx =
            |name: &str, v: i64| sx.knobs.iter().find(|k| k.name == name).unwrap().values.iter().position(|&x| x == v).unwrap() as u16;
        let big: Point = vec![0, idx("TM", 64), idx("TN", 128), idx("TK", 16), idx("WM", 1), idx("WN", 1), idx("KS", 1)];
        let e = sx.valid(&big).unwrap_err();
        assert!(e.contains("work-items per group"), "{e}");
        // KS = 16 splits of 32 for a reduction of 64 x 9 = 576: fine; of 1 x 1 x 16 = 16: not.
        let split: Point = vec![0, idx("TM", 64), idx("TN", 32), idx("TK", 32), idx("WM", 4), idx("WN", 2), idx("KS", 16)];
        sx.valid(&split).unwrap();
        let e = Space::gpu(OpGeometry { kh: 1, kw: 1, c_in: 16, ..op.clone() }, &xavier).valid(&split).unwrap_err();
        assert!(e.contains("KS = 16"), "{e}");
        // Less local memory on the Adreno: stages that fit a Volta SM do not fit there.
        let sa = Space::gpu(op.clone(), &adreno);
        let big_x = sx.points().into_iter().filter(|p| sx.local_bytes(p) > 24 * 1024).count();
        let big_a = sa.points().into_iter().filter(|p| sa.local_bytes(p) > 24 * 1024).count();
        assert!(big_x > 0 && big_a < big_x, "adreno {big_a} points over 24 KiB, xavier {big_x}");
        // WGSL (lavapipe-like): at most 256 invocations, 16 KiB, 16 outputs per invocation.
        let mut lp = xavier.clone();
        lp.backend = "wgpu".into();
        let sw = Space::gpu(op.clone(), &lp);
        assert!(sw
            .points()
            .iter()
            .all(|p| sw.gemm(p).is_some_and(|k| k.threads() <= 256 && k.wm * k.wn <= 16 && k.local_bytes(true) <= 16384)));
        // Depthwise: the granularity alone; attention: nothing to choose on a GPU.
        let dw = Space::gpu(OpGeometry { kind: OpKind::Depthwise, ..op.clone() }, &xavier);
        assert_eq!(dw.points().len(), 36);
        assert_eq!(dw.schedule(&dw.points()[7]).knobs.len(), 0);
        assert!(Space::gpu(OpGeometry { kind: OpKind::Attention, ..op.clone() }, &xavier).points().is_empty());
        // Token projections (DeiT-S qkv: 197 tokens, 384 -> 1152): the GEMM tile over single
        // tokens, never split, no more tokens per group than the op has (rounded up).
        let tok = OpGeometry { kind: OpKind::TokenLinear, c_in: 384, c_out: 1152, kh: 1, kw: 1, h: 1, w: 197, ..op };
        let st = Space::gpu(tok.clone(), &xavier);
        let pts = st.points();
        assert!(pts.len() > 50, "{} token points", pts.len());
        for p in &pts {
            let k = st.gemm(p).unwrap();
            assert_eq!((st.granularity(p), k.ks), (Granularity::new(1, 1), 1));
            let s = st.schedule(p);
            assert!(s.name.starts_with("tiles1x1_") && s.name.ends_with("_s1"), "{}", s.name);
        }
        let few = Space::gpu(OpGeometry { w: 10, ..tok }, &xavier);
        assert!(few.points().iter().all(|p| few.gemm(p).unwrap().tn <= 16));
    }
}
