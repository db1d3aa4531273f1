//! What lowering one node works with: the node's buffers, shapes and constants, the compiled
//! kernels, small index tables uploaded once, scratch buffers, and the list of launches the
//! node becomes.

use super::super::device::{Arg, GpuDevice, KernelSpec, VendorPolicy};
use super::super::dtype::{self, Precision, Word};
use super::super::kernels::{self, Src, LINEAR_WG};
use super::super::plan::Pool;
use crate::gpu::sparse_conv::features::SparseConvFeatures;
use dynaspa_runtime::graph::{Graph, Node};
use dynaspa_runtime::{DType, Error, Result, Tensor};
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) type BufId = usize;

/// A kernel argument recorded at compile time; buffers by index into the executable's buffers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum LArg {
    Buf(BufId),
    I32(i32),
    F32(f32),
}

pub(crate) struct Launch<K> {
    pub kernel: Arc<K>,
    pub groups: [u32; 3],
    pub local: [u32; 3],
    pub args: Vec<LArg>,
    /// The grid dimension a frame may narrow to the columns it expects (`ColumnGrid`).
    pub columns: Option<ColumnGrid>,
}

// By hand: a derive would ask for `K: Clone`, and kernels are shared through the Arc.
impl<K> Clone for Launch<K> {
    fn clone(&self) -> Launch<K> {
        Launch { kernel: self.kernel.clone(), groups: self.groups, local: self.local, args: self.args.clone(), columns: self.columns }
    }
}

/// A grid dimension of column tiles, `width` columns each, sized for every column the map can
/// have, whose work-groups take further windows of columns until the map's are covered
/// (sparse_conv_gemm.cl: the self-listing GEMM and its finish). Any width is correct, so a frame
/// launches it for the columns it expects (`expected_tiles`), not for all of them: at density
/// 0.1 most of the full grid's work-groups find no column (RESULTS.md, "self-listing grids
/// launched for the columns a frame expects").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ColumnGrid {
    pub dim: usize,
    pub width: u32,
}

/// Column tiles of `width` for a frame expecting `expect` columns per image: a quarter more,
/// rounded up to a power of two (so a camera's frames share a few grids, and a frame graph
/// keyed by `column_bucket` stays valid), at least one.
pub(crate) fn expected_tiles(expect: usize, width: u32) -> u32 {
    u32::try_from(column_bucket(expect).div_ceil(width.max(1) as usize)).unwrap_or(u32::MAX)
}

/// The power of two of columns a frame expecting `expect` per image launches for.
pub(crate) fn column_bucket(expect: usize) -> usize {
    (expect + expect.div_ceil(4)).max(1).next_power_of_two()
}

impl<K> Launch<K> {
    /// The grid for a frame expecting `expect` columns per image (`None`: as lowered, every
    /// column the map can have).
    pub(crate) fn groups_for(&self, expect: Option<usize>) -> [u32; 3] {
        let mut g = self.groups;
        if let (Some(c), Some(e)) = (self.columns, expect) {
            g[c.dim] = g[c.dim].min(expected_tiles(e, c.width));
        }
        g
    }
}

/// The arguments of `l` with its buffers looked up in `bufs`.
fn device_args<'a, K, B>(bufs: &'a [B], l: &Launch<K>) -> Vec<Arg<'a, B>> {
    l.args
        .iter()
        .map(|a| match *a {
            LArg::Buf(b) => Arg::Buf(&bufs[b]),
            LArg::I32(v) => Arg::I32(v),
            LArg::F32(v) => Arg::F32(v),
        })
        .collect()
}

/// Queues recorded launches on `dev`, their buffers looked up in `bufs`.
pub(crate) fn replay_launches<D: GpuDevice>(dev: &D, bufs: &[D::Buffer], launches: &[Launch<D::Kernel>]) -> Result<()> {
    replay_expecting(dev, bufs, launches, None)
}

/// `replay_launches` for a frame expecting `expect` columns per image (`Launch::groups_for`).
pub(crate) fn replay_expecting<D: GpuDevice>(
    dev: &D,
    bufs: &[D::Buffer],
    launches: &[Launch<D::Kernel>],
    expect: Option<usize>,
) -> Result<()> {
    for l in launches {
        dev.launch(&l.kernel, l.groups_for(expect), l.local, &device_args(bufs, l))?;
    }
    Ok(())
}

