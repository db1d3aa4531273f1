//! The vendor-conv path of the lowering (gpu/lower/vendor_conv.rs) without a vendor library:
//! a stand-in device wraps the OpenCL one and answers `vendor_conv` with a "library" that runs
//! our direct conv kernel, checking each call's buffers the way cuDNN's wrapper does. Checked
//! against the CPU backend: dense convs with every epilogue (bare conv + our epilogue pass, and
//! the fused form), sparse ops' dense members with zero, residual and cached fills, a fused
//! form the library refuses at run time, the shared workspace growing, the policy, and the
//! decision remembered per shape.

use super::device::{Arg, DeviceInfo, GpuDevice, KernelSpec, VendorConv, VendorConvDesc, VendorPolicy};
use super::test_compare::rel_l2;
use super::Precision;
use super::{GpuExecutable, GpuOptions};
use crate::cpu::CpuBackend;
use crate::opencl::{ClBuffer, ClEvent, ClKernel, ClStaging, OpenClDevice};
use crate::{ForceMember, SparseConfig};
use dynaspa_runtime::backend::{Backend, Executable};
use dynaspa_runtime::graph::{Activation, AutoPad, Conv, FillPolicy, Graph, MaskKind, MaskSource, Node, Op, SparseSpec, Value, Window};
use dynaspa_runtime::{DType, Error, Result, Tensor};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

struct Shim {
    inner: Arc<OpenClDevice>,
    info: DeviceInfo,
    policy: VendorPolicy,
    /// Times each vendor launch repeats the conv (bare, fused): a slow library or form.
    repeat: [usize; 2],
    /// Fused launches fail, as a library refusing an algorithm for the fused form would.
    refuse_fused: bool,
    plans: AtomicUsize,
    launches: AtomicUsize,
    fused_launches: AtomicUsize,
    /// Bytes of the workspace buffer the last vendor launch was given.
    last_workspace: AtomicUsize,
    /// Work-items per group the sparse conv GEMM allows, as a compiler that spends more
    /// registers would (`None`: the device's limit).
    gemm_limit: Option<u32>,
}

enum ShimKernel {
    /// With the work-items per group it can run, where the shim limits it.
    Ours(ClKernel, Option<u32>),
    /// `alt`: a second algorithm for bare convs, always slow.
    Vendor { d: VendorConvDesc, workspace: usize, alt: bool },
}

struct ShimBuf {
    b: ClBuffer,
    bytes: usize,
}

impl Shim {
    /// A stand-in on a device of its own: the tests time candidates, and a queue shared with
    /// other tests would make them wait for those tests' work.
    fn new(tag: &str, policy: VendorPolicy) -> Option<Shim> {
        let own = || -> Result<Arc<OpenClDevice>> {
            let entry = crate::opencl::select(&crate::opencl::list()?, None)?;
            Ok(Arc::new(OpenClDevice::open(&entry, None)?))
        };
        let inner = match own() {
            Ok(d) => d,
            Err(e) => {
                let required = std::env::var("DYNASPA_REQUIRE_BACKENDS").is_ok_and(|v| v.split(',').any(|b| b.trim() == "opencl"));
                assert!(!required, "opencl is required: {e}");
                eprintln!("skipped: {e}");
                return None;
            }
        };
        // A name of its own: remembered decisions are per device.
        let info =
            DeviceInfo { name: format!("{} (vendor shim {tag}, {})", inner.info().name, std::process::id()), ..inner.info().clone() };
        Some(Shim {
            inner,
            info,
            policy,
            repeat: [1, 1],
            refuse_fused: false,
            plans: AtomicUsize::new(0),
            launches: AtomicUsize::new(0),
            fused_launches: AtomicUsize::new(0),
            last_workspace: AtomicUsize::new(0),
            gemm_limit: None,
        })
    }

