//! `WgpuDevice`: the `GpuDevice` trait on one wgpu device (Vulkan, Metal).
//!
//! wgpu has one queue, so the trait's two queues collapse into submission order: launches, zero
//! fills (`clear_buffer`) and copies are recorded into one command encoder in call order and
//! submitted together, which orders them exactly as events would; `marker`/`wait_for` have
//! nothing left to do. Uploads go through `queue.write_buffer`, which runs before the next
//! submission, so the pending encoder is submitted first to keep call order.
//!
//! Every launch binds the kernel's buffers at bindings 0.. in argument order and its scalars,
//! packed as 32-bit words in argument order, as a uniform at binding `PARAMS_BINDING`.
//! wgpu reports validation errors and device loss through callbacks instead of return values;
//! they are recorded and returned as `Error` by the next call that can fail.

use super::adapter::{describe, panic_text, wgpu_err, WgpuAdapterEntry};
use super::shaders;
use super::staging::WgpuStaging;
use crate::gpu::{Arg, DeviceInfo, GpuDevice, KernelSpec};
use dynaspa_runtime::{Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use wgpu::util::DeviceExt;

/// Storage bindings a kernel may have (WebGPU's default `maxStorageBuffersPerShaderStage`).
pub(crate) const MAX_BUFFERS: u32 = 8;
/// Where the scalar arguments are bound.
pub(crate) const PARAMS_BINDING: u32 = MAX_BUFFERS;
/// Launches recorded before the encoder is submitted even without a download (bounds the
/// memory held by per-launch bind groups and parameter buffers).
const MAX_PENDING: usize = 512;

pub struct WgpuDevice {
    info: DeviceInfo,
    device: wgpu::Device,
    queue: wgpu::Queue,
    layout: wgpu::PipelineLayout,
    group_layout: wgpu::BindGroupLayout,
    /// Bound to the storage slots a kernel does not use (the layout has all of them).
    filler: wgpu::Buffer,
    pending: Mutex<Pending>,
    /// The first error wgpu reported through a callback since the last check.
    errors: Arc<Mutex<Option<String>>>,
    /// Shader modules by (file, defines). wgpu has no portable binary cache (pipeline caches
    /// are Vulkan-only and driver-keyed), so modules live in memory for the process.
    modules: Mutex<HashMap<(String, Vec<(String, String)>), Arc<wgpu::ShaderModule>>>,
}

#[derive(Default)]
struct Pending {
    encoder: Option<wgpu::CommandEncoder>,
    launches: usize,
}

pub struct WgpuBuffer {
    buf: wgpu::Buffer,
    bytes: usize,
}

impl WgpuBuffer {
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// A kernel: its module, entry point and schedule constants. Pipelines are made per work-group
/// shape at the first launch with it, since WGSL fixes the shape in the pipeline (as override
/// constants `WG_X`, `WG_Y`, `WG_Z`) while the trait gives it per launch.
pub struct WgpuKernel {
    module: Arc<wgpu::ShaderModule>,
    file: &'static str,
    entry: &'static str,
    constants: Vec<(String, f64)>,
    pipelines: Mutex<Vec<([u32; 3], Arc<wgpu::ComputePipeline>)>>,
}

impl std::fmt::Debug for WgpuKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {} {:?}", self.entry, shaders::wgsl_name(self.file), self.constants)
    }
}

/// Submission order is the event: nothing to carry.
pub struct WgpuEvent;