/// Queues a recorded launch on `dev`'s second queue after `after` (`GpuDevice::launch_async`).
pub(crate) fn replay_async<D: GpuDevice>(dev: &D, bufs: &[D::Buffer], l: &Launch<D::Kernel>, after: &[D::Event]) -> Result<D::Event> {
    dev.launch_async(&l.kernel, l.groups, l.local, &device_args(bufs, l), after)
}

/// Device objects shared by every node of one executable.
pub(crate) struct Resources<D: GpuDevice> {
    pub bufs: Vec<D::Buffer>,
    /// Capacity in bytes of each buffer.
    pub caps: Vec<usize>,
    /// Per graph value: the buffer holding it, once it has one.
    pub slot: Vec<Option<BufId>>,
    pub pool: Pool,
    kernels: HashMap<KernelSpec, Arc<D::Kernel>>,
    dummy: Option<BufId>,
    /// The vendor library's workspace, shared by every vendor call of the executable.
    workspace: Option<BufId>,
    /// Bytes of it the vendor calls kept in the launches need (candidates that lost a race
    /// grew it too).
    workspace_need: usize,
    /// How the sparse convs run on this device (fused finish, self-listing, ...): one setting
    /// for every node, decided when the executable is built.
    pub features: SparseConvFeatures,
    /// ConvTranspose runs as a GEMM per output phase where its dilations allow
    /// (`GpuOptions::convt_gemm` resolved for the device).
    pub convt_gemm: bool,
    /// How dense convs use the device's vendor library (`GpuOptions::vendor_convs` resolved for
    /// the device).
    pub vendor_policy: VendorPolicy,
    /// Where the race between the vendor's convs and ours remembers its decisions across
    /// processes (`SparseConfig::cache_dir`; `None`: in this process only).
    pub memo_dir: Option<std::path::PathBuf>,
    /// How the node being lowered stores float tensors: every kernel is compiled for it
    /// (`DSP_HALF`), every float upload converted to it. `storage` but for the nodes that keep
    /// f32 at fp16 precision (`gpu/wide.rs`).
    pub precision: Precision,
    /// How the executable stores float tensors.
    pub storage: Precision,
    /// Float constants uploaded in f32 for nodes that run on f32 storage while `storage` is half.
    wide_consts: HashMap<usize, BufId>,
    /// Buffers the launches queued just ahead of the node being lowered may write: the outputs
    /// of the steps since the last one that launches anything, that one's included (none before
    /// the first step, nor in a timer's own executable). A programmatic launch may start while
    /// those run, so a kernel reading anything before its PDL wait must not read these.
    pub written_last: Vec<BufId>,
}

impl<D: GpuDevice> Resources<D> {
    pub(crate) fn new(values: usize, features: SparseConvFeatures, precision: Precision) -> Resources<D> {
        Resources {
            bufs: Vec::new(),
            caps: Vec::new(),
            slot: vec![None; values],
            pool: Pool::default(),
            kernels: HashMap::new(),
            dummy: None,
            workspace: None,
            workspace_need: 0,
            features,
            convt_gemm: false,
            vendor_policy: VendorPolicy::Never,
            memo_dir: None,
            precision,
            storage: precision,
            wide_consts: HashMap::new(),
            written_last: Vec::new(),
        }
    }

    pub(crate) fn alloc(&mut self, dev: &D, bytes: usize) -> Result<BufId> {
        if let Some(b) = self.pool.take(bytes) {
            return Ok(b);
        }
        self.bufs.push(dev.alloc(bytes)?);
        self.caps.push(bytes);
        Ok(self.bufs.len() - 1)
    }

    /// A buffer of its own, never taken from the pool (contents undefined).
    pub(crate) fn alloc_own(&mut self, dev: &D, bytes: usize) -> Result<BufId> {
        self.bufs.push(dev.alloc(bytes)?);
        self.caps.push(bytes);
        Ok(self.bufs.len() - 1)
    }

    /// Takes `buf` (`bytes` long, made by the device outside `alloc`) as a buffer of its own.
    pub(crate) fn adopt(&mut self, buf: D::Buffer, bytes: usize) -> BufId {
        self.bufs.push(buf);
        self.caps.push(bytes);
        self.bufs.len() - 1
    }

