//! Schedule spaces per op kind, as data: the knobs, their values, and which combinations a
//! device can run. A point of a space is a list of indices into the knob domains; the tuner
//! walks points (the annealer changes one knob by one step) and turns the chosen ones into
//! [`Schedule`]s for profiles.
//!
//! Two targets. The CPU sparse kernels have one knob, the DISTile granularity (the gather and
//! the packed GEMM's register tile are fixed in the kernel). The GPU spaces are the implicit
//! GEMM knobs of the GPU sparse conv and token kernels (positions and output channels per
//! work-group, outputs per thread, K step, staging in local memory, unroll, vector width),
//! checked against the device's limits (threads per group, local memory, registers) without
//! depending on the kernel code.

use crate::devices::DeviceDesc;
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

    /// The GPU space for `op` on `dev`: implicit-GEMM knobs (token ops: rows per work-group in
    /// place of tiles; granularity 1x1).
    pub fn gpu(op: OpGeometry, dev: &DeviceDesc) -> Space {
        let granularities = if op.is_token() {
            vec![Granularity::new(1, 1)]
        } else {
            GPU_SIDES_H.iter().flat_map(|&h| GPU_SIDES_W.iter().map(move |&w| Granularity::new(h, w))).collect()
        };
        let knobs = vec![
            // DISTiles (token ops: tokens) one work-group computes.
            Knob { name: "tiles_per_group", values: vec![1, 2, 4, 8, 16] },
            Knob { name: "oc_per_group", values: vec![8, 16, 32, 64, 128] },
            // Outputs per thread (register blocking).
            Knob { name: "work_per_thread", values: vec![1, 2, 4, 8, 16] },
            Knob { name: "k_step", values: vec![4, 8, 16, 32] },
            // 1: the input patch and the weight slice of a K step go through local memory.
            Knob { name: "stage", values: vec![0, 1] },
            Knob { name: "unroll", values: vec![1, 2, 4, 8] },
            Knob { name: "vec", values: vec![1, 2, 4] },
        ];
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
        let radices: Vec<usize> =
            std::iter::once(self.granularities.len()).chain(self.knobs.iter().map(|k| k.values.len())).collect();
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

    /// Threads one work-group of a GPU point launches.
    pub fn threads(&self, p: &Point) -> Option<usize> {
        let g = self.granularity(p);
        let (tiles, oc, wpt) = (self.knob(p, "tiles_per_group")?, self.knob(p, "oc_per_group")?, self.knob(p, "work_per_thread")?);
        let outputs = tiles as usize * g.h as usize * g.w as usize * oc as usize;
        (outputs % wpt as usize == 0).then_some(outputs / wpt as usize)
    }

    /// Bytes of local memory one work-group of a GPU point uses (0 without staging): the input
    /// patch of its positions with the halo, and the weight slice, for one K step.
    pub fn local_bytes(&self, p: &Point) -> usize {
        if self.knob(p, "stage") != Some(1) {
            return 0;
        }
        let g = self.granularity(p);
        let o = &self.op;
        let (tiles, oc, ks) =
            (self.knob(p, "tiles_per_group").unwrap_or(1) as usize, self.knob(p, "oc_per_group").unwrap_or(1) as usize, self.knob(p, "k_step").unwrap_or(1) as usize);
        let patch = if o.is_token() {
            tiles
        } else {
            tiles * ((g.h as usize - 1) * o.sh + o.kh) * ((g.w as usize - 1) * o.sw + o.kw)
        };
        4 * (patch * ks.min(o.k_dim().max(1)) + ks * oc)
    }

    /// 32-bit registers per thread a GPU point needs, estimated: the accumulators, a K step's
    /// operands as unrolled, vector loads, and a fixed allowance for addressing.
    pub fn registers(&self, p: &Point) -> usize {
        let (wpt, unroll, v) =
            (self.knob(p, "work_per_thread").unwrap_or(1), self.knob(p, "unroll").unwrap_or(1), self.knob(p, "vec").unwrap_or(1));
        (wpt + unroll * v * 2 + 24) as usize
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
        let o = &self.op;
        let g = self.granularity(p);
        let knob = |n: &str| self.knob(p, n).unwrap_or(1) as usize;
        let (oc, wpt, ks, unroll, v) = (knob("oc_per_group"), knob("work_per_thread"), knob("k_step"), knob("unroll"), knob("vec"));
        let threads = self.threads(p).ok_or("outputs per group not divisible by work per thread")?;
        if threads > dev.max_group_threads as usize {
            return Err(format!("{threads} threads per group; the device allows {}", dev.max_group_threads));
        }
        if threads < dev.simd_width as usize / 2 {
            return Err(format!("{threads} threads per group leave most of a {}-wide SIMD unit idle", dev.simd_width));
        }
        if oc > o.c_out.next_power_of_two().max(8) {
            return Err(format!("{oc} output channels per group for an op with {}", o.c_out));
        }
        // A thread's outputs run along channels, vector-wide.
        if wpt % v != 0 || oc % v != 0 {
            return Err(format!("vector width {v} must divide work per thread {wpt} and channels per group {oc}"));
        }
        if wpt > oc {
            return Err(format!("work per thread {wpt} exceeds channels per group {oc}"));
        }
        if ks % unroll != 0 {
            return Err(format!("unroll {unroll} must divide the K step {ks}"));
        }
        if ks > o.k_dim().next_power_of_two().max(4) {
            return Err(format!("K step {ks} beyond the reduction length {}", o.k_dim()));
        }
        if o.is_token() && g != Granularity::new(1, 1) {
            return Err("token ops take single tokens".into());
        }
        let local = self.local_bytes(p);
        if local > dev.local_mem_per_group as usize {
            return Err(format!("{local} B of local memory per group; the device allows {}", dev.local_mem_per_group));
        }
        let regs = self.registers(p);
        if regs > dev.max_registers_per_thread as usize {
            return Err(format!("about {regs} registers per thread; the device allows {}", dev.max_registers_per_thread));
        }
        Ok(())
    }

    /// The schedule of a point, with a name unique within the space (profiles, logs and
    /// caches key on it).
    pub fn schedule(&self, p: &Point) -> Schedule {
        let g = self.granularity(p);
        let mut name = format!("tiles{g}");
        let mut s = Schedule::sparse(String::new(), g);
        for (i, k) in self.knobs.iter().enumerate() {
            let v = k.values[p[i + 1] as usize];
            name += &format!("_{}{v}", abbrev(k.name));
            s = s.with_knob(k.name, v);
        }
        s.name = name;
        s
    }
}

