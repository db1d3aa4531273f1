//! The ONNX backend node tests (tests/onnx_node/, from the onnx 1.22.0 wheel) on every backend.
//! Every case passes or is listed with its reason in tests/onnx_node/excluded.tsv (every
//! backend) or excluded.<backend>.tsv (that backend only); an excluded case that starts passing
//! fails the run too, so the lists stay true. GPU backends run with poisoned outputs (NaN before
//! each kernel), so an output a kernel does not write fails its case.

mod common;

use dynaspa::runtime::onnx::tensor_proto;
use dynaspa::{LoadOptions, Session, Tensor};
use std::collections::BTreeMap;
use std::path::Path;

const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-6;

fn read_pb(p: &Path) -> Result<Tensor, String> {
    let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
    tensor_proto::decode_bytes(&bytes, &p.display().to_string()).map_err(|e| e.to_string())
}

fn numbered(dir: &Path, prefix: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = (0..).map(|i| dir.join(format!("{prefix}_{i}.pb"))).take_while(|p| p.exists()).collect();
    v.shrink_to_fit();
    v
}

/// Loads the case's model. Many cases feed shape-deciding values (Reshape's shape, axes, sizes,
/// scales) as graph inputs; dynaspa needs static shapes, so on that error every input but the
/// first float one (the data) is frozen to this data set's values and the model is loaded again.
fn open(bytes: &[u8], inputs: &[(String, Tensor)], backend: &str) -> Result<(Session, Vec<String>), String> {
    let mut opts = LoadOptions::default();
    let graph = match dynaspa::load_graph_bytes(bytes, &opts) {
        Err(e) if e.to_string().contains("computed at run time") => {
            let data = inputs.iter().position(|(_, t)| t.dtype().is_float());
            for (_, (n, t)) in inputs.iter().enumerate().filter(|(i, _)| Some(*i) != data) {
                opts.constants.insert(n.clone(), t.clone());
            }
            dynaspa::load_graph_bytes(bytes, &opts)
        }
        r => r,
    }
    .map_err(|e| format!("load: {e}"))?;
    let names = graph.input_names().iter().map(|s| s.to_string()).collect();
    let bo = dynaspa::backends::BackendOptions { poison: true, ..Default::default() };
    let b = dynaspa::backends::create_configured(backend, &bo).map_err(|e| e.to_string())?;
    let mut s = Session::new(graph, b.as_ref()).map_err(|e| format!("compile: {e}"))?;
    s.check_finite = false; // some cases feed NaN and infinities on purpose
    Ok((s, names))
}

fn run_case(dir: &Path, backend: &str) -> Result<(), String> {
    let bytes = std::fs::read(dir.join("model.onnx")).map_err(|e| e.to_string())?;
    let model_inputs = dynaspa::runtime::onnx::input_names(&bytes).map_err(|e| format!("load: {e}"))?;
    let mut sets: Vec<_> =
        std::fs::read_dir(dir).map_err(|e| e.to_string())?.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
    sets.sort();
    for set in sets {
        let ins = numbered(&set, "input");
        if ins.len() != model_inputs.len() {
            return Err(format!("{} inputs in {}, model takes {}", ins.len(), set.display(), model_inputs.len()));
        }
        let all: Vec<(String, Tensor)> =
            model_inputs.iter().cloned().zip(ins.iter().map(|p| read_pb(p))).map(|(n, t)| t.map(|t| (n, t))).collect::<Result<_, _>>()?;
        let (mut s, names) = open(&bytes, &all, backend)?;
        let feeds = all.into_iter().filter(|(n, _)| names.contains(n)).collect();
        let outs = s.run(feeds).map_err(|e| format!("run: {e}"))?;
        let want = numbered(&set, "output");
        if want.len() != outs.len() {
            return Err(format!("{} outputs, expected {}", outs.len(), want.len()));
        }
        for ((name, got), p) in outs.iter().zip(&want) {
            common::close(got, &read_pb(p)?, RTOL, ATOL).map_err(|e| format!("output '{name}': {e}"))?;
        }
    }
    Ok(())
}

/// The cases excluded on `backend`: the shared list plus the backend's own.
fn exclusions(backend: &str) -> BTreeMap<String, String> {
    let read = |f: &str| std::fs::read_to_string(common::repo_path(&format!("tests/onnx_node/{f}"))).unwrap_or_default();
    let text = read("excluded.tsv") + "\n" + &read(&format!("excluded.{backend}.tsv"));
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('\t').map(|(c, r)| (c.trim().to_string(), r.trim().to_string())))
        .collect()
}

backend_test!(every_node_case_passes_or_is_excluded_with_its_reason, |backend| onnx_node_suite(backend));

fn onnx_node_suite(backend: &str) {
    let root = common::repo_path("tests/onnx_node");
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .expect("tests/onnx_node exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    cases.sort();
    assert!(cases.len() > 400, "only {} node cases found under {}", cases.len(), root.display());
    let filter = std::env::var("DYNASPA_NODE_FILTER").unwrap_or_default();
    let mut problems = Vec::new();
    let excluded = exclusions(backend);
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for dir in &cases {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        if !name.contains(&filter) {
            continue;
        }
        let res = std::panic::catch_unwind(|| run_case(dir, backend)).unwrap_or_else(|_| Err("PANIC".to_string()));
        match (res, excluded.get(&name)) {
            (Ok(()), None) => passed += 1,
            (Ok(()), Some(_)) => {
                failed += 1;
                problems.push(format!("[{backend}] {name}: passes but is listed in excluded.tsv or excluded.{backend}.tsv"));
            }
            (Err(_), Some(r)) => {
                skipped += 1;
                *reasons.entry(r.as_str()).or_default() += 1;
            }
            (Err(e), None) => {
                failed += 1;
                problems.push(format!("[{backend}] {name}: {e}"));
            }
        }
    }
    println!("onnx node suite [{backend}]: {passed} passed, {failed} failed, {skipped} excluded");
    for (r, n) in reasons {
        println!("  excluded x{n}: {r}");
    }
    assert!(problems.is_empty(), "{} node cases failed:\n{}", problems.len(), problems.join("\n"));
}
