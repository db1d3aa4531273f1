//! Host-readable buffers for downloads: a copy recorded behind the queued work, mapped and read
//! later. A blocking download is the same with the read right after the copy.

pub struct WgpuStaging {
    pub(super) buf: wgpu::Buffer,
    pub(super) bytes: usize,
}

impl WgpuStaging {
    pub(super) fn new(device: &wgpu::Device, bytes: usize) -> WgpuStaging {
        // Copies move whole words; a 0-byte buffer still needs a valid size.
        let size = (bytes.max(4) as u64).next_multiple_of(4);
        let buf = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("download"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        WgpuStaging { buf, bytes }
    }

    pub fn len(&self) -> usize {
        self.bytes
    }
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
}