fn abbrev(knob: &str) -> &str {
    match knob {
        "tiles_per_group" => "t",
        "oc_per_group" => "oc",
        "work_per_thread" => "w",
        "k_step" => "k",
        "stage" => "s",
        "unroll" => "u",
        "vec" => "v",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices;

    pub(crate) fn conv(c: usize, m: usize, h: usize, w: usize) -> OpGeometry {
        OpGeometry {
            kind: OpKind::Conv,
            images: 1,
            c_in: c,
            c_out: m,
            groups: 1,
            kh: 3,
            kw: 3,
            sh: 1,
            sw: 1,
            h,
            w,
            heads: 0,
            head_dim: 0,
        }
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

    #[test]
    fn gpu_validity_follows_the_device_limits() {
        let op = conv(64, 64, 12, 16);
        let xavier = devices::builtin("xavier").unwrap();
        let adreno = devices::builtin("adreno650").unwrap();
        let sx = Space::gpu(op.clone(), &xavier);
        let pts = sx.points();
        assert!(pts.len() > 1000 && pts.len() < sx.raw_size(), "{} of {}", pts.len(), sx.raw_size());
        for p in pts.iter().step_by(97) {
            let t = sx.threads(p).unwrap();
            assert!(t <= xavier.max_group_threads as usize && t >= 16, "{p:?}: {t}");
            assert!(sx.local_bytes(p) <= xavier.local_mem_per_group as usize);
            // Every neighbour is valid too.
            for q in sx.neighbours(p) {
                sx.valid(&q).unwrap();
            }
        }
        // A point over the device's work-group limit, with the reason.
        let mut big: Point = vec![0; 8];
        big[0] = sx.granularities.iter().position(|&g| g == Granularity::new(8, 16)).unwrap() as u16;
        big[1] = 4; // 16 tiles
        big[2] = 4; // 128 channels: 8*16*16*128 outputs
        let e = sx.valid(&big).unwrap_err();
        assert!(e.contains("threads per group"), "{e}");
        // Less local memory on the Adreno: staging that fits a Volta SM does not fit there.
        let sa = Space::gpu(op, &adreno);
        let fits_x = sx.points().into_iter().filter(|p| sx.local_bytes(p) > 0).count();
        let fits_a = sa.points().into_iter().filter(|p| sa.local_bytes(p) > 0).count();
        assert!(fits_a < fits_x, "adreno {fits_a} staged points, xavier {fits_x}");
    }
}
