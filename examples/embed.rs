//! The library at a glance: open a model on a backend, run a frame, read what the frame did.
//!
//!     cargo run --release --example embed -- [MODEL] [IMAGE] [BACKEND]
//!
//! (defaults: the shipped reduced DynConv, the first shipped street-camera frame, the CPU).

use dynaspa::{Backend, Session};
use std::path::Path;

fn main() -> dynaspa::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let model = args.get(1).map_or("models/dynconv_small_d30.onnx", String::as_str);
    let image = args.get(2).map_or("models/frames/vtest/vtest_000.jpg", String::as_str);
    let backend: Backend = args.get(3).map_or("cpu", String::as_str).parse()?;

    // The builder also picks the device, a tuned profile (the shipped one for this device by
    // default), the precision and a dense run of the same graph.
    let mut session = Session::builder().backend(backend).threads(2).open(model)?;
    println!("profile: {}", session.profile_used().unwrap_or("none"));

    // The model's image input, decoded, resized to its H x W and normalised with the mean and
    // std the model's metadata gives (as the CLI does).
    let g = session.graph();
    let input = &g.values[g.inputs[0]];
    let floats = |key: &str, default: f32| -> Vec<f32> {
        g.metadata.get(key).and_then(|s| s.split(',').map(|p| p.trim().parse().ok()).collect()).unwrap_or_else(|| vec![default; 3])
    };
    let (mean, std) = (floats("dynaspa.mean", 0.0), floats("dynaspa.std", 1.0));
    let frame = dynaspa::io::image::load_for_input(Path::new(image), &input.shape, &mean, &std)?;
    let name = input.name.clone();

    let outputs = session.run(vec![(name, frame)])?;
    for (name, t) in &outputs {
        println!("output {name}: {:?}", t.shape());
    }
    if let Some(r) = session.last_report() {
        println!("frame: {:.3} ms, {} sparse ops", r.total.as_secs_f64() * 1e3, r.sparse_ops.len());
        for op in &r.sparse_ops {
            println!("  {:<24} density {:.3}  kernel {}", op.node, op.density, op.member);
        }
    }
    Ok(())
}
