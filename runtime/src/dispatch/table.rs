//! `DispatchTable`: measured kernel time as a function of DISTile count.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Measured time (µs) of one kernel variant against the number of DISTiles it ran on: points
/// `(tiles, time_us)` sorted by strictly increasing tile count, every time finite and
/// non-negative. Between points the prediction is linear.
///
/// Beyond the ends: below the first count the first point's time holds (fewer tiles never cost
/// more, and a launch has a floor); above the last count the last segment is extended linearly,
/// but never below the last point's time (more tiles never cost less). A one-point table is a
/// constant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "TablePoints", into = "TablePoints")]
pub struct DispatchTable {
    points: Vec<(u32, f64)>,
}

/// The serialised form, validated on the way in.
#[derive(Serialize, Deserialize)]
struct TablePoints {
    points: Vec<(u32, f64)>,
}

impl TryFrom<TablePoints> for DispatchTable {
    type Error = Error;
    fn try_from(p: TablePoints) -> Result<DispatchTable> {
        DispatchTable::new(p.points)
    }
}

impl From<DispatchTable> for TablePoints {
    fn from(t: DispatchTable) -> TablePoints {
        TablePoints { points: t.points }
    }
}

impl DispatchTable {
    /// Checks the points (see the type's docs) and keeps them.
    pub fn new(points: Vec<(u32, f64)>) -> Result<DispatchTable> {
        if points.is_empty() {
            return Err(Error::Other("dispatch table: no points; it needs at least one".into()));
        }
        for (i, &(tiles, t)) in points.iter().enumerate() {
            if !t.is_finite() {
                return Err(Error::Other(format!("dispatch table: point {i} (tiles {tiles}): time {t} µs is not finite")));
            }
            if t < 0.0 {
                return Err(Error::Other(format!("dispatch table: point {i} (tiles {tiles}): time {t} µs is negative")));
            }
            if i > 0 && tiles <= points[i - 1].0 {
                return Err(Error::Other(format!(
                    "dispatch table: point {i}: tiles {tiles} after tiles {}; points must be sorted by \
                     strictly increasing tile count",
                    points[i - 1].0
                )));
            }
        }
        Ok(DispatchTable { points })
    }

    /// A table that predicts `time_us` whatever the count (e.g. the dense member).
    pub fn constant(time_us: f64) -> Result<DispatchTable> {
        DispatchTable::new(vec![(0, time_us)])
    }

    pub fn points(&self) -> &[(u32, f64)] {
        &self.points
    }

    /// Time of the last (largest-count) point.
    pub fn last_time_us(&self) -> f64 {
        self.points[self.points.len() - 1].1
    }

    /// Predicted time (µs) for `tiles` DISTiles: piecewise linear, with the ends as described on
    /// the type. Always finite and non-negative.
    pub fn predict(&self, tiles: usize) -> f64 {
        let p = &self.points;
        let x = tiles as f64;
        let (x0, y0) = (p[0].0 as f64, p[0].1);
        if p.len() == 1 || x <= x0 {
            return y0;
        }
        // First point with a count above `tiles`: the segment ends there.
        let j = p.partition_point(|&(t, _)| (t as f64) <= x);
        let (a, b) = if j >= p.len() { (p[p.len() - 2], p[p.len() - 1]) } else { (p[j - 1], p[j]) };
        let (xa, ya, xb, yb) = (a.0 as f64, a.1, b.0 as f64, b.1);
        let y = ya + (yb - ya) * (x - xa) / (xb - xa);
        if j >= p.len() {
            y.max(yb)
        } else {
            y
        }
    }

