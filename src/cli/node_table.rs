//! `dynaspa profile --nodes`: where a frame's time goes node by node (dense and sparse), so the
//! cost of the ops around the sparse ones is visible too.

use super::stats;
use dynaspa::runtime::graph::Graph;
use dynaspa::runtime::report::FrameReport;

#[derive(Debug, PartialEq)]
pub struct NodeRow {
    pub index: usize,
    pub median_us: f64,
    /// Share of the sum over nodes of their median times.
    pub share: f64,
}

/// Median time per node over the reports that timed every node; rows sorted slowest first.
pub fn node_rows(reports: &[FrameReport], nodes: usize) -> Vec<NodeRow> {
    let timed: Vec<&FrameReport> = reports.iter().filter(|r| r.node_times.len() == nodes).collect();
    if timed.is_empty() {
        return vec![];
    }
    let medians: Vec<f64> = (0..nodes)
        .map(|i| stats::median(&timed.iter().map(|r| r.node_times[i].as_secs_f64() * 1e6).collect::<Vec<_>>()).unwrap_or(0.0))
        .collect();
    let sum: f64 = medians.iter().sum();
    let mut rows: Vec<NodeRow> = medians
        .iter()
        .enumerate()
        .map(|(index, &m)| NodeRow { index, median_us: m, share: if sum > 0.0 { m / sum } else { 0.0 } })
        .collect();
    rows.sort_by(|a, b| b.median_us.total_cmp(&a.median_us));
    rows
}

/// One GPU step's medians over frames.
#[derive(Debug, PartialEq)]
pub struct StepRow {
    pub node: String,
    pub op: String,
    /// The device's time (`None` where the device takes no queue timestamps).
    pub gpu_us: Option<f64>,
    /// The host's time: queueing the step, or queueing it and waiting where `gpu_us` is `None`.
    pub host_us: f64,
}

impl StepRow {
    /// The time that says where the frame goes: the device's where there is one.
    fn us(&self) -> f64 {
        self.gpu_us.unwrap_or(self.host_us)
    }
}

/// Median times per named step (`FrameReport::step_times`) over the reports holding the same
/// steps, slowest first.
pub fn step_rows(reports: &[FrameReport]) -> Vec<StepRow> {
    let Some(first) = reports.iter().find(|r| !r.step_times.is_empty()) else { return vec![] };
    let same = |r: &&FrameReport| r.step_times.len() == first.step_times.len();
    let timed: Vec<&FrameReport> = reports.iter().filter(same).collect();
    let mut rows: Vec<StepRow> = (0..first.step_times.len())
        .map(|i| {
            let host: Vec<f64> = timed.iter().map(|r| r.step_times[i].host.as_secs_f64() * 1e6).collect();
            let gpu: Vec<f64> = timed.iter().filter_map(|r| r.step_times[i].gpu).map(|d| d.as_secs_f64() * 1e6).collect();
            StepRow {
                node: first.step_times[i].node.clone(),
                op: first.step_times[i].op.clone(),
                gpu_us: (gpu.len() == timed.len()).then(|| stats::median(&gpu).unwrap_or(0.0)),
                host_us: stats::median(&host).unwrap_or(0.0),
            }
        })
        .collect();
    rows.sort_by(|a, b| b.us().total_cmp(&a.us()));
    rows
}

fn print_steps(reports: &[FrameReport], limit: usize) {
    let rows = step_rows(reports);
    if rows.is_empty() {
        println!("no per-node times: the backend does not time nodes");
        return;
    }
    let total: f64 = rows.iter().map(StepRow::us).sum();
    let host: f64 = rows.iter().map(|r| r.host_us).sum();
    let on_device = rows.iter().all(|r| r.gpu_us.is_some());
    if on_device {
        println!(
            "per step (device time between queue timestamps, the frame queued without waits; median µs per frame, slowest first): \
             device {total:.1} µs, host queueing {host:.1} µs"
        );
    } else {
        println!("per step (host time, a queue sync after each; median µs per frame, slowest first; sum {total:.1} µs):");
    }
    let w = rows.iter().take(limit).map(|r| r.node.len()).max().unwrap_or(4).clamp(4, 48);
    println!(
        "{:<w$}  {:<22} {:>9} {:>7} {:>9}  {:>6} member",
        "node",
        "op",
        "µs",
        "share",
        if on_device { "host µs" } else { "" },
        "sparse"
    );
    for r in rows.iter().take(limit) {
        let us = r.us();
        let share = if total > 0.0 { us / total * 100.0 } else { 0.0 };
        let host = if on_device { format!("{:>9.1}", r.host_us) } else { String::new() };
        // A sparse op's density (median over the frames) and the member its last frame ran.
        let ops: Vec<_> = reports.iter().flat_map(|f| f.sparse_ops.iter().filter(|s| s.node == r.node)).collect();
        let density = stats::median(&ops.iter().map(|s| s.density).collect::<Vec<_>>()).map_or(String::new(), |d| format!("{d:.3}"));
        let member = ops.last().map_or("", |s| s.member.as_str());
        println!("{:<w$}  {:<22} {us:>9.1} {share:>6.1}% {host}  {density:>6} {member}", r.node, r.op);
    }
    if rows.len() > limit {
        let rest: f64 = rows[limit..].iter().map(StepRow::us).sum();
        println!("({} more steps: {:.1} µs)", rows.len() - limit, rest);
    }
}

