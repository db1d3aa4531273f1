//! Small statistics the tuner and its experiments report.

/// Median of `v` (mean of the middle two for even lengths); `None` when empty or with NaN.
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() || v.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 })
}

/// Kendall's tau-b between two paired samples (ties in either counted as neither concordant
/// nor discordant, with the tie correction). `None` with fewer than two pairs or no variation.
pub fn kendall_tau(a: &[f64], b: &[f64]) -> Option<f64> {
    let n = a.len().min(b.len());
    if n < 2 {
        return None;
    }
    let (mut conc, mut disc, mut ties_a, mut ties_b) = (0f64, 0f64, 0f64, 0f64);
    for i in 0..n {
        for j in i + 1..n {
            let (da, db) = (a[i] - a[j], b[i] - b[j]);
            if da == 0.0 && db == 0.0 {
                continue;
            } else if da == 0.0 {
                ties_a += 1.0;
            } else if db == 0.0 {
                ties_b += 1.0;
            } else if (da > 0.0) == (db > 0.0) {
                conc += 1.0;
            } else {
                disc += 1.0;
            }
        }
    }
    let den = ((conc + disc + ties_a) * (conc + disc + ties_b)).sqrt();
    (den > 0.0).then(|| (conc - disc) / den)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tau_of_known_rankings() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(kendall_tau(&a, &[10.0, 20.0, 30.0, 40.0, 50.0]), Some(1.0));
        assert_eq!(kendall_tau(&a, &[5.0, 4.0, 3.0, 2.0, 1.0]), Some(-1.0));
        // One swapped pair of 10: (9 - 1) / 10.
        let t = kendall_tau(&a, &[1.0, 2.0, 3.0, 5.0, 4.0]).unwrap();
        assert!((t - 0.8).abs() < 1e-12, "{t}");
        assert_eq!(kendall_tau(&[1.0], &[1.0]), None);
        assert_eq!(kendall_tau(&[1.0, 1.0], &[2.0, 2.0]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
