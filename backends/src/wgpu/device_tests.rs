//! Tests of `WgpuDevice` on whatever adapter this machine has (lavapipe in CI); each test
//! returns early, saying so, where there is none, unless `DYNASPA_REQUIRE_BACKENDS` names wgpu.

use super::{shaders, shared_device, WgpuDevice};
use crate::gpu::{Arg, GpuDevice, KernelSpec};
use std::sync::Arc;

fn device() -> Option<Arc<WgpuDevice>> {
    let required = std::env::var("DYNASPA_REQUIRE_BACKENDS").is_ok_and(|v| v.split(',').any(|b| b.trim() == "wgpu"));
    match shared_device(None) {
        Ok(d) => Some(d),
        Err(e) if !required => {
            eprintln!("no wgpu adapter, skipping: {e}");
            None
        }
        Err(e) => panic!("DYNASPA_REQUIRE_BACKENDS names wgpu, but: {e}"),
    }
}

const FILES: [&str; 11] = [
    "elementwise.cl",
    "movement.cl",
    "reduce.cl",
    "matmul.cl",
    "conv.cl",
    "pool.cl",
    "attention.cl",
    "sparse_conv_gemm.cl",
    "sparse_conv_dw.cl",
    "sparse_conv_fill.cl",
    "bitmask.cl",
];

fn spec(file: &'static str, entry: &str, defines: &[(&str, &str)]) -> KernelSpec {
    let entry: &'static str = Box::leak(entry.to_string().into_boxed_str());
    let mut d: Vec<(String, String)> = defines.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    d.sort();
    KernelSpec { file, source: "", entry, defines: d }
}

/// The defines the executor passes for each file (see gpu/kernels.rs and gpu/lower).
fn defines(file: &str) -> Vec<(&'static str, &'static str)> {
    match file {
        "matmul.cl" | "conv.cl" => vec![("TM", "32"), ("TN", "32"), ("TK", "16"), ("WM", "2"), ("WN", "2")],
        "reduce.cl" => vec![("WG", "256")],
        "attention.cl" => vec![("WG", "128"), ("TK_MAX", "256")],
        "sparse_conv_gemm.cl" => {
            vec![("TM", "64"), ("TN", "32"), ("TK", "16"), ("WM", "4"), ("WN", "2"), ("GH", "2"), ("GW", "8"), ("KS", "4")]
        }
        "sparse_conv_dw.cl" => vec![("GH", "2"), ("GW", "8")],
        "bitmask.cl" => vec![("BLOCK", "256")],
        _ => vec![],
    }
}

#[test]
fn every_entry_point_builds() {
    let Some(dev) = device() else { return };
    let mut n = 0;
    for file in FILES {
        let src = shaders::source(file).expect("a WGSL file for each OpenCL one");
        let entries = shaders::entries(src);
        assert!(!entries.is_empty(), "{file}: no entry points found");
        for e in entries {
            dev.kernel(&spec(file, &e, &defines(file))).unwrap_or_else(|err| panic!("{file} {e}: {err}"));
            n += 1;
        }
    }
    // Every kernel of the OpenCL sources has its WGSL twin.
    assert!(n >= 39, "only {n} entry points");
}

#[test]
fn the_programs_declared_with_a_wgsl_twin_are_those_that_have_one() {
    for src in crate::gpu::kernels::Src::ALL {
        assert_eq!(shaders::source(src.file()).is_some(), src.program().wgsl, "{}", src.file());
    }
}

#[test]
fn upload_download_and_zero_fill_keep_call_order() {
    let Some(dev) = device() else { return };
    let words: Vec<u32> = (0..1000u32).map(|i| i.wrapping_mul(2654435761)).collect();
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let b = dev.alloc(bytes.len()).unwrap();
    dev.upload(&b, 0, &bytes).unwrap();
    // Zero words 10..20 after the upload, then overwrite word 15: order decides what is read.
    dev.fill_zero_async(&b, 40, 40, &[]).unwrap();
    let fill = dev.kernel(&spec("elementwise.cl", "fill_words", &[])).unwrap();
    dev.launch(&fill, [1, 1, 1], [256, 1, 1], &[Arg::Buf(&b), Arg::I32(15), Arg::I32(1), Arg::I32(-7)]).unwrap();
    let mut out = vec![0u8; bytes.len()];
    dev.download(&b, 0, &mut out).unwrap();
    let got: Vec<u32> = out.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    for (i, (&g, &w)) in got.iter().zip(&words).enumerate() {
        let want = match i {
            15 => -7i32 as u32,
            10..20 => 0,
            _ => w,
        };
        assert_eq!(g, want, "word {i}");
    }
    dev.finish().unwrap();
}

#[test]
fn bad_arguments_are_errors() {
    let Some(dev) = device() else { return };
    let b = dev.alloc(16).unwrap();
    assert!(dev.upload(&b, 0, &[0u8; 20]).unwrap_err().to_string().contains("20 bytes"));
    let mut out = [0u8; 6];
    assert!(dev.download(&b, 0, &mut out).is_err());
    let e = dev.kernel(&spec("nonexistent.cl", "f", &[])).unwrap_err().to_string();
    assert!(e.contains("nonexistent.cl"), "{e}");
    let e = dev.kernel(&spec("elementwise.cl", "no_such_entry", &[])).unwrap_err().to_string();
    assert!(e.contains("no_such_entry"), "{e}");
    let e = dev.kernel(&spec("matmul.cl", "gemm_f32", &[("TM", "64"), ("TN", "64"), ("TK", "16"), ("WM", "8"), ("WN", "4")])).unwrap_err();
    assert!(e.to_string().contains("at most 16"), "{e}");
    let fill = dev.kernel(&spec("elementwise.cl", "fill_words", &[])).unwrap();
    let e = dev.launch(&fill, [1 << 20, 1, 1], [256, 1, 1], &[Arg::Buf(&b), Arg::I32(0), Arg::I32(1), Arg::I32(0)]).unwrap_err();
    assert!(e.to_string().contains("exceeds the limit"), "{e}");
    // The device still works after the refusals.
    dev.launch(&fill, [1, 1, 1], [256, 1, 1], &[Arg::Buf(&b), Arg::I32(0), Arg::I32(4), Arg::I32(3)]).unwrap();
    let mut out = [0u8; 16];
    dev.download(&b, 0, &mut out).unwrap();
    assert_eq!(out, [3, 0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0]);
}