pub fn print_nodes(g: &Graph, reports: &[FrameReport], limit: usize) {
    let rows = node_rows(reports, g.nodes.len());
    if rows.is_empty() {
        print_steps(reports, limit);
        return;
    }
    let total: f64 = rows.iter().map(|r| r.median_us).sum();
    println!("per node (median µs per frame, slowest first; sum of medians {total:.1} µs):");
    let w = rows.iter().take(limit).map(|r| g.nodes[r.index].name.len()).max().unwrap_or(4).clamp(4, 48);
    println!("{:<w$}  {:<22} {:>6} {:>9} {:>7}", "node", "op", "sparse", "µs", "share");
    for r in rows.iter().take(limit) {
        let n = &g.nodes[r.index];
        let op = n.op.name();
        let densities: Vec<f64> =
            reports.iter().flat_map(|f| f.sparse_ops.iter().filter(|s| s.node == n.name).map(|s| s.density)).collect();
        let sparse = match stats::median(&densities) {
            Some(d) => format!("{d:.3}"),
            None if n.sparse.is_some() => "yes".to_string(),
            None => String::new(),
        };
        println!("{:<w$}  {:<22} {:>6} {:>9.1} {:>6.1}%", n.name, op, sparse, r.median_us, r.share * 100.0);
    }
    if rows.len() > limit {
        let rest: f64 = rows[limit..].iter().map(|r| r.median_us).sum();
        println!("({} more nodes: {:.1} µs)", rows.len() - limit, rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn medians_sorted_and_partial_reports_skipped() {
        let us = Duration::from_micros;
        let r = |a, b| FrameReport { node_times: vec![us(a), us(b)], ..Default::default() };
        let reports = vec![r(10, 1), r(30, 3), r(20, 2), FrameReport { node_times: vec![us(999)], ..Default::default() }];
        let rows = node_rows(&reports, 2);
        assert_eq!(rows.iter().map(|r| r.index).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(rows[0].median_us, 20.0);
        assert_eq!(rows[1].median_us, 2.0);
        assert!((rows[0].share - 20.0 / 22.0).abs() < 1e-12);
        assert!(node_rows(&[FrameReport::default()], 2).is_empty());
    }

    #[test]
    fn step_medians_sorted_and_other_step_lists_skipped() {
        use dynaspa::runtime::report::StepTime;
        let us = Duration::from_micros;
        let st = |node: &str, gpu: Option<u64>, host| StepTime { node: node.into(), op: "Op".into(), gpu: gpu.map(us), host: us(host) };
        let r = |a, b| FrameReport { step_times: vec![st("conv", Some(a), 100), st("relu", Some(b), 1)], ..Default::default() };
        let odd = FrameReport { step_times: vec![st("conv", Some(999), 9)], ..Default::default() };
        let rows = step_rows(&[r(1, 10), r(3, 30), odd, r(2, 20)]);
        let got: Vec<(&str, Option<f64>, f64)> = rows.iter().map(|r| (r.node.as_str(), r.gpu_us, r.host_us)).collect();
        assert_eq!(got, vec![("relu", Some(20.0), 1.0), ("conv", Some(2.0), 100.0)], "sorted by device time, not host time");
        let synced = FrameReport { step_times: vec![st("conv", None, 7), st("relu", None, 5)], ..Default::default() };
        let rows = step_rows(&[synced]);
        assert_eq!((rows[0].node.as_str(), rows[0].gpu_us, rows[0].host_us), ("conv", None, 7.0));
        assert!(step_rows(&[FrameReport::default()]).is_empty());
    }
}
