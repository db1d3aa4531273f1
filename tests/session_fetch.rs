//! `SessionBuilder::fetch` / `Session::fetched`: a sparse op's mask comes out of every run as the
//! executor used it (its density is the one the frame's report gives), and fetching changes
//! neither the outputs nor what the caller sees of the graph.

mod common;

use dynaspa::Tensor;

const MODEL: &str = "models/dynconv_small_d30.onnx";

fn frame(g: &dynaspa::runtime::graph::Graph, name: &str) -> Vec<(String, Tensor)> {
    let floats = |k: &str| -> Vec<f32> {
        g.metadata
            .get(k)
            .map(|s| s.split(',').map(|x| x.trim().parse().unwrap()).collect())
            .unwrap_or_else(|| vec![if k.ends_with("std") { 1.0 } else { 0.0 }; 3])
    };
    let input = &g.values[g.inputs[0]];
    let path = common::repo_path("models/frames/vtest").join(name);
    let t = dynaspa::io::image::load_for_input(&path, &input.shape, &floats("dynaspa.mean"), &floats("dynaspa.std")).unwrap();
    vec![(input.name.clone(), t)]
}

#[test]
fn a_fetched_mask_is_the_one_the_executor_ran_on() {
    let path = common::repo_path(MODEL);
    let opts = common::open_on("cpu").threads(2);
    let g = opts.load(&path).unwrap();
    let sparse: Vec<String> = g.nodes.iter().filter(|n| n.sparse.is_some()).map(|n| n.name.clone()).collect();
    assert_eq!(sparse.len(), 12);
    let masks: Vec<String> = sparse.iter().map(|n| dynaspa::sparse_mask(&g, n).expect("a sparse op's mask")).collect();
    assert!(dynaspa::sparse_mask(&g, "no such op").is_none());
    let outputs = g.outputs.len();
    let input = g.values[g.inputs[0]].name.clone();
    let feeds = frame(&g, "vtest_009.jpg");

    let mut fetch = masks.clone();
    fetch.push(input.clone());
    let mut s = opts.clone().fetch(fetch).open_graph(g, Some(&path)).unwrap();
    assert!(s.fetched(&masks[0]).is_none(), "nothing before the first run");
    assert_eq!(s.graph().outputs.len(), outputs, "the caller's graph keeps the model's outputs");
    let outs = s.run(feeds.clone()).unwrap();
    assert_eq!(outs.len(), outputs);
    let report = s.last_report().unwrap().clone();
    for (node, mask) in sparse.iter().zip(&masks) {
        let t = s.fetched(mask).unwrap_or_else(|| panic!("{mask} fetched"));
        let v = t.as_f32().unwrap();
        assert!(v.iter().all(|&x| x == 0.0 || x == 1.0), "{mask} is binary");
        let density = v.iter().filter(|&&x| x == 1.0).count() as f64 / v.len() as f64;
        let rec = report.sparse_ops.iter().find(|r| &r.node == node).unwrap_or_else(|| panic!("{node} reported"));
        assert!((density - rec.density).abs() < 1e-12, "{node}: fetched mask density {density}, reported {}", rec.density);
        assert!(density > 0.0 && density < 1.0, "{node}: a street frame's mask is neither empty nor full");
    }
    assert_eq!(s.fetched(&input), Some(&feeds[0].1), "an input is fetched as given");

    // The same frame without fetches: the same outputs, bit for bit.
    let mut plain = opts.open(&path).unwrap();
    assert_eq!(plain.run(feeds).unwrap(), outs);

    let e = opts.fetch(["no_such_value"]).open(&path).err().expect("an unknown name is an error");
    assert!(e.to_string().contains("'no_such_value'"), "{e}");
}