impl WgpuDevice {
    /// Opens `adapter` with WebGPU's default limits, so kernels that run here also run on the
    /// mobile drivers that promise no more.
    pub fn open(adapter: &wgpu::Adapter, entry: &WgpuAdapterEntry) -> Result<WgpuDevice> {
        let name = &entry.info.name;
        let desc = wgpu::DeviceDescriptor { label: Some("dynaspa"), required_limits: wgpu::Limits::default(), ..Default::default() };
        let (device, queue) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pollster::block_on(adapter.request_device(&desc))))
            .map_err(|p| wgpu_err(&format!("opening '{name}'"), panic_text(&p)))?
            .map_err(|e| wgpu_err(&format!("opening '{name}'"), e))?;
        let errors: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let sink = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut s = sink.lock().unwrap_or_else(|p| p.into_inner());
            s.get_or_insert_with(|| e.to_string());
        }));
        let sink = errors.clone();
        device.set_device_lost_callback(move |reason, msg| {
            let mut s = sink.lock().unwrap_or_else(|p| p.into_inner());
            s.get_or_insert_with(|| format!("device lost ({reason:?}): {msg}"));
        });
        let storage = |binding| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                // Read-write everywhere: the executor may pass one buffer in several slots (the
                // placeholder for absent inputs), which wgpu refuses when one slot is read-only.
                ty: wgpu::BufferBindingType::Storage { read_only: false },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let mut entries: Vec<wgpu::BindGroupLayoutEntry> = (0..MAX_BUFFERS).map(storage).collect();
        entries.push(wgpu::BindGroupLayoutEntry {
            binding: PARAMS_BINDING,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer { ty: wgpu::BufferBindingType::Uniform, has_dynamic_offset: false, min_binding_size: None },
            count: None,
        });
        let group_layout =
            device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some("dynaspa args"), entries: &entries });
        let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("dynaspa"),
            bind_group_layouts: &[Some(&group_layout)],
            immediate_size: 0,
        });
        let filler = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("unused slot"),
            size: 16,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let dev = WgpuDevice {
            info: entry.info.clone(),
            device,
            queue,
            layout,
            group_layout,
            filler,
            pending: Mutex::new(Pending::default()),
            errors,
            modules: Mutex::new(HashMap::new()),
        };
        dev.check("opening the device")?;
        Ok(dev)
    }

    pub fn adapter_info(adapter: &wgpu::Adapter) -> DeviceInfo {
        describe(adapter)
    }

    fn err(&self, what: &str, e: impl std::fmt::Display) -> Error {
        wgpu_err(&format!("{what} on '{}'", self.info.name), e)
    }

    /// Returns (and clears) an error wgpu reported through its callbacks.
    fn check(&self, what: &str) -> Result<()> {
        let e = self.errors.lock().unwrap_or_else(|p| p.into_inner()).take();
        match e {
            Some(msg) => Err(self.err(what, msg)),
            None => Ok(()),
        }
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` with the pending encoder (creating one), then submits when enough is queued.
    fn record(&self, f: impl FnOnce(&mut wgpu::CommandEncoder)) -> Result<()> {
        let mut p = self.lock_pending();
        let enc = p.encoder.get_or_insert_with(|| self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None }));
        f(enc);
        p.launches += 1;
        if p.launches >= MAX_PENDING {
            self.submit(&mut p);
        }
        Ok(())
    }

    fn submit(&self, p: &mut Pending) {
        if let Some(enc) = p.encoder.take() {
            self.queue.submit([enc.finish()]);
        }
        p.launches = 0;
    }

    fn flush(&self) -> Result<()> {
        let mut p = self.lock_pending();
        self.submit(&mut p);
        drop(p);
        self.check("submitting work")
    }

    fn wait_idle(&self) -> Result<()> {
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| self.err("waiting for the queue", e))?;
        self.check("running queued work")
    }

    fn module(&self, spec: &KernelSpec) -> Result<Arc<wgpu::ShaderModule>> {
        let key = (spec.file.to_string(), spec.defines.clone());
        if let Some(m) = self.modules.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(m.clone());
        }
        let source = shaders::source(spec.file).ok_or_else(|| self.err("compiling", format!("no WGSL version of {}", spec.file)))?;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor { label: Some(spec.file), source: wgpu::ShaderSource::Wgsl(source.into()) });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(self.err(&format!("compiling {}", shaders::wgsl_name(spec.file)), e));
        }
        let m = Arc::new(module);
        self.modules.lock().unwrap_or_else(|p| p.into_inner()).insert(key, m.clone());
        Ok(m)
    }

    fn pipeline(&self, k: &WgpuKernel, local: [u32; 3]) -> Result<Arc<wgpu::ComputePipeline>> {
        let mut cache = k.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, p)) = cache.iter().find(|(l, _)| *l == local) {
            return Ok(p.clone());
        }
        let mut constants: Vec<(&str, f64)> = k.constants.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        constants.extend([("WG_X", local[0] as f64), ("WG_Y", local[1] as f64), ("WG_Z", local[2] as f64)]);
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let p = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(k.entry),
            layout: Some(&self.layout),
            module: &k.module,
            entry_point: Some(k.entry),
            compilation_options: wgpu::PipelineCompilationOptions { constants: &constants, zero_initialize_workgroup_memory: false },
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(self.err(&format!("building {} of {} for work-groups of {local:?}", k.entry, shaders::wgsl_name(k.file)), e));
        }
        let p = Arc::new(p);
        cache.push((local, p.clone()));
        Ok(p)
    }
}

impl GpuDevice for WgpuDevice {
    type Buffer = WgpuBuffer;
    type Kernel = WgpuKernel;
    type Event = WgpuEvent;
    type Staging = WgpuStaging;
    type Graph = ();

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<WgpuBuffer> {
        // Bindings and copies work in whole words; a zero-sized binding is invalid.
        let size = (bytes.max(4) as u64).next_multiple_of(4);
        let limits = self.device.limits();
        let max = limits.max_buffer_size.min(limits.max_storage_buffer_binding_size as u64);
        if size > max {
            return Err(
                self.err("allocating", format!("a buffer of {size} bytes exceeds the device's limit of {max} bytes per storage binding"))
            );
        }
        let buf = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.check(&format!("allocating {size} bytes"))?;
        Ok(WgpuBuffer { buf, bytes })
    }

    fn upload(&self, dst: &WgpuBuffer, offset: usize, data: &[u8]) -> Result<()> {
        if offset % 4 != 0 || data.len() % 4 != 0 || offset + data.len() > dst.bytes {
            return Err(self.err("upload", format!("{} bytes at {offset} into a buffer of {} (whole words only)", data.len(), dst.bytes)));
        }
        if data.is_empty() {
            return Ok(());
        }
        // write_buffer runs before the next submission: submit what is recorded first.
        self.flush()?;
        self.queue.write_buffer(&dst.buf, offset as u64, data);
        self.check("upload")
    }

    fn download(&self, src: &WgpuBuffer, offset: usize, out: &mut [u8]) -> Result<()> {
        if out.is_empty() {
            return check_words("download", src, offset, 0).map_err(|m| self.err("download", m));
        }
        let st = self.staging(out.len())?;
        self.download_async(src, offset, &st, None)?;
        self.read_staging(&st, out)
    }

    fn staging(&self, bytes: usize) -> Result<WgpuStaging> {
        let st = WgpuStaging::new(&self.device, bytes);
        self.check(&format!("allocating a {bytes}-byte download buffer"))?;
        Ok(st)
    }

    // One queue: `after`'s work was queued before this copy, so it is ordered behind it anyway.
    fn download_async(&self, src: &WgpuBuffer, offset: usize, dst: &WgpuStaging, _after: Option<&WgpuEvent>) -> Result<()> {
        check_words("download", src, offset, dst.bytes).map_err(|m| self.err("download", m))?;
        if dst.bytes == 0 {
            return Ok(());
        }
        let mut p = self.lock_pending();
        let enc = p.encoder.get_or_insert_with(|| self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None }));
        enc.copy_buffer_to_buffer(&src.buf, offset as u64, &dst.buf, 0, dst.bytes as u64);
        // Submitted now so the copy runs behind the work before it, not at the next flush.
        self.submit(&mut p);
        drop(p);
        self.check("download")
    }

    fn read_staging(&self, st: &WgpuStaging, out: &mut [u8]) -> Result<()> {
        if st.bytes == 0 || out.is_empty() {
            return Ok(());
        }
        self.flush()?;
        let slice = st.buf.slice(..st.bytes as u64);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.wait_idle()?;
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(self.err("mapping a download", e)),
            Err(_) => return Err(self.err("mapping a download", "the map callback never ran")),
        }
        {
            let view = slice.get_mapped_range().map_err(|e| self.err("reading a download", e))?;
            let n = out.len().min(st.bytes);
            out[..n].copy_from_slice(&view[..n]);
        }
        st.buf.unmap();
        Ok(())
    }

    fn kernel(&self, spec: &KernelSpec) -> Result<WgpuKernel> {
        shaders::check_schedule(spec).map_err(|m| Error::Unsupported(vec![m]))?;
        let module = self.module(spec)?;
        let mut constants = Vec::with_capacity(spec.defines.len());
        for (k, v) in &spec.defines {
            let x: f64 = v.parse().map_err(|_| self.err("compiling", format!("{}: define '{k}={v}' is not a number", spec.file)))?;
            constants.push((k.clone(), x));
        }
        let k = WgpuKernel { module, file: spec.file, entry: spec.entry, constants, pipelines: Mutex::new(Vec::new()) };
        // Build the common shape now so that errors in the kernel show at compile time.
        self.pipeline(&k, shaders::default_local(spec))?;
        Ok(k)
    }

    fn launch(&self, kernel: &WgpuKernel, groups: [u32; 3], local: [u32; 3], args: &[Arg<'_, WgpuBuffer>]) -> Result<()> {
        if groups.contains(&0) {
            return Ok(());
        }
        let max = self.device.limits().max_compute_workgroups_per_dimension;
        if groups.iter().any(|&g| g > max) {
            return Err(self.err(
                &format!("launching {}", kernel.entry),
                format!("a grid of {groups:?} work-groups exceeds the limit of {max} per dimension"),
            ));
        }
        let pipeline = self.pipeline(kernel, local)?;
        let mut bufs: Vec<&wgpu::Buffer> = Vec::new();
        let mut params: Vec<u8> = Vec::new();
        for a in args {
            match a {
                Arg::Buf(b) => bufs.push(&b.buf),
                Arg::I32(v) => params.extend_from_slice(&v.to_le_bytes()),
                Arg::U32(v) => params.extend_from_slice(&v.to_le_bytes()),
                Arg::F32(v) => params.extend_from_slice(&v.to_le_bytes()),
            }
        }
        if bufs.len() > MAX_BUFFERS as usize {
            return Err(self.err(
                &format!("launching {}", kernel.entry),
                format!("{} buffer arguments exceed the {MAX_BUFFERS} storage bindings", bufs.len()),
            ));
        }
        // A uniform struct's size is a multiple of 16 bytes; an empty one is still bound.
        params.resize(params.len().max(16).next_multiple_of(16), 0);
        let ubuf = self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("params"),
            contents: &params,
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let mut entries: Vec<wgpu::BindGroupEntry> = (0..MAX_BUFFERS as usize)
            .map(|i| wgpu::BindGroupEntry { binding: i as u32, resource: bufs.get(i).copied().unwrap_or(&self.filler).as_entire_binding() })
            .collect();
        entries.push(wgpu::BindGroupEntry { binding: PARAMS_BINDING, resource: ubuf.as_entire_binding() });
        let group =
            self.device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &self.group_layout, entries: &entries });
        self.record(|enc| {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        })?;
        self.check(&format!("launching {}", kernel.entry))
    }

    fn fill_zero_async(&self, buf: &WgpuBuffer, offset: usize, bytes: usize, _after: &[WgpuEvent]) -> Result<WgpuEvent> {
        if offset % 4 != 0 || bytes % 4 != 0 || offset + bytes > buf.bytes {
            return Err(self.err("zero fill", format!("{bytes} bytes at {offset} in a buffer of {} (whole words only)", buf.bytes)));
        }
        // In submission order after everything recorded so far: that is what `after` asks.
        self.record(|enc| enc.clear_buffer(&buf.buf, offset as u64, Some(bytes as u64)))?;
        Ok(WgpuEvent)
    }

    fn marker(&self) -> Result<WgpuEvent> {
        Ok(WgpuEvent)
    }

    fn wait_for(&self, _events: &[WgpuEvent]) -> Result<()> {
        Ok(())
    }

    fn finish(&self) -> Result<()> {
        self.flush()?;
        self.wait_idle()
    }
}

/// Downloads move whole words inside the buffer.
fn check_words(what: &str, src: &WgpuBuffer, offset: usize, len: usize) -> std::result::Result<(), String> {
    if offset % 4 != 0 || len % 4 != 0 || offset.checked_add(len).is_none_or(|e| e > src.bytes) {
        return Err(format!("{what}: {len} bytes at {offset} from a buffer of {} (whole words only)", src.bytes));
    }
    Ok(())
}
