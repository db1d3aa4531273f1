//! `dynaspa run --reference ORIGINAL --input EDITED`: an edit computed against its original,
//! as SIGE runs its generators: the original once, whole, then the edit only where it differs.

use super::feed;
use super::open_session;
use super::run::{write_outputs, RunArgs};
use super::stats;
use dynaspa::runtime::graph::delta::default_frame_input;
use dynaspa::runtime::graph::Graph;
use dynaspa::{DebugOptions, DeltaOptions, Error, Result, SessionBuilder, Tensor};
use std::path::Path;
use std::time::Instant;

/// `--input` with the frame input's file replaced by `reference`.
fn with_reference(g: &Graph, specs: &[String], frame: &str, reference: &Path) -> Result<Vec<String>> {
    let mut found = false;
    let out: Vec<String> = specs
        .iter()
        .map(|spec| {
            let name = spec.split_once('=').map_or_else(|| (g.inputs.len() == 1).then(|| frame.to_string()), |(n, _)| Some(n.to_string()));
            if name.as_deref() == Some(frame) {
                found = true;
                format!("{frame}={}", reference.display())
            } else {
                spec.clone()
            }
        })
        .collect();
    if !found {
        return Err(Error::Other(format!("--reference replaces the input '{frame}', which --input does not give")));
    }
    Ok(out)
}

pub fn run_edit(a: &RunArgs, reference: &Path, g: Graph, builder: SessionBuilder, t0: Instant) -> Result<()> {
    let frame = default_frame_input(&g).map_err(Error::Other)?;
    let (mean, std) = feed::normalisation(&g, a.mean.as_deref(), a.std.as_deref());
    let edited = feed::read_inputs(&g, &a.inputs, &mean, &std)?;
    let original = feed::read_inputs(&g, &with_reference(&g, &a.inputs, &frame, reference)?, &mean, &std)?;
    let opts = DeltaOptions {
        threshold: a.delta.delta.unwrap_or(0.0),
        block: a.delta.delta_block as usize,
        refresh_every: 0,
        max_changed: 1.0,
        input: Some(frame.clone()),
        spread: a.delta.delta_spread,
    };
    let mut dense = if a.check { Some(builder.clone().dense(true).open_graph(g.clone(), Some(&a.model))?) } else { None };
    // Per-node times on a GPU backend wait for the device after every step (`--nodes`).
    let builder = builder.delta(Some(opts)).debug(DebugOptions { step_times: a.nodes.is_some(), ..Default::default() });
    let mut session = open_session::open(builder, &a.profiles, g, &a.model)?;
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    // Each repeat computes the original whole, then the edit against it; the edit is timed.
    let (mut whole, mut edit) = (Vec::new(), Vec::new());
    let mut outs: Vec<(String, Tensor)> = Vec::new();
    let mut reports = Vec::new();
    for _ in 0..a.repeat.max(1) {
        session.refresh();
        let feed = original.clone();
        let t = Instant::now();
        session.run(feed).map_err(|e| Error::Other(format!("reference {}: {e}", reference.display())))?;
        whole.push(t.elapsed().as_secs_f64() * 1e3);
        let feed = edited.clone();
        let t = Instant::now();
        outs = session.run(feed)?;
        edit.push(t.elapsed().as_secs_f64() * 1e3);
        reports.extend(session.last_report().cloned());
    }
    let changed = session.last_changed_fraction().unwrap_or(1.0);
    if let Some(dir) = &a.output_dir {
        write_outputs(dir, &outs)?;
    }
    for (name, t) in &outs {
        println!("output {name} {} {:?}", t.dtype(), t.shape());
    }
    let check = match dense.as_mut() {
        Some(d) => {
            let mut times = Vec::new();
            let mut want = Vec::new();
            for _ in 0..a.repeat.max(1) {
                let feed = edited.clone();
                let t = Instant::now();
                want = d.run(feed)?;
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
            let (e, _) = stats::compare(&outs, &want);
            format!(", dense {:.2} ms (median), relative L2 against dense {e:.2e}", stats::median(&times).unwrap_or(0.0))
        }
        None => String::new(),
    };
    println!(
        "{}: backend {}, load {load_ms:.1} ms, reference {:.2} ms (whole), edit {:.2} ms (median of {}), changed {changed:.4} of the positions{check}",
        a.model.display(),
        session.backend_name(),
        stats::median(&whole).unwrap_or(0.0),
        stats::median(&edit).unwrap_or(0.0),
        edit.len(),
    );
    if let Some(n) = a.nodes {
        if let Some(r) = reports.last() {
            let mut members: Vec<(String, usize)> = Vec::new();
            for op in &r.sparse_ops {
                match members.iter_mut().find(|(m, _)| *m == op.member) {
                    Some((_, k)) => *k += 1,
                    None => members.push((op.member.clone(), 1)),
                }
            }
            let list: Vec<String> = members.iter().map(|(m, k)| format!("{m} {k}")).collect();
            println!("sparse ops of the edit by member: {}", list.join(", "));
        }
        super::node_table::print_nodes(session.graph(), &reports, n);
    }
    Ok(())
}