    fn run_vendor(&self, d: &VendorConvDesc, workspace: usize, alt: bool, args: &[Arg<'_, ShimBuf>]) -> Result<()> {
        let bufs: Vec<&ShimBuf> = args.iter().filter_map(|a| if let Arg::Buf(b) = a { Some(*b) } else { None }).collect();
        let [x, w, bias, z, y, ws] = bufs[..] else { return Err(Error::Other(format!("{} vendor arguments", args.len()))) };
        let need = |b: &ShimBuf, n: usize, what: &str| {
            if b.bytes < n {
                Err(Error::Other(format!("vendor {what}: {} bytes, needs {n}", b.bytes)))
            } else {
                Ok(())
            }
        };
        // Float tensors as the executable stores them: 2 bytes at f16.
        let e = d.precision.elem_bytes(DType::F32);
        need(x, e * d.n * d.cin * d.h * d.w, "x")?;
        need(w, e * d.cout * d.cin / d.groups * d.kernel[0] * d.kernel[1], "w")?;
        need(y, e * d.n * d.cout * d.oh * d.ow, "y")?;
        need(ws, workspace, "workspace")?;
        self.last_workspace.store(ws.bytes, Ordering::Relaxed);
        if let Some(f) = d.fused {
            if self.refuse_fused {
                return Err(Error::Other("the shim refuses the fused form".into()));
            }
            need(bias, e * d.cout, "bias")?;
            if f.residual {
                need(z, e * d.n * d.cout * d.oh * d.ow, "z")?;
            }
        }
        let (cin_g, cout_g) = (d.cin / d.groups, d.cout / d.groups);
        let mut a = vec![Arg::Buf(&x.b), Arg::Buf(&w.b), Arg::Buf(&bias.b), Arg::Buf(&z.b), Arg::Buf(&y.b)];
        let ints = [
            cin_g,
            cout_g,
            d.groups,
            1,
            d.h,
            d.w,
            1,
            d.oh,
            d.ow,
            1,
            d.kernel[0],
            d.kernel[1],
            1,
            d.stride[0],
            d.stride[1],
            0,
            d.pad[0],
            d.pad[1],
            1,
            d.dilation[0],
            d.dilation[1],
        ];
        a.extend(ints.iter().map(|&v| Arg::I32(v as i32)));
        let (has_res, act) = match d.fused {
            Some(f) => (f.residual as i32, if f.relu { 0 } else { -1 }),
            None => (0, -1),
        };
        let total = d.n * d.cout * d.oh * d.ow;
        a.extend([
            Arg::I32(d.fused.is_some() as i32),
            Arg::I32(has_res),
            Arg::I32(act),
            Arg::F32(0.0),
            Arg::F32(0.0),
            Arg::I32(total as i32),
        ]);
        // A library reads and writes the tensors' stored type: half at f16.
        let half: &[(&str, i64)] = if d.precision == Precision::F16 { &[("DSP_HALF", 1)] } else { &[] };
        let k = self.inner.kernel(&super::kernels::spec(super::kernels::Src::Conv, "conv_direct_f32", half))?;
        let repeat = if alt { 40 } else { self.repeat[d.fused.is_some() as usize] };
        for _ in 0..repeat {
            self.inner.launch(&k, [total.div_ceil(64) as u32, 1, 1], [64, 1, 1], &a)?;
        }
        self.launches.fetch_add(1, Ordering::Relaxed);
        if d.fused.is_some() {
            self.fused_launches.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

impl GpuDevice for Shim {
    type Buffer = ShimBuf;
    type Kernel = ShimKernel;
    type Event = ClEvent;
    type Staging = ClStaging;
    type Graph = ();

    fn kernel_max_threads(&self, kernel: &ShimKernel) -> Option<u32> {
        match kernel {
            ShimKernel::Ours(_, limit) => *limit,
            ShimKernel::Vendor { .. } => None,
        }
    }

    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn staging(&self, bytes: usize) -> Result<ClStaging> {
        self.inner.staging(bytes)
    }
    fn download_async(&self, src: &ShimBuf, offset: usize, dst: &ClStaging, after: Option<&Self::Event>) -> Result<()> {
        self.inner.download_async(&src.b, offset, dst, after)
    }
    fn read_staging(&self, st: &ClStaging, out: &mut [u8]) -> Result<()> {
        self.inner.read_staging(st, out)
    }
    fn alloc(&self, bytes: usize) -> Result<ShimBuf> {
        Ok(ShimBuf { b: self.inner.alloc(bytes)?, bytes })
    }
    fn upload(&self, dst: &ShimBuf, offset: usize, data: &[u8]) -> Result<()> {
        self.inner.upload(&dst.b, offset, data)
    }
    fn download(&self, src: &ShimBuf, offset: usize, out: &mut [u8]) -> Result<()> {
        self.inner.download(&src.b, offset, out)
    }
    fn kernel(&self, spec: &KernelSpec) -> Result<ShimKernel> {
        let limit = self.gemm_limit.filter(|_| spec.entry == "sparse_conv_gemm_f32");
        Ok(ShimKernel::Ours(self.inner.kernel(spec)?, limit))
    }
    fn launch(&self, kernel: &ShimKernel, groups: [u32; 3], local: [u32; 3], args: &[Arg<'_, ShimBuf>]) -> Result<()> {
        match kernel {
            ShimKernel::Ours(k, _) => {
                let a: Vec<Arg<'_, ClBuffer>> = args
                    .iter()
                    .map(|a| match a {
                        Arg::Buf(b) => Arg::Buf(&b.b),
                        Arg::I32(v) => Arg::I32(*v),
                        Arg::U32(v) => Arg::U32(*v),
                        Arg::F32(v) => Arg::F32(*v),
                    })
                    .collect();
                self.inner.launch(k, groups, local, &a)
            }
            ShimKernel::Vendor { d, workspace, alt } => self.run_vendor(d, *workspace, *alt, args),
        }
    }
    fn fill_zero_async(&self, buf: &ShimBuf, offset: usize, bytes: usize, after: &[ClEvent]) -> Result<ClEvent> {
        self.inner.fill_zero_async(&buf.b, offset, bytes, after)
    }
    fn marker(&self) -> Result<ClEvent> {
        self.inner.marker()
    }
    fn wait_for(&self, events: &[ClEvent]) -> Result<()> {
        self.inner.wait_for(events)
    }
    fn finish(&self) -> Result<()> {
        self.inner.finish()
    }
    fn vendor_policy(&self) -> VendorPolicy {
        self.policy
    }
    fn vendor_convs(&self, d: &VendorConvDesc, _x: &ShimBuf, _w: &ShimBuf, _y: &ShimBuf) -> Result<Vec<VendorConv<ShimKernel>>> {
        self.plans.fetch_add(1, Ordering::Relaxed);
        // Workspaces of different sizes per conv, so the shared one has to grow.
        let workspace = 64 * d.cout * d.kernel[0];
        let label = if d.fused.is_some() { "shim fused" } else { "shim" };
        let mut v = vec![VendorConv { kernel: ShimKernel::Vendor { d: d.clone(), workspace, alt: false }, workspace, label: label.into() }];
        if d.fused.is_none() {
            let kernel = ShimKernel::Vendor { d: d.clone(), workspace: 2 * workspace, alt: true };
            v.push(VendorConv { kernel, workspace: 2 * workspace, label: "shim alt".into() });
        }
        Ok(v)
    }
}

struct Rng(u64);
impl Rng {
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                let v = (self.0 >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
                if v.abs() < 1e-3 {
                    0.25
                } else {
                    v
                }
            })
            .collect()
    }
}

fn value(g: &mut Graph, name: &str, shape: &[usize], c: Option<Vec<f32>>) -> usize {
    let constant = c.map(|v| Arc::new(Tensor::from_f32(shape.to_vec(), v).unwrap()));
    g.values.push(Value { name: name.into(), dtype: DType::F32, shape: shape.to_vec(), constant });
    g.values.len() - 1
}

/// One conv layer's parameters.
#[derive(Clone, Copy)]
struct Layer {
    cin: usize,
    cout: usize,
    k: usize,
    s: usize,
    group: usize,
    bias: bool,
    residual: bool,
    act: Option<Activation>,
}

/// A chain of convs on an n x cin x hw x hw input; with `fill`, the last one is sparse over
/// the model input `m`.
fn graph(n: usize, hw: usize, layers: &[Layer], fill: Option<FillPolicy>, rng: &mut Rng) -> Graph {
    let mut g = Graph { name: "vendor".into(), opset: 17, ..Default::default() };
    let mut cur = value(&mut g, "x", &[n, layers[0].cin, hw, hw], None);
    g.inputs = vec![cur];
    let mut size = hw;
    for (i, l) in layers.iter().enumerate() {
        let out = (size + 2 * (l.k / 2) - l.k) / l.s + 1;
        let w = value(&mut g, &format!("w{i}"), &[l.cout, l.cin / l.group, l.k, l.k], Some(rng.vec(l.cout * l.cin / l.group * l.k * l.k)));
        let mut inputs = vec![Some(cur), Some(w), None];
        if l.bias {
            inputs[2] = Some(value(&mut g, &format!("b{i}"), &[l.cout], Some(rng.vec(l.cout))));
        }
        if l.residual {
            let r = value(&mut g, &format!("r{i}"), &[n, l.cout, out, out], None);
            g.inputs.push(r);
            inputs.push(Some(r));
        }
        let y = value(&mut g, &format!("y{i}"), &[n, l.cout, out, out], None);
        let window = Window {
            kernel_shape: vec![l.k, l.k],
            strides: vec![l.s, l.s],
            pads: vec![l.k / 2; 4],
            dilations: vec![1, 1],
            auto_pad: AutoPad::NotSet,
        };
        let op = Op::Conv(Conv { window, group: l.group, fused_add: l.residual, activation: l.act });
        let sparse = match fill {
            Some(fill) if i + 1 == layers.len() => {
                let m = value(&mut g, "m", &[n, 1, out, out], None);
                g.inputs.push(m);
                Some(SparseSpec {
                    mask: m,
                    kind: MaskKind::Spatial,
                    source: MaskSource::ModelInput { name: "m".into() },
                    dilation: [0, 0],
                    fill,
                    fused_mul: true,
                })
            }
            _ => None,
        };
        g.nodes.push(Node { name: format!("conv{i}"), op, inputs, outputs: vec![y], sparse });
        cur = y;
        size = out;
    }
    g.outputs = vec![cur];
    g
}

fn inputs(g: &Graph, rng: &mut Rng, density: f64) -> Vec<Tensor> {
    g.inputs
        .iter()
        .map(|&v| {
            let val = &g.values[v];
            let n: usize = val.shape.iter().product();
            let data = if val.name == "m" {
                rng.vec(n).iter().map(|&r| ((r + 1.0) / 2.0 < density as f32) as u8 as f32).collect()
            } else {
                rng.vec(n)
            };
            Tensor::from_f32(val.shape.clone(), data).unwrap()
        })
        .collect()
}

fn opts(force_dense: bool) -> GpuOptions {
    GpuOptions {
        poison: true,
        sparse: SparseConfig { cache_dir: None, force: force_dense.then_some(ForceMember::Dense), profile: None },
        ..Default::default()
    }
}

/// Runs `frames` (input sets) through `g` on the shim and the CPU; every output within 1e-5
/// relative L2 and without NaN (poisoned outputs a vendor path forgot to write).
fn agree(shim: Arc<Shim>, g: &Graph, frames: &[Vec<Tensor>], what: &str) -> GpuExecutable<Shim> {
    let mut exe = GpuExecutable::compile(shim, "shim", g, &opts(true)).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut cpu = CpuBackend::new(Some(2)).unwrap().compile(Arc::new(g.clone())).unwrap();
    for (i, f) in frames.iter().enumerate() {
        let got = exe.run(f).unwrap_or_else(|e| panic!("{what}: {e}"));
        let want = cpu.run(f).unwrap();
        let (a, b) = (got[0].as_f32().unwrap(), want[0].as_f32().unwrap());
        assert!(a.iter().all(|v| v.is_finite()), "{what}, frame {i}: unwritten (NaN) outputs");
        let e = rel_l2(a, b);
        assert!(e < 1e-5, "{what}, frame {i}: relative L2 {e:.2e}");
    }
    exe
}

const L: Layer = Layer { cin: 8, cout: 16, k: 3, s: 1, group: 1, bias: true, residual: false, act: Some(Activation::Relu) };

#[test]
fn forced_vendor_convs_match_the_cpu_with_every_epilogue() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let cases = [
        ("3x3 bias relu", L),
        ("3x3 s2 no bias", Layer { s: 2, bias: false, act: None, ..L }),
        ("1x1 bias residual relu", Layer { k: 1, residual: true, ..L }),
        ("3x3 residual, no activation", Layer { residual: true, act: None, ..L }),
        ("grouped 3x3 sigmoid", Layer { group: 2, act: Some(Activation::Sigmoid), ..L }),
        ("3x3 leaky relu", Layer { act: Some(Activation::LeakyRelu(0.1)), ..L }),
    ];
    for (what, l) in cases {
        // The bare conv (then our epilogue) slow, then the fused form: timing picks the other.
        for slow in [0usize, 1] {
            let tag = format!("{what}, slow {}", ["bare", "fused"][slow]);
            let Some(mut shim) = Shim::new(&tag, VendorPolicy::Always) else { return };
            shim.repeat[slow] = 40;
            let shim = Arc::new(shim);
            let g = graph(2, 11, &[l], None, &mut rng);
            let f = inputs(&g, &mut rng, 1.0);
            let mut exe = GpuExecutable::compile(shim.clone(), "shim", &g, &opts(true)).unwrap();
            let (runs, fused) = (shim.launches.load(Ordering::Relaxed), shim.fused_launches.load(Ordering::Relaxed));
            exe.run(&f).unwrap();
            assert_eq!(shim.launches.load(Ordering::Relaxed), runs + 1, "{tag}: the vendor conv did not run once per frame");
            let fusable = matches!(l.act, None | Some(Activation::Relu)) && (l.bias || l.residual || l.act.is_some());
            let fused_ran = shim.fused_launches.load(Ordering::Relaxed) > fused;
            assert_eq!(fused_ran, fusable && slow == 0, "{tag}: the fused form ran: {fused_ran}");
            agree(shim.clone(), &g, &[f], &tag);
        }
    }
}

#[test]
fn a_fused_form_the_library_refuses_falls_back_to_the_bare_conv() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let Some(mut shim) = Shim::new("refuse", VendorPolicy::Always) else { return };
    shim.refuse_fused = true;
    let shim = Arc::new(shim);
    let g = graph(1, 9, &[Layer { residual: true, ..L }], None, &mut rng);
    let f = inputs(&g, &mut rng, 1.0);
    agree(shim.clone(), &g, &[f], "refused fused form");
    assert!(shim.launches.load(Ordering::Relaxed) >= 1);
}

#[test]
fn dense_members_keep_the_fill_policy() {
    let mut rng = Rng(0x0bad_cafe_dead_beef);
    for fill in [FillPolicy::Zero, FillPolicy::Residual, FillPolicy::Cached] {
        let what = format!("{fill:?} fill");
        let Some(shim) = Shim::new(&what, VendorPolicy::Always) else { return };
        let shim = Arc::new(shim);
        let l = Layer { residual: fill == FillPolicy::Residual, ..L };
        let g = graph(2, 13, &[Layer { cout: 8, ..L }, l], Some(fill), &mut rng);
        // Cached: the second and third frames keep the first's activations where inactive.
        let frames: Vec<Vec<Tensor>> = [1.0, 0.3, 0.6].iter().map(|&d| inputs(&g, &mut rng, d)).collect();
        let exe = agree(shim.clone(), &g, &frames, &what);
        let ops = exe.sparse_ops();
        assert_eq!(ops[0].dense_vendor.as_deref(), Some("shim + epilogue"), "{what}: {:?}", ops[0]);
    }
}

#[test]
fn the_workspace_grows_to_the_largest_conv_and_is_shared() {
    let mut rng = Rng(0x5151_7272_9393_a4a4);
    let Some(shim) = Shim::new("workspace", VendorPolicy::Always) else { return };
    let shim = Arc::new(shim);
    // Workspaces 64 x cout x k bytes: the last conv's is the largest, and the first one's
    // launch must still find enough.
    let layers = [Layer { cout: 8, k: 1, ..L }, Layer { cin: 8, cout: 16, ..L }, Layer { cin: 16, cout: 32, k: 5, ..L }];
    let g = graph(1, 10, &layers, None, &mut rng);
    let f = inputs(&g, &mut rng, 1.0);
    agree(shim.clone(), &g, &[f], "three convs");
    assert!(shim.launches.load(Ordering::Relaxed) >= 3);
    // The slow second algorithm (twice the workspace) lost every race: the executable keeps
    // what the winners need, the largest conv's 64 x 32 x 5 bytes.
    assert_eq!(shim.last_workspace.load(Ordering::Relaxed), 64 * 32 * 5);
}

#[test]
fn timing_keeps_our_kernels_against_a_slow_library_and_remembers_it() {
    let mut rng = Rng(0x7777_1111_2222_3333);
    let Some(mut shim) = Shim::new("slow", VendorPolicy::Timed) else { return };
    shim.repeat = [100, 100];
    let shim = Arc::new(shim);
    let g = graph(1, 12, &[L], None, &mut rng);
    let f = inputs(&g, &mut rng, 1.0);
    agree(shim.clone(), &g, std::slice::from_ref(&f), "timed");
    let plans = shim.plans.load(Ordering::Relaxed);
    assert!(plans >= 1, "the library was never asked");
    let before = shim.launches.load(Ordering::Relaxed);
    let mut exe = GpuExecutable::compile(shim.clone(), "shim", &g, &opts(false)).unwrap();
    exe.run(&f).unwrap();
    assert_eq!(shim.plans.load(Ordering::Relaxed), plans, "the second compile of the shape asked the library again");
    assert_eq!(shim.launches.load(Ordering::Relaxed), before, "a library 100x slower was chosen");
}

/// With a cache directory the race's decision outlives the process: a later start (this
/// process's memory forgotten) asks the library nothing where our kernels won, and where the
/// library won it plans its convs but times nothing; another directory races again.
#[test]
fn the_race_is_remembered_on_disk_for_the_next_start() {
    let mut rng = Rng(0x2468_1357_aaaa_5555);
    let dir = std::env::temp_dir().join(format!("dynaspa-vendor-memo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let with_dir = |d: &std::path::Path| GpuOptions {
        sparse: SparseConfig { cache_dir: Some(d.to_path_buf()), force: Some(ForceMember::Dense), profile: None },
        ..opts(true)
    };
    // Our kernels win against a library 100x slower.
    let Some(mut shim) = Shim::new("memo slow", VendorPolicy::Timed) else { return };
    shim.repeat = [100, 100];
    let shim = Arc::new(shim);
    let g = graph(1, 12, &[L], None, &mut rng);
    let f = inputs(&g, &mut rng, 1.0);
    GpuExecutable::compile(shim.clone(), "shim", &g, &with_dir(&dir)).unwrap().run(&f).unwrap();
    let plans = shim.plans.load(Ordering::Relaxed);
    assert!(plans >= 1, "the library was never asked");
    super::lower::vendor_conv::forget_in_memory(&shim.info().fingerprint());
    let mut exe = GpuExecutable::compile(shim.clone(), "shim", &g, &with_dir(&dir)).unwrap();
    assert_eq!(shim.plans.load(Ordering::Relaxed), plans, "a later start asked the library again");
    let want = CpuBackend::new(Some(2)).unwrap().compile(Arc::new(g.clone())).unwrap().run(&f).unwrap();
    assert!(rel_l2(exe.run(&f).unwrap()[0].as_f32().unwrap(), want[0].as_f32().unwrap()) < 1e-5);
    super::lower::vendor_conv::forget_in_memory(&shim.info().fingerprint());
    GpuExecutable::compile(shim.clone(), "shim", &g, &with_dir(&dir.join("other"))).unwrap();
    assert!(shim.plans.load(Ordering::Relaxed) > plans, "an empty cache directory did not race");

    // The library wins (forced) as a sparse op's dense member: the next start plans its convs
    // and times none of them.
    let Some(shim) = Shim::new("memo vendor", VendorPolicy::Always) else { return };
    let shim = Arc::new(shim);
    let g = graph(1, 12, &[L], Some(FillPolicy::Zero), &mut rng);
    let f = inputs(&g, &mut rng, 0.5);
    let first = shim.launches.load(Ordering::Relaxed);
    let exe = GpuExecutable::compile(shim.clone(), "shim", &g, &with_dir(&dir)).unwrap();
    let raced = shim.launches.load(Ordering::Relaxed) - first;
    let label = exe.sparse_ops()[0].dense_vendor.clone();
    assert!(label.is_some(), "the dense member is not the library's");
    super::lower::vendor_conv::forget_in_memory(&shim.info().fingerprint());
    let before = shim.launches.load(Ordering::Relaxed);
    let mut exe = GpuExecutable::compile(shim.clone(), "shim", &g, &with_dir(&dir)).unwrap();
    let again = shim.launches.load(Ordering::Relaxed) - before;
    assert!(again < raced, "the remembered start launched the library {again} times, the racing one {raced}");
    assert_eq!(exe.sparse_ops()[0].dense_vendor, label);
    let want = CpuBackend::new(Some(2)).unwrap().compile(Arc::new(g.clone())).unwrap().run(&f).unwrap();
    assert!(rel_l2(exe.run(&f).unwrap()[0].as_f32().unwrap(), want[0].as_f32().unwrap()) < 1e-5);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn never_asks_no_library() {
    let mut rng = Rng(0x4444_5555_6666_7777);
    let Some(shim) = Shim::new("never", VendorPolicy::Never) else { return };
    let shim = Arc::new(shim);
    let g = graph(1, 8, &[L], Some(FillPolicy::Zero), &mut rng);
    let f = inputs(&g, &mut rng, 0.5);
    let exe = agree(shim.clone(), &g, &[f], "never");
    assert_eq!(shim.plans.load(Ordering::Relaxed), 0);
    assert_eq!(exe.sparse_ops()[0].dense_vendor, None);
}

/// At f16 the library reads and writes half tensors: its bare conv's output goes through our
/// epilogue (bias, residual, activation, a dense member's masked store) read as half, and the
/// fused form takes a half bias. Every form against the CPU's f32, within half's rounding.
#[test]
fn half_precision_vendor_convs_match_the_cpu_with_every_epilogue() {
    let mut rng = Rng(0x1357_9bdf_2468_ace0);
    let cases = [
        ("3x3 bias relu", L, None),
        ("1x1 bias residual relu", Layer { k: 1, residual: true, ..L }, None),
        ("3x3 leaky relu", Layer { act: Some(Activation::LeakyRelu(0.1)), ..L }, None),
        ("dense member, zero fill", L, Some(FillPolicy::Zero)),
    ];
    for (what, l, fill) in cases {
        for slow in [0usize, 1] {
            let tag = format!("f16 {what}, slow {}", ["bare", "fused"][slow]);
            let Some(mut shim) = Shim::new(&tag, VendorPolicy::Always) else { return };
            shim.repeat[slow] = 40;
            let shim = Arc::new(shim);
            let g = graph(1, 9, &[l], fill, &mut rng);
            let f = inputs(&g, &mut rng, 0.5);
            let o = GpuOptions { precision: Precision::F16, ..opts(true) };
            let mut exe = GpuExecutable::compile(shim.clone(), "shim", &g, &o).unwrap_or_else(|e| panic!("{tag}: {e}"));
            let runs = shim.launches.load(Ordering::Relaxed);
            let got = exe.run(&f).unwrap_or_else(|e| panic!("{tag}: {e}"));
            assert_eq!(shim.launches.load(Ordering::Relaxed), runs + 1, "{tag}: the vendor conv did not run once per frame");
            let want = CpuBackend::new(Some(2)).unwrap().compile(Arc::new(g.clone())).unwrap().run(&f).unwrap();
            let (a, b) = (got[0].as_f32().unwrap(), want[0].as_f32().unwrap());
            assert!(a.iter().all(|v| v.is_finite()), "{tag}: unwritten (NaN) outputs");
            let e = rel_l2(a, b);
            assert!(e < 3e-3, "{tag}: f16 against the CPU's f32: relative L2 {e:.2e}");
        }
    }
}

/// A profile whose sparse member needs 512 work-items per group, on a device whose compiled
/// GEMM allows 256: the op falls back to calibration (a warning, not a failed compile or a
/// failing frame) and its outputs still match the CPU; where 512 are allowed the profile runs.
#[test]
fn a_profile_member_the_compiled_kernel_cannot_run_sends_its_op_to_calibration() {
    use dynaspa_runtime::dispatch::{DispatchTable, Member, PolyKernel, Schedule};
    use dynaspa_runtime::profile::{DeviceId, MaskSetInfo, OpProfile, OpSignature, Profile};
    use dynaspa_runtime::sparsity::Granularity;
    let mut rng = Rng(0x2468_ace0_1357_9bdf);
    let g = graph(1, 12, &[Layer { cin: 16, cout: 64, ..L }], Some(FillPolicy::Zero), &mut rng);
    let frames: Vec<Vec<Tensor>> = [0.4, 0.7].iter().map(|&d| inputs(&g, &mut rng, d)).collect();
    let mut cpu = CpuBackend::new(Some(2)).unwrap().compile(Arc::new(g.clone())).unwrap();
    for (limit, profiled) in [(Some(256), false), (None, true)] {
        let Some(mut shim) = Shim::new(&format!("limit {limit:?}"), VendorPolicy::Never) else { return };
        shim.gemm_limit = limit;
        let shim = Arc::new(shim);
        let info = shim.info().clone();
        // TM 64 / WM 2 x TN 32 / WN 2: 32 x 16 = 512 work-items.
        let mut s = Schedule::sparse("tiles1x1_m64n32k16_w2x2_s2", Granularity::new(1, 1));
        for (k, v) in [("TM", 64), ("TN", 32), ("TK", 16), ("WM", 2), ("WN", 2), ("KS", 2)] {
            s = s.with_knob(k, v);
        }
        let members = vec![
            Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(1e9).unwrap() },
            Member { schedule: s, table: DispatchTable::constant(1.0).unwrap() },
        ];
        let device = DeviceId { backend: "shim".into(), name: info.name.clone(), fingerprint: info.fingerprint() };
        let mut p = Profile::new(device, "limit", false, "test", MaskSetInfo::default());
        let node = &g.nodes[0];
        p.ops.push(OpProfile {
            node: node.name.clone(),
            signature: OpSignature::of(&g, node),
            poly: PolyKernel::new(members).unwrap(),
            stats: None,
        });
        let o = GpuOptions {
            poison: true,
            sparse: SparseConfig { cache_dir: None, force: None, profile: Some(Arc::new(p)) },
            ..Default::default()
        };
        let mut exe = GpuExecutable::compile(shim, "shim", &g, &o).unwrap_or_else(|e| panic!("limit {limit:?}: {e}"));
        let op = &exe.sparse_ops()[0];
        assert_eq!(op.from_profile, profiled, "limit {limit:?}: {op:?}");
        assert_eq!(op.members.iter().any(|m| m.starts_with("tiles1x1_m64n32")), profiled, "limit {limit:?}: {op:?}");
        for f in &frames {
            let got = exe.run(f).unwrap_or_else(|e| panic!("limit {limit:?}: {e}"));
            let want = cpu.run(f).unwrap();
            let e = rel_l2(got[0].as_f32().unwrap(), want[0].as_f32().unwrap());
            assert!(e < 1e-5, "limit {limit:?}: relative L2 {e:.2e}");
        }
    }
}