    /// A lower bound of `predict(n)` for every `n` in `lo..=hi`: the least of the prediction
    /// at both ends and at the points between (the prediction is linear between points and
    /// constant or linear past the ends, so its minimum over the interval is at one of them).
    pub fn min_between(&self, lo: usize, hi: usize) -> f64 {
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        let inner = self.points.iter().filter(|&&(t, _)| (t as usize) > lo && (t as usize) < hi).map(|&(_, y)| y);
        inner.fold(self.predict(lo).min(self.predict(hi)), f64::min)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_between_bounds_every_count_in_the_interval() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for _ in 0..300 {
            let mut x = 0u32;
            let points: Vec<(u32, f64)> = (0..1 + next(6))
                .map(|_| {
                    x += 1 + next(40) as u32;
                    (x, next(1000) as f64 / 10.0)
                })
                .collect();
            let t = DispatchTable::new(points).unwrap();
            let (lo, hi) = (next(250) as usize, next(250) as usize);
            let (a, b) = (lo.min(hi), lo.max(hi));
            let exact = (a..=b).map(|n| t.predict(n)).fold(f64::INFINITY, f64::min);
            let bound = t.min_between(lo, hi);
            assert!(bound <= exact, "{t:?} on {a}..={b}: bound {bound} above the least prediction {exact}");
            // Tight where the least value is at a point or an end (always, for integer points).
            assert!((bound - exact).abs() < 1e-9, "{t:?} on {a}..={b}: bound {bound}, least {exact}");
        }
    }

    fn err(points: Vec<(u32, f64)>) -> String {
        DispatchTable::new(points).unwrap_err().to_string()
    }

    #[test]
    fn predicts_piecewise_linear_with_held_and_extended_ends() {
        let t = DispatchTable::new(vec![(10, 4.0), (20, 6.0), (40, 16.0)]).unwrap();
        assert_eq!(t.predict(10), 4.0);
        assert_eq!(t.predict(15), 5.0);
        assert_eq!(t.predict(20), 6.0);
        assert_eq!(t.predict(30), 11.0);
        assert_eq!(t.predict(40), 16.0);
        // Below the first point: held.
        assert_eq!(t.predict(0), 4.0);
        // Above the last: the last segment's slope (0.5 µs per tile) goes on.
        assert_eq!(t.predict(60), 26.0);
        assert_eq!(DispatchTable::constant(7.5).unwrap().predict(1_000_000), 7.5);
        // A falling last segment does not extrapolate below the last point.
        let t = DispatchTable::new(vec![(0, 9.0), (10, 5.0)]).unwrap();
        assert_eq!(t.predict(5), 7.0);
        assert_eq!(t.predict(100), 5.0);
        assert_eq!(t.last_time_us(), 5.0);
    }

    #[test]
    fn bad_points_are_refused_with_the_reason() {
        assert!(err(vec![]).contains("no points"));
        let e = err(vec![(0, 1.0), (5, f64::NAN)]);
        assert!(e.contains("point 1") && e.contains("not finite"), "{e}");
        assert!(err(vec![(0, f64::INFINITY)]).contains("not finite"));
        let e = err(vec![(0, 1.0), (3, -0.5)]);
        assert!(e.contains("tiles 3") && e.contains("negative"), "{e}");
        let e = err(vec![(0, 1.0), (8, 2.0), (4, 3.0)]);
        assert!(e.contains("point 2") && e.contains("increasing"), "{e}");
        assert!(err(vec![(4, 1.0), (4, 2.0)]).contains("increasing"));
    }

    #[test]
    fn json_round_trip_and_validation_on_load() {
        let t = DispatchTable::new(vec![(0, 1.25), (64, 3.5), (4096, 100.0)]).unwrap();
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, r#"{"points":[[0,1.25],[64,3.5],[4096,100.0]]}"#);
        assert_eq!(serde_json::from_str::<DispatchTable>(&json).unwrap(), t);
        let e = serde_json::from_str::<DispatchTable>(r#"{"points":[[5,1.0],[2,1.0]]}"#).unwrap_err();
        assert!(e.to_string().contains("increasing"), "{e}");
        assert!(serde_json::from_str::<DispatchTable>(r#"{"points":[]}"#).is_err());
        assert!(serde_json::from_str::<DispatchTable>(r#"{"points":[[0,-1.0]]}"#).is_err());
    }
}