    /// The executable's vendor workspace, grown to at least `bytes` (`None` for 0). One serves
    /// every vendor call: launches run one after another on the main queue. Launches recorded
    /// earlier name the buffer by id, so growing replaces the buffer under the same id.
    pub(crate) fn workspace(&mut self, dev: &D, bytes: usize) -> Result<Option<BufId>> {
        if bytes == 0 {
            return Ok(None);
        }
        match self.workspace {
            Some(b) if self.caps[b] >= bytes => Ok(Some(b)),
            Some(b) => {
                self.bufs[b] = dev.alloc(bytes)?;
                self.caps[b] = bytes;
                Ok(Some(b))
            }
            None => {
                let b = self.alloc_own(dev, bytes)?;
                self.workspace = Some(b);
                Ok(Some(b))
            }
        }
    }

    /// Notes that a launch kept for the executable uses `bytes` of the vendor workspace.
    pub(crate) fn need_workspace(&mut self, bytes: usize) {
        self.workspace_need = self.workspace_need.max(bytes);
    }

    /// Shrinks the vendor workspace to what the kept launches need, once compilation is done
    /// (a losing candidate's FFT or Winograd workspace can be hundreds of MiB).
    pub(crate) fn fit_workspace(&mut self, dev: &D) -> Result<()> {
        if let Some(b) = self.workspace {
            // Never empty: a library may not take a null workspace even when it uses none.
            let need = self.workspace_need.max(256);
            if self.caps[b] > need {
                self.bufs[b] = dev.alloc(need)?;
                self.caps[b] = need;
            }
        }
        Ok(())
    }

    /// A buffer of its own (never pooled) holding `t` as device elements (float ones at the
    /// executable's precision).
    pub(crate) fn upload(&mut self, dev: &D, t: &Tensor, what: &str) -> Result<BufId> {
        self.upload_at(dev, t, what, self.precision)
    }

    /// `upload` at precision `p`: `F32` for tables the kernels read as float whatever the
    /// precision (tap weights).
    pub(crate) fn upload_at(&mut self, dev: &D, t: &Tensor, what: &str, p: Precision) -> Result<BufId> {
        let words = dtype::to_words(t, what, p)?;
        let b = dev.alloc(words.len())?;
        dev.upload(&b, 0, &words)?;
        self.bufs.push(b);
        self.caps.push(words.len());
        Ok(self.bufs.len() - 1)
    }

    /// Overwrites buffer `b` with `t` at the executable's precision (random operands for timing).
    pub(crate) fn overwrite(&self, dev: &D, b: BufId, t: &Tensor, what: &str) -> Result<()> {
        dev.upload(&self.bufs[b], 0, &dtype::to_words(t, what, self.precision)?)
    }

    /// The kernel of `spec`, compiled for the executable's precision.
    pub(crate) fn kernel(&mut self, dev: &D, mut spec: KernelSpec) -> Result<Arc<D::Kernel>> {
        if self.precision == Precision::F16 {
            spec.defines.push(("DSP_HALF".into(), "1".into()));
            spec.defines.sort();
        }
        if let Some(k) = self.kernels.get(&spec) {
            return Ok(k.clone());
        }
        let k = Arc::new(dev.kernel(&spec)?);
        self.kernels.insert(spec, k.clone());
        Ok(k)
    }
}

/// An error for what the GPU backends do not run, `what` being a noun phrase ("Cast to DOUBLE");
/// the executor adds the node and the backend.
pub(crate) fn unsupported<T>(what: impl std::fmt::Display) -> Result<T> {
    Err(Error::Unsupported(vec![format!("{what} is not supported")]))
}

/// An error for a device or indexing limit the node exceeds, `msg` a whole sentence.
pub(crate) fn limit<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error::Unsupported(vec![msg.into()]))
}

/// A size or index as a kernel's 32-bit int.
pub(crate) fn int(v: usize, what: &str) -> Result<i32> {
    i32::try_from(v).or_else(|_| limit(format!("{what} = {v} exceeds the 32-bit indexing of the GPU kernels")))
}

