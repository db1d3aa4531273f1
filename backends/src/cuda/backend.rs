//! The CUDA backend as the runtime sees it. Until the shared GPU executor exists, it opens the
//! device (so `--backend cuda` fails early and clearly where CUDA is missing) and refuses to
//! compile graphs.

use super::device::CudaDevice;
use super::error::err;
use crate::gpu::GpuDevice;
use dynaspa_runtime::backend::{Backend, Executable};
use dynaspa_runtime::graph::Graph;
use dynaspa_runtime::Result;
use std::sync::Arc;

pub struct CudaBackend {
    device: Arc<CudaDevice>,
}

impl CudaBackend {
    /// The backend on device `ordinal`; an error saying why when CUDA is unavailable.
    pub fn new(ordinal: usize) -> Result<CudaBackend> {
        Ok(CudaBackend { device: Arc::new(CudaDevice::new(ordinal)?) })
    }

    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.device
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &str {
        "cuda"
    }

    fn compile(&self, _graph: Arc<Graph>) -> Result<Box<dyn Executable>> {
        Err(err(format!(
            "the GPU executor is not built yet: device {} is usable for kernels, not for whole models",
            self.device.info().name
        )))
    }
}
