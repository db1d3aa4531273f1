//! The CPU backend takes its PolyKernels from a loaded profile made on this device, and
//! ignores (with a warning) a profile made for another device, calibrating instead.

mod common;

use dynaspa::backends::cpu::cpu_device_id;
use dynaspa::backends::SparseConfig;
use dynaspa::runtime::dispatch::{DispatchTable, Member, PolyKernel, Schedule};
use dynaspa::runtime::graph::sparse_detect::{detect_sparse_regions, SparseOptions};
use dynaspa::runtime::profile::{DeviceId, MaskSetInfo, OpProfile, OpSignature, Profile};
use dynaspa::runtime::sparsity::Granularity;
use dynaspa::Tensor;
use std::sync::Arc;

const THREADS: usize = 2;

/// Every sparse op of sige_small gets dense + one sparse member at 3x5 (a size dividing
/// neither side of any of its maps) that dispatch always prefers.
fn profile(device: DeviceId) -> Profile {
    let mut g = dynaspa::load_graph(common::repo_path("models/sige_small.onnx"), &Default::default()).unwrap();
    detect_sparse_regions(&mut g, &SparseOptions::default());
    let mut p = Profile::new(device, "sige_small", false, "test", MaskSetInfo::default());
    for n in g.nodes.iter().filter(|n| n.sparse.is_some()) {
        let poly = PolyKernel::new(vec![
            Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(1e9).unwrap() },
            Member { schedule: Schedule::sparse("tuned3x5", Granularity::new(3, 5)), table: DispatchTable::constant(1.0).unwrap() },
        ])
        .unwrap();
        p.ops.push(OpProfile { node: n.name.clone(), signature: OpSignature::of(&g, n), poly, stats: None });
    }
    p
}

fn run(p: Option<Profile>) -> (Vec<f32>, Vec<String>) {
    let cache = std::env::temp_dir().join(format!("dynaspa-profile-hook-{}", std::process::id()));
    let sparse = SparseConfig { cache_dir: Some(cache), force: None, profile: p.map(Arc::new) };
    let opts = dynaspa::backends::BackendOptions { threads: Some(THREADS), sparse: Some(sparse), ..Default::default() };
    let mut s = common::session_with(&common::repo_path("models/sige_small.onnx"), "cpu", &opts);
    // A random image and a mask of two blocks (about a fifth of the map).
    let mut st = 0x2545_f491_4f6c_dd1du64;
    let img: Vec<f32> = (0..3 * 48 * 64)
        .map(|_| {
            st ^= st << 13;
            st ^= st >> 7;
            st ^= st << 17;
            (st >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect();
    let mask: Vec<f32> = (0..48 * 64).map(|i| (((i / 64) % 24 < 10) && ((i % 64) % 32 < 12)) as u8 as f32).collect();
    let feeds = vec![
        ("input".to_string(), Tensor::from_f32(vec![1, 3, 48, 64], img).unwrap()),
        ("mask".to_string(), Tensor::from_f32(vec![1, 1, 48, 64], mask).unwrap()),
    ];
    let out = s.run(feeds).unwrap();
    let members = s.last_report().unwrap().sparse_ops.iter().map(|r| r.member.clone()).collect();
    (out[0].1.as_f32().unwrap().to_vec(), members)
}

#[test]
fn a_profile_for_this_device_replaces_calibration() {
    let (reference, calibrated) = run(None);
    assert!(!calibrated.iter().any(|m| m == "tuned3x5"));
    let (out, members) = run(Some(profile(cpu_device_id(THREADS))));
    let tuned = members.iter().filter(|m| *m == "tuned3x5").count();
    // The ConvTransposes have no sparse kernel (dense member only); every Conv runs the member.
    assert!(tuned >= 8, "{members:?}");
    let e = common::rel_l2(&out, &reference);
    assert!(e < 1e-4, "profile's 3x5 member changes the output: rel L2 {e}");
}

#[test]
fn a_profile_for_another_device_is_ignored() {
    let other = DeviceId { backend: "cpu".into(), name: "Some Other CPU".into(), fingerprint: "Some Other CPU|portable|t2".into() };
    let (_, members) = run(Some(profile(other)));
    assert!(!members.iter().any(|m| m == "tuned3x5"), "{members:?}");
}
