use super::*;
use crate::dispatch::{DispatchTable, Member, Schedule};
use crate::sparsity::Granularity;

fn sig(c: usize) -> OpSignature {
    OpSignature {
        kind: "Conv".into(),
        inputs: vec![Some(vec![1, c, 18, 24]), Some(vec![c, c, 3, 3]), None],
        output: vec![1, c, 18, 24],
        kernel: vec![3, 3],
        strides: vec![1, 1],
        pads: vec![1, 1, 1, 1],
        dilations: vec![1, 1],
        group: 1,
        epilogue: "Some(Relu)".into(),
    }
}

fn poly(dense_us: f64) -> PolyKernel {
    PolyKernel::new(vec![
        Member { schedule: Schedule::dense("dense"), table: DispatchTable::constant(dense_us).unwrap() },
        Member {
            schedule: Schedule::sparse("tiles1x1", Granularity::new(1, 1)),
            table: DispatchTable::new(vec![(0, 2.0), (432, 90.0)]).unwrap(),
        },
    ])
    .unwrap()
}

fn sample() -> Profile {
    let dev = DeviceId { backend: "cpu".into(), name: "Test CPU".into(), fingerprint: "Test CPU|avx512|t2".into() };
    let masks = MaskSetInfo { source: "models/masks/x.dsm".into(), frames: 10, tuned_on: 7, checksum: "0badf00d".into() };
    let mut p = Profile::new(dev, "m", false, "ridge-v1", masks);
    p.ops.push(OpProfile { node: "/a/Conv".into(), signature: sig(16), poly: poly(50.0), stats: None });
    p.ops.push(OpProfile { node: "/b/Conv".into(), signature: sig(32), poly: poly(80.0), stats: Some(OpStats::default()) });
    p
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("dynaspa-profile-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn round_trips_through_a_file_atomically() {
    let p = sample();
    let f = tmp("rt.json");
    p.save(&f).unwrap();
    let back = Profile::load(&f).unwrap();
    assert_eq!(back, p);
    // No temporary is left beside it.
    let left: Vec<_> = std::fs::read_dir(f.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // Reviewable: granularities and knob-free schedules read as plain JSON.
    let text = std::fs::read_to_string(&f).unwrap();
    assert!(text.contains("\"format\": \"dynaspa-profile\"") && text.contains("\"predicted\": false"), "{text}");
    // Number arrays sit on one line; strings with brackets are left as they are.
    assert!(text.contains("\"output\": [1, 16, 18, 24]") && text.contains("[432, 90.0]"), "{text}");
    let mut q = p.clone();
    q.model = "m [1, 2]".into();
    assert_eq!(Profile::from_json(q.to_json().as_bytes()).unwrap().model, "m [1, 2]");
}

#[test]
fn lookup_prefers_the_node_then_the_signature() {
    let p = sample();
    assert_eq!(p.poly_for("/a/Conv", &sig(16)).unwrap().members()[0].table.last_time_us(), 50.0);
    // Another node of the same signature shares the entry.
    assert_eq!(p.poly_for("/zzz/Conv", &sig(32)).unwrap().members()[0].table.last_time_us(), 80.0);
    // The node's name with other shapes (a changed model) matches nothing.
    assert!(p.poly_for("/a/Conv", &sig(64)).is_none());
}

#[test]
fn device_check_refuses_another_device_with_both_names() {
    let p = sample();
    p.check_device("cpu", "Test CPU|avx512|t2", "Test CPU").unwrap();
    let e = p.check_device("cpu", "Other CPU|portable|t8", "Other CPU").unwrap_err().to_string();
    assert!(e.contains("Test CPU") && e.contains("Other CPU") && e.contains("dynaspa tune"), "{e}");
    let e = p.check_device("opencl", "Test CPU|avx512|t2", "Test CPU").unwrap_err().to_string();
    assert!(e.contains("backend 'cpu'"), "{e}");
    // Predicted profiles match by device name, never by a fingerprint nobody measured.
    let mut q = sample();
    q.predicted = true;
    q.device = DeviceId { backend: "cuda".into(), name: "Orin".into(), fingerprint: "predicted:jetson-agx-orin".into() };
    q.check_device("cuda", "cuda|NVIDIA|Orin (nvgpu)|8.7|540", "Orin (nvgpu)").unwrap();
    let e = q.check_device("cuda", "predicted:jetson-agx-orin", "NVIDIA H100").unwrap_err().to_string();
    assert!(e.contains("predicted"), "{e}");
}

#[test]
fn bad_files_give_errors_that_name_the_problem() {
    let good = sample().to_json();
    let err = |s: &str| Profile::from_json(s.as_bytes()).unwrap_err();
    assert!(err("").contains("not valid JSON"));
    assert!(err("[1,2]").contains("not a JSON object"));
    assert!(err("{\"a\": 1}").contains("not a dynaspa profile"));
    assert!(err(&good.replace("dynaspa-profile", "onnx")).contains("format is 'onnx'"));
    let e = err(&good.replace("\"version\": 1", "\"version\": 7"));
    assert!(e.contains("version 7") && e.contains("reads version 1"), "{e}");
    // A PolyKernel that breaks its invariants (two dense members) does not load.
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    v["ops"][0]["poly"]["members"][1]["schedule"]["granularity"] = serde_json::Value::Null;
    let e = Profile::from_json(v.to_string().as_bytes()).unwrap_err();
    assert!(e.contains("dense members"), "{e}");
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    v["ops"][1]["node"] = "/a/Conv".into();
    assert!(Profile::from_json(v.to_string().as_bytes()).unwrap_err().contains("appears twice"));
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    v["device"]["fingerprint"] = "".into();
    assert!(Profile::from_json(v.to_string().as_bytes()).unwrap_err().contains("fingerprint is empty"));
    // Every truncation of a good file is an error, never a panic.
    for cut in (0..good.len()).step_by(7) {
        assert!(Profile::from_json(&good.as_bytes()[..cut]).is_err(), "cut at {cut}");
    }
    // Missing file: the path is named.
    let e = Profile::load("/nonexistent/dir/p.json").unwrap_err().to_string();
    assert!(e.contains("/nonexistent/dir/p.json"), "{e}");
    // A corrupt file on disk: the path and the reason.
    let f = tmp("corrupt.json");
    std::fs::write(&f, &good.as_bytes()[..good.len() / 2]).unwrap();
    let e = Profile::load(&f).unwrap_err().to_string();
    assert!(e.contains("corrupt.json") && e.contains("not valid JSON"), "{e}");
}
