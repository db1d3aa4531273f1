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

/// Median time per named step (`FrameReport::step_times`) over the reports holding the same
/// steps: (node, op, median µs), slowest first.
pub fn step_rows(reports: &[FrameReport]) -> Vec<(String, String, f64)> {
    let Some(first) = reports.iter().find(|r| !r.step_times.is_empty()) else { return vec![] };
    let same = |r: &&FrameReport| r.step_times.len() == first.step_times.len();
    let timed: Vec<&FrameReport> = reports.iter().filter(same).collect();
    let mut rows: Vec<(String, String, f64)> = (0..first.step_times.len())
        .map(|i| {
            let us: Vec<f64> = timed.iter().map(|r| r.step_times[i].2.as_secs_f64() * 1e6).collect();
            (first.step_times[i].0.clone(), first.step_times[i].1.clone(), stats::median(&us).unwrap_or(0.0))
        })
        .collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    rows
}

fn print_steps(reports: &[FrameReport], limit: usize) {
    let rows = step_rows(reports);
    if rows.is_empty() {
        println!("no per-node times: the backend does not time nodes");
        return;
    }
    let total: f64 = rows.iter().map(|r| r.2).sum();
    println!("per step (a queue sync after each; median µs per frame, slowest first; sum {total:.1} µs):");
    let w = rows.iter().take(limit).map(|r| r.0.len()).max().unwrap_or(4).clamp(4, 48);
    println!("{:<w$}  {:<22} {:>9} {:>7}", "node", "op", "µs", "share");
    for (name, op, us) in rows.iter().take(limit) {
        let share = if total > 0.0 { us / total * 100.0 } else { 0.0 };
        println!("{name:<w$}  {op:<22} {us:>9.1} {share:>6.1}%");
    }
    if rows.len() > limit {
        let rest: f64 = rows[limit..].iter().map(|r| r.2).sum();
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
        let sparse = if n.sparse.is_some() { "yes" } else { "" };
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
        let us = Duration::from_micros;
        let r = |a, b| FrameReport {
            step_times: vec![("conv".into(), "Conv".into(), us(a)), ("relu".into(), "Relu".into(), us(b))],
            ..Default::default()
        };
        let odd = FrameReport { step_times: vec![("conv".into(), "Conv".into(), us(999))], ..Default::default() };
        let rows = step_rows(&[r(1, 10), r(3, 30), odd, r(2, 20)]);
        assert_eq!(rows, vec![("relu".to_string(), "Relu".to_string(), 20.0), ("conv".to_string(), "Conv".to_string(), 2.0)]);
        assert!(step_rows(&[FrameReport::default()]).is_empty());
    }
}
