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

pub fn print_nodes(g: &Graph, reports: &[FrameReport], limit: usize) {
    let rows = node_rows(reports, g.nodes.len());
    if rows.is_empty() {
        println!("no per-node times: the backend does not time nodes");
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
}