pub(crate) fn sint(v: i64, what: &str) -> Result<i32> {
    i32::try_from(v).or_else(|_| limit(format!("{what} = {v} exceeds the 32-bit indexing of the GPU kernels")))
}

pub(crate) struct Ctx<'a, D: GpuDevice> {
    pub dev: &'a D,
    pub graph: &'a Graph,
    pub node: &'a Node,
    pub res: &'a mut Resources<D>,
    pub launches: Vec<Launch<D::Kernel>>,
    /// Scratch buffers taken for this node, returned to the pool after it.
    pub scratch: Vec<BufId>,
}

impl<'a, D: GpuDevice> Ctx<'a, D> {
    pub(crate) fn in_value(&self, i: usize) -> Result<usize> {
        self.node.inputs.get(i).copied().flatten().ok_or_else(|| Error::Other(format!("required input {i} is missing")))
    }
    pub(crate) fn has_input(&self, i: usize) -> bool {
        self.node.inputs.get(i).copied().flatten().is_some()
    }
    pub(crate) fn in_shape(&self, i: usize) -> Result<&'a [usize]> {
        let g: &'a Graph = self.graph;
        Ok(&g.values[self.in_value(i)?].shape)
    }
    pub(crate) fn in_dtype(&self, i: usize) -> Result<DType> {
        Ok(self.graph.values[self.in_value(i)?].dtype)
    }
    /// The input's value when it is known at compile time.
    pub(crate) fn constant(&self, i: usize) -> Option<&'a Tensor> {
        let g: &'a Graph = self.graph;
        self.node.inputs.get(i).copied().flatten().and_then(|v| g.values[v].constant.as_deref())
    }
    pub(crate) fn out_shape(&self, i: usize) -> &'a [usize] {
        let g: &'a Graph = self.graph;
        &g.values[self.node.outputs[i]].shape
    }
    pub(crate) fn out_len(&self, i: usize) -> usize {
        self.out_shape(i).iter().product()
    }

    /// The buffer of input `i` (uploading it first if it is a constant).
    pub(crate) fn x(&mut self, i: usize) -> Result<BufId> {
        let v = self.in_value(i)?;
        if let (Some(t), true) = (&self.graph.values[v].constant, self.res.precision != self.res.storage) {
            if let Some(&b) = self.res.wide_consts.get(&v) {
                return Ok(b);
            }
            let b = self.res.upload(self.dev, t, &self.graph.values[v].name)?;
            self.res.wide_consts.insert(v, b);
            return Ok(b);
        }
        if let Some(b) = self.res.slot[v] {
            return Ok(b);
        }
        match &self.graph.values[v].constant {
            Some(t) => {
                let b = self.res.upload(self.dev, t, &self.graph.values[v].name)?;
                self.res.slot[v] = Some(b);
                Ok(b)
            }
            None => Err(Error::Other(format!("input '{}' has no buffer", self.graph.values[v].name))),
        }
    }
    /// Input `i`'s buffer, or a placeholder when the optional input is absent.
    pub(crate) fn x_or_dummy(&mut self, i: usize) -> Result<BufId> {
        if self.has_input(i) {
            self.x(i)
        } else {
            self.dummy()
        }
    }
    pub(crate) fn y(&self, i: usize) -> Result<BufId> {
        self.res.slot[self.node.outputs[i]].ok_or_else(|| Error::Other(format!("output {i} has no buffer")))
    }

    /// A one-word buffer for absent optional arguments (kernels never read it).
    pub(crate) fn dummy(&mut self) -> Result<BufId> {
        if let Some(b) = self.res.dummy {
            return Ok(b);
        }
        let b = self.res.upload(self.dev, &Tensor::from_f32(vec![1], vec![0.0])?, "placeholder")?;
        self.res.dummy = Some(b);
        Ok(b)
    }
    /// An index table, uploaded once.
    pub(crate) fn meta(&mut self, v: &[i32]) -> Result<BufId> {
        let t = Tensor::new(vec![v.len()], dynaspa_runtime::TensorData::I32(v.to_vec()))?;
        self.res.upload(self.dev, &t, "index table")
    }
    /// A table of floats the kernels read as float (f32 at every precision), uploaded once.
    pub(crate) fn meta_f32(&mut self, v: &[f32]) -> Result<BufId> {
        self.res.upload_at(self.dev, &Tensor::from_f32(vec![v.len()], v.to_vec())?, "weight table", Precision::F32)
    }
    /// Float data the kernels read as a tensor (weights rearranged on the host), uploaded once
    /// at the executable's precision.
    pub(crate) fn float_data(&mut self, v: &[f32], what: &str) -> Result<BufId> {
        self.res.upload(self.dev, &Tensor::from_f32(vec![v.len()], v.to_vec())?, what)
    }
    /// `len` zero ints of the node's own (never pooled), zeroed once here: state its kernels
    /// keep from launch to launch and leave zero behind.
    pub(crate) fn zeroed_ints(&mut self, len: usize, what: &str) -> Result<BufId> {
        let t = Tensor::new(vec![len.max(1)], dynaspa_runtime::TensorData::I32(vec![0; len.max(1)]))?;
        self.res.upload(self.dev, &t, what)
    }
    /// A temporary of `elems` words, live for this node only.
    pub(crate) fn scratch(&mut self, elems: usize) -> Result<BufId> {
        let b = self.res.alloc(self.dev, elems.max(1) * 4)?;
        self.scratch.push(b);
        Ok(b)
    }

    /// A data-movement kernel (strided copies, gathers, Where, fills) for elements of `dt`: its
    /// words are 16-bit where `dt`'s elements are (`MOVE16`).
    pub(crate) fn word_kernel(&mut self, src: Src, entry: &'static str, dt: DType) -> Result<Arc<D::Kernel>> {
        if self.res.precision.narrow_words(dt) {
            self.kernel(src, entry, &[("MOVE16", 1)])
        } else {
            self.kernel(src, entry, &[])
        }
    }

    /// Converts the float inputs this node reads in the other storage (half values into a wide
    /// node, wide values into a half one: `gpu/wide.rs`) into scratch buffers, which stand in
    /// for them while the node is lowered. Returns the slots to put back afterwards.
    pub(crate) fn convert_inputs(&mut self, wide: &[bool]) -> Result<Vec<(usize, Option<BufId>)>> {
        let mut restore = Vec::new();
        if wide.is_empty() {
            return Ok(restore);
        }
        let node_wide = self.res.precision != self.res.storage;
        for v in self.node.inputs.iter().flatten().copied() {
            let val = &self.graph.values[v];
            if val.dtype != DType::F32 || val.constant.is_some() || wide[v] == node_wide || restore.iter().any(|r| r.0 == v) {
                continue;
            }
            let Some(src) = self.res.slot[v] else { continue };
            let n: usize = val.shape.iter().product();
            let dst = self.scratch(n)?;
            let entry = if node_wide { "half_to_f32" } else { "f32_to_half" };
            let kern = self.kernel(Src::Elementwise, entry, &[])?;
            self.launch_linear(kern, n, vec![LArg::Buf(src), LArg::Buf(dst), LArg::I32(int(n, "elements")?)])?;
            restore.push((v, self.res.slot[v]));
            self.res.slot[v] = Some(dst);
        }
        Ok(restore)
    }

    /// Output 0 = input 0, element for element, `n` of them of type `dt`.
    pub(crate) fn copy(&mut self, dt: DType, n: usize) -> Result<()> {
        let (x, y) = (self.x(0)?, self.y(0)?);
        let nn = LArg::I32(int(n, "elements")?);
        if self.res.precision.narrow_words(dt) {
            // Half elements: the identity activation (code -1) copies them; 32-bit words of
            // every other type copy bit for bit below.
            let kern = self.kernel(Src::Elementwise, "unary_f32", &[])?;
            return self.launch_linear(kern, n, vec![LArg::Buf(x), LArg::Buf(y), nn, LArg::I32(-1), LArg::F32(0.0), LArg::F32(0.0)]);
        }
        let kern = self.kernel(Src::Elementwise, "cast_i32_i32", &[])?;
        self.launch_linear(kern, n, vec![LArg::Buf(x), LArg::Buf(y), nn, LArg::I32(0)])
    }

    pub(crate) fn kernel(&mut self, src: Src, entry: &'static str, defines: &[(&str, i64)]) -> Result<Arc<D::Kernel>> {
        let dialect = self.dev.info().dialect();
        if !src.dialects().contains(&dialect) {
            return unsupported(format!("{entry} in the {dialect:?} dialect ({} has no version in it)", src.file()));
        }
        self.res.kernel(self.dev, kernels::spec(src, entry, defines))
    }

    pub(crate) fn launch(&mut self, kernel: Arc<D::Kernel>, groups: [usize; 3], local: [u32; 3], args: Vec<LArg>) -> Result<()> {
        let threads: u64 = local.iter().map(|&l| l as u64).product();
        let max = self.dev.info().max_work_group_size as u64;
        if max > 0 && threads > max {
            return limit(format!("a work-group of {threads} work-items exceeds the device limit of {max}"));
        }
        // Checked here rather than at launch so a schedule the compiled kernel cannot run (a
        // profile member on a compiler that allocates more registers) fails while lowering,
        // where the sparse ops can fall back to calibration.
        if let Some(kmax) = self.dev.kernel_max_threads(&kernel) {
            if threads > kmax as u64 {
                return limit(format!("a work-group of {threads} work-items exceeds the {kmax} this compiled kernel allows (registers)"));
            }
        }
        let g = [
            u32::try_from(groups[0]).or_else(|_| limit(format!("a grid of {groups:?} work-groups exceeds 32 bits")))?,
            u32::try_from(groups[1]).or_else(|_| limit(format!("a grid of {groups:?} work-groups exceeds 32 bits")))?,
            u32::try_from(groups[2]).or_else(|_| limit(format!("a grid of {groups:?} work-groups exceeds 32 bits")))?,
        ];
        self.launches.push(Launch { kernel, groups: g, local, args, columns: None });
        Ok(())
    }

    /// Marks grid dimension `dim` of the last launch as column tiles of `width` a frame may
    /// narrow (`ColumnGrid`): only for kernels whose work-groups cover any map from any width.
    pub(crate) fn narrowable(&mut self, dim: usize, width: u32) {
        if let Some(l) = self.launches.last_mut() {
            l.columns = Some(ColumnGrid { dim, width });
        }
    }

    /// One work-item per element over `n` elements.
    pub(crate) fn launch_linear(&mut self, kernel: Arc<D::Kernel>, n: usize, args: Vec<LArg>) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        // These kernels work with any work-group size; small devices get what they allow.
        let max = self.dev.info().max_work_group_size;
        let wg = if max > 0 { LINEAR_WG.min(max) } else { LINEAR_WG };
        self.launch(kernel, [n.div_ceil(wg as usize), 1, 1], [wg, 1, 1], args)
    }

    /// The storage word of input `i`, or an error naming DOUBLE.
    pub(crate) fn word(&self, i: usize) -> Result<Word> {
        let dt = self.in_dtype(i)?;
        dtype::word(dt).map_or_else(|| unsupported(format!("{dt} input {i}")), Ok)
    }
}

