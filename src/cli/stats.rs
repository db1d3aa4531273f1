//! Small summaries shared by `run --frames`, `profile` and `bench`: latency percentiles and
//! what a frame's report says about its sparse ops.

use dynaspa::runtime::report::{FrameReport, SparseOpRecord};
use dynaspa::Tensor;

/// Nearest-rank percentile (`p` in 0..=100) of unsorted samples; `None` when empty.
pub fn percentile(samples: &[f64], p: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

pub fn median(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) })
}

pub fn mean(samples: &[f64]) -> Option<f64> {
    (!samples.is_empty()).then(|| samples.iter().sum::<f64>() / samples.len() as f64)
}

/// Mean mask density over the frame's sparse ops; `None` when the report has none.
pub fn frame_density(r: Option<&FrameReport>) -> Option<f64> {
    mean(&r?.sparse_ops.iter().map(|o| o.density).collect::<Vec<_>>())
}

/// The kernel a sparse op ran: the member's name with its granularity (`conv3x3:4x8`; just
/// the name when it already spells the granularity, as `tiles4x8` does), or `dense`.
pub fn kernel_label(o: &SparseOpRecord) -> String {
    match o.granularity {
        Some(g) if o.member.contains(&g.to_string()) => o.member.clone(),
        Some(g) => format!("{}:{g}", o.member),
        None => "dense".to_string(),
    }
}

/// Chosen kernels with counts, most used first, e.g. `conv3x3:4x8 ×5, dense ×2`; `-` if none.
pub fn kernel_summary<'a>(ops: impl IntoIterator<Item = &'a SparseOpRecord>) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for o in ops {
        let k = kernel_label(o);
        match counts.iter_mut().find(|(l, _)| *l == k) {
            Some((_, n)) => *n += 1,
            None => counts.push((k, 1)),
        }
    }
    if counts.is_empty() {
        return "-".to_string();
    }
    // Stable sort: equal counts keep plan order.
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    counts.iter().map(|(k, n)| format!("{k} ×{n}")).collect::<Vec<_>>().join(", ")
}

pub fn fmt_density(d: Option<f64>) -> String {
    d.map_or_else(|| "-".to_string(), |d| format!("{d:.3}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dynaspa::runtime::report::PhaseTimes;
    use dynaspa::runtime::sparsity::Granularity;

    fn rec(member: &str, g: Option<Granularity>, density: f64) -> SparseOpRecord {
        SparseOpRecord {
            node: "n".into(),
            op: "Conv".into(),
            density,
            member: member.into(),
            granularity: g,
            tiles: 0,
            phases: PhaseTimes::default(),
        }
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let v = [5.0, 1.0, 3.0, 2.0, 4.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(percentile(&v, 90.0), Some(9.0));
        assert_eq!(percentile(&v, 100.0), Some(10.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(median(&v), Some(5.5));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn kernels_are_counted_most_used_first() {
        let g = Some(Granularity::new(4, 8));
        let ops = [rec("dense", None, 0.9), rec("conv3x3", g, 0.3), rec("conv3x3", g, 0.2)];
        assert_eq!(kernel_summary(&ops), "conv3x3:4x8 ×2, dense ×1");
        assert_eq!(kernel_summary(&[]), "-");
        let r = FrameReport { sparse_ops: ops.to_vec(), ..Default::default() };
        assert!((frame_density(Some(&r)).unwrap() - (0.9 + 0.3 + 0.2) / 3.0).abs() < 1e-12);
        assert_eq!(frame_density(None), None);
        assert_eq!(fmt_density(None), "-");
        assert_eq!(kernel_label(&rec("tiles4x8", g, 0.1)), "tiles4x8");
    }
}

/// ||a - b|| / ||b|| with `b` the reference; 0 when both are zero.
pub fn rel_l2(a: &[f32], b: &[f32]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).powi(2)).sum();
    let den: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    if num == 0.0 {
        0.0
    } else {
        (num / den.max(f64::MIN_POSITIVE)).sqrt()
    }
}

/// Largest difference over the outputs of one frame (`sparse` against `dense`): (rel L2, output name).
pub fn compare(sparse: &[(String, Tensor)], dense: &[(String, Tensor)]) -> (f64, String) {
    let mut worst = (0.0, String::new());
    for ((name, s), (_, d)) in sparse.iter().zip(dense) {
        let e = match (s.as_f32(), d.as_f32()) {
            _ if s.shape() != d.shape() => f64::INFINITY,
            (Ok(s), Ok(d)) => rel_l2(s, d),
            _ if s == d => 0.0,
            _ => f64::INFINITY,
        };
        if e.is_nan() || e > worst.0 {
            worst = (e, name.clone());
        }
    }
    worst
}