#[cfg(test)]
mod tests {
    use super::{column_bucket, expected_tiles, ColumnGrid, Launch};
    use std::sync::Arc;

    #[test]
    fn frames_launch_column_grids_for_a_quarter_more_than_expected_in_powers_of_two() {
        // 160 columns (40 x 40 at density 0.1) and a quarter more: 200, launched for 256.
        assert_eq!(column_bucket(160), 256);
        assert_eq!(column_bucket(204), 256);
        assert_eq!(column_bucket(205), 512);
        assert_eq!((column_bucket(0), column_bucket(1)), (1, 2));
        assert_eq!((expected_tiles(160, 64), expected_tiles(160, 128), expected_tiles(0, 64)), (4, 2, 1));
        let l = Launch {
            kernel: Arc::new(()),
            groups: [2, 8, 25],
            local: [64, 1, 1],
            args: vec![],
            columns: Some(ColumnGrid { dim: 2, width: 64 }),
        };
        assert_eq!(l.groups_for(Some(160)), [2, 8, 4]);
        assert_eq!(l.groups_for(Some(1600)), [2, 8, 25], "never wider than lowered");
        assert_eq!(l.groups_for(None), [2, 8, 25]);
        let plain = Launch { columns: None, ..l.clone() };
        assert_eq!(plain.groups_for(Some(160)), [2, 8, 25], "a launch not marked keeps its grid");
    }
}
