//! `PolyKernel`: the few schedules of one op between which dispatch chooses per frame.

use super::{DispatchTable, Schedule};
use crate::error::{Error, Result};
use crate::sparsity::{BitMask, Granularity};
use serde::{Deserialize, Serialize};

/// Most members a PolyKernel may have: each sparse member costs a tile count per frame and a
/// compiled kernel, and the tuner's greedy selection gains little past a handful.
pub const MAX_MEMBERS: usize = 8;

/// One schedule and its measured time against DISTile count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub schedule: Schedule,
    pub table: DispatchTable,
}

/// Up to [`MAX_MEMBERS`] members, exactly one of them dense. The dense member is what makes
/// "sparse execution is never slower than dense" hold: selection can always fall back to it.
/// Members are fixed once built (and validated again when deserialised).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Members", into = "Members")]
pub struct PolyKernel {
    members: Vec<Member>,
    dense: usize,
    /// The distinct sparse granularities, sorted; kept because dispatch asks for them per frame.
    grans: Vec<Granularity>,
}

/// The serialised form, validated on the way in.
#[derive(Serialize, Deserialize)]
struct Members {
    members: Vec<Member>,
}

impl TryFrom<Members> for PolyKernel {
    type Error = Error;
    fn try_from(m: Members) -> Result<PolyKernel> {
        PolyKernel::new(m.members)
    }
}

impl From<PolyKernel> for Members {
    fn from(p: PolyKernel) -> Members {
        Members { members: p.members }
    }
}

impl PolyKernel {
    /// Checks: 1..=MAX_MEMBERS members, exactly one dense, every sparse granularity at least
    /// 1×1, schedule names distinct (profiles and caches key kernels by them).
    pub fn new(members: Vec<Member>) -> Result<PolyKernel> {
        if members.len() > MAX_MEMBERS {
            return Err(Error::Other(format!("PolyKernel: {} members; at most {MAX_MEMBERS} are allowed", members.len())));
        }
        let dense: Vec<usize> = (0..members.len()).filter(|&i| members[i].schedule.is_dense()).collect();
        match dense.len() {
            1 => {}
            0 => {
                return Err(Error::Other(format!(
                    "PolyKernel: no dense member among {} (granularity None); one is required so that \
                     sparse execution is never slower than dense",
                    members.len()
                )))
            }
            _ => {
                let names: Vec<&str> = dense.iter().map(|&i| members[i].schedule.name.as_str()).collect();
                return Err(Error::Other(format!(
                    "PolyKernel: {} dense members ({}); exactly one is allowed",
                    dense.len(),
                    names.join(", ")
                )));
            }
        }
        for (i, m) in members.iter().enumerate() {
            if let Some(g) = m.schedule.granularity {
                if g.h == 0 || g.w == 0 {
                    return Err(Error::Other(format!("PolyKernel: member '{}': granularity {g} has a zero side", m.schedule.name)));
                }
            }
            if members[..i].iter().any(|o| o.schedule.name == m.schedule.name) {
                return Err(Error::Other(format!("PolyKernel: two members are named '{}'; names must be distinct", m.schedule.name)));
            }
        }
        let mut grans: Vec<Granularity> = members.iter().filter_map(|m| m.schedule.granularity).collect();
        grans.sort_unstable();
        grans.dedup();
        Ok(PolyKernel { members, dense: dense[0], grans })
    }

    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// Index of the dense member.
    pub fn dense_index(&self) -> usize {
        self.dense
    }

    /// The distinct granularities of the sparse members, sorted: pass them to
    /// [`BitMask::count_tiles_many`] and the result to [`PolyKernel::member_counts`].
    pub fn granularities(&self) -> &[Granularity] {
        &self.grans
    }

    /// Spreads counts per granularity (`counts[k]` for `granularities()[k]`) to counts per
    /// member, as [`PolyKernel::select`] takes them (0 for the dense member).
    pub fn member_counts(&self, counts: &[usize]) -> Result<Vec<usize>> {
        let gs = &self.grans;
        if counts.len() != gs.len() {
            return Err(Error::Other(format!("PolyKernel: {} tile counts for {} granularities", counts.len(), gs.len())));
        }
        Ok(self.members.iter().map(|m| m.schedule.granularity.and_then(|g| gs.binary_search(&g).ok()).map_or(0, |k| counts[k])).collect())
    }

    /// Predicted time (µs) of member `i` at `tiles` DISTiles; the dense member's does not depend
    /// on the mask: it is its table's time at the table's largest count (normally a one-point
    /// table). `None` if there is no member `i`.
    pub fn predict(&self, i: usize, tiles: usize) -> Option<f64> {
        let m = self.members.get(i)?;
        Some(if i == self.dense { m.table.last_time_us() } else { m.table.predict(tiles) })
    }

    /// The member to run: the argmin of predicted time, `counts[i]` being member `i`'s DISTile
    /// count (ignored for the dense member). Ties go to the dense member, then to the earlier
    /// member. Errors if `counts` does not have one count per member.
    pub fn try_select(&self, counts: &[usize]) -> Result<usize> {
        if counts.len() != self.members.len() {
            return Err(Error::Other(format!("PolyKernel: {} tile counts for {} members", counts.len(), self.members.len())));
        }
        let mut best = (self.dense, self.members[self.dense].table.last_time_us());
        for (i, (m, &c)) in self.members.iter().zip(counts).enumerate() {
            if i != self.dense {
                let t = m.table.predict(c);
                if t < best.1 {
                    best = (i, t);
                }
            }
        }
        Ok(best.0)
    }

    /// [`PolyKernel::try_select`]'s choice with tile counts asked for only where they could
    /// change it: `ones` is the mask's number of set positions (the exact count at 1x1; at
    /// granularity g the count lies in `ceil(ones / area)..=ones`), and `count(g)` is called
    /// for a member only when the least time its table predicts over that range could beat
    /// the best member so far. Members whose count is free go first, so the usual 1x1 member
    /// sets the bar before any tile is counted; ties break as in `try_select` (dense, then
    /// the earlier member).
    pub fn select_lazy(&self, ones: usize, mut count: impl FnMut(Granularity) -> usize) -> usize {
        // (time, member); `better` orders by time, then dense first, then index.
        let dense = self.dense;
        let better = |t: f64, i: usize, best: (f64, usize)| t < best.0 || (t == best.0 && best.1 != dense && i < best.1);
        let mut best = (self.members[dense].table.last_time_us(), dense);
        let one = Granularity::new(1, 1);
        for (i, m) in self.members.iter().enumerate() {
            if m.schedule.granularity.map(Granularity::effective) == Some(one) {
                let t = m.table.predict(ones);
                if better(t, i, best) {
                    best = (t, i);
                }
            }
        }
        for (i, m) in self.members.iter().enumerate() {
            let Some(g) = m.schedule.granularity.map(Granularity::effective) else { continue };
            if g == one {
                continue;
            }
            let lo = ones.div_ceil(g.area().max(1));
            if !better(m.table.min_between(lo, ones), i, best) {
                continue;
            }
            let t = m.table.predict(count(g));
            if better(t, i, best) {
                best = (t, i);
            }
        }
        best.1
    }

    /// [`PolyKernel::try_select`], falling back to the dense member when `counts` does not
    /// line up with the members (dense is always correct, never the wrong kernel).
    pub fn select(&self, counts: &[usize]) -> usize {
        self.try_select(counts).unwrap_or(self.dense)
    }

    /// The whole per-frame step for one mask: count its DISTiles at every granularity of the
    /// members (one `count_tiles_many`) and select.
    pub fn select_for_mask(&self, mask: &BitMask) -> usize {
        let counts = mask.count_tiles_many(&self.grans);
        match self.member_counts(&counts) {
            Ok(per_member) => self.select(&per_member),
            Err(_) => self.dense,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sparsity::test_rng::TestRng;

    fn member(s: Schedule, points: Vec<(u32, f64)>) -> Member {
        Member { schedule: s, table: DispatchTable::new(points).unwrap() }
    }

    /// A 56×56 op: dense 100 µs; 4×4 tiles 5 µs + 0.6 µs per tile (196 tiles at full density:
    /// 122.6 µs); 8×8 tiles 6 µs + 2 µs per tile (49 tiles: 104 µs).
    fn synthetic() -> PolyKernel {
        PolyKernel::new(vec![
            member(Schedule::sparse("conv_4x4", Granularity::new(4, 4)).with_knob("unroll", 4), vec![(0, 5.0), (196, 5.0 + 0.6 * 196.0)]),
            member(Schedule::dense("conv_dense"), vec![(0, 100.0)]),
            member(Schedule::sparse("conv_8x8", Granularity::new(8, 8)), vec![(0, 6.0), (49, 6.0 + 2.0 * 49.0)]),
        ])
        .unwrap()
    }

    fn blob_mask(rng: &mut TestRng, density: f64) -> BitMask {
        let mut m = BitMask::zeros(56, 56);
        while m.density() < density {
            let (y0, x0, s) = (rng.range(0, 56), rng.range(0, 56), rng.range(2, 12));
            for y in y0..(y0 + s).min(56) {
                for x in x0..(x0 + s).min(56) {
                    m.set(y, x, true);
                }
            }
        }
        m
    }

    #[test]
    fn dense_at_high_density_sparse_at_low() {
        let (mut rng, _seed) = TestRng::fresh();
        let pk = synthetic();
        assert_eq!(pk.granularities(), [Granularity::new(4, 4), Granularity::new(8, 8)]);
        assert_eq!(pk.select_for_mask(&BitMask::ones(56, 56)), 1);
        // 90% noise: every 4x4 and 8x8 cell holds a set bit (all empty: odds 0.1^16 per cell).
        let dense_noise = BitMask::from_fn(56, 56, |_, _| rng.unit() < 0.9);
        assert_eq!(pk.select_for_mask(&dense_noise), 1);
        // A few small blobs: few tiles at either granularity, so a sparse member wins.
        let low = blob_mask(&mut rng, 0.05);
        let pick = pk.select_for_mask(&low);
        assert_ne!(pick, 1, "{low:?}");
        assert_eq!(pk.select_for_mask(&BitMask::zeros(56, 56)), 0, "empty: 4x4 at 5 µs beats 8x8 at 6 µs");
        // By hand: 10 tiles of 4x4 (11 µs) against 3 of 8x8 (12 µs), then 8x8 cheaper.
        assert_eq!(pk.select(&[10, 0, 3]), 0);
        assert_eq!(pk.select(&[100, 0, 10]), 2);
        assert_eq!(pk.select(&[196, 0, 49]), 1);
    }

    #[test]
    fn selection_is_the_argmin_on_random_tables_and_masks() {
        let (mut rng, _seed) = TestRng::fresh();
        for case in 0..200 {
            let n = rng.range(1, MAX_MEMBERS + 1);
            let dense = rng.range(0, n);
            // Half the cases on a coarse time grid, so that ties (which lazy selection must
            // break as `select` does) are common.
            let grid = rng.range(0, 2) == 0;
            let members: Vec<Member> = (0..n)
                .map(|i| {
                    let s = if i == dense {
                        Schedule::dense(format!("m{i}"))
                    } else if rng.range(0, 4) == 0 {
                        // 1x1 is the member whose count is free (the popcount).
                        Schedule::sparse(format!("m{i}"), Granularity::new(1, 1))
                    } else {
                        let g = Granularity::new(rng.range(1, 17) as u16, rng.range(1, 17) as u16);
                        Schedule::sparse(format!("m{i}"), g)
                    };
                    let mut x = 0u32;
                    let points = (0..rng.range(1, 6))
                        .map(|_| {
                            x += rng.range(1, 200) as u32;
                            let t = rng.unit() * 200.0;
                            (x, if grid { (t / 40.0).round() * 40.0 } else { t })
                        })
                        .collect();
                    member(s, points)
                })
                .collect();
            let pk = PolyKernel::new(members).unwrap();
            let (h, w) = (rng.side(80), rng.side(80));
            let m = rng.mask(h, w);
            let counts: Vec<usize> =
                pk.members().iter().map(|mb| mb.schedule.granularity.map_or(0, |g| m.count_aligned_tiles(g))).collect();
            let pick = pk.select_for_mask(&m);
            assert_eq!(pick, pk.select(&counts), "case {case}");
            // The lazy form picks the same member, counting no more granularities than it must.
            let mut asked = Vec::new();
            let lazy = pk.select_lazy(m.count_ones(), |g| {
                asked.push(g);
                m.count_aligned_tiles(g)
            });
            assert_eq!(lazy, pick, "case {case}: select_lazy");
            assert!(!asked.contains(&Granularity::new(1, 1)), "case {case}: 1x1 is the popcount");
            let best = pk.predict(pick, counts[pick]).unwrap();
            for (i, &c) in counts.iter().enumerate() {
                let t = pk.predict(i, c).unwrap();
                assert!(best <= t, "case {case}: picked {pick} at {best} µs, member {i} predicts {t} µs");
                if t == best && pick != i {
                    let ok = if i == pk.dense_index() { false } else { pick == pk.dense_index() || pick < i };
                    assert!(ok, "case {case}: tie between {pick} and {i} not broken to dense, then first");
                }
            }
            assert!(best <= pk.predict(pk.dense_index(), 0).unwrap(), "never slower than dense");
        }
    }

    /// What makes lazy selection cheap: a member whose table cannot beat the bar anywhere in
    /// its possible count range is never counted, and one that might is (and wins if it does).
    #[test]
    fn select_lazy_counts_only_members_that_could_win() {
        let pk = PolyKernel::new(vec![
            member(Schedule::dense("d"), vec![(0, 100.0)]),
            member(Schedule::sparse("px", Granularity::new(1, 1)), vec![(0, 2.0), (1000, 102.0)]),
            // 4x4: at least 8 µs even at its floor; 8x8: 1 µs floor, 10 µs per tile.
            member(Schedule::sparse("t4", Granularity::new(4, 4)), vec![(0, 8.0), (100, 208.0)]),
            member(Schedule::sparse("t8", Granularity::new(8, 8)), vec![(0, 1.0), (10, 101.0)]),
        ])
        .unwrap();
        let run = |ones: usize, tiles: usize| {
            let mut asked = Vec::new();
            let pick = pk.select_lazy(ones, |g| {
                asked.push(g);
                tiles
            });
            (pick, asked)
        };
        // 30 set positions: 1x1 predicts 5 µs. 4x4 has at least ceil(30/16) = 2 tiles (12 µs),
        // 8x8 at least 1 (11 µs): neither can win, neither is counted.
        assert_eq!(run(30, 1), (1, vec![]));
        // 900 set positions: 1x1 at 92 µs; 8x8 needs at least 15 tiles (151 µs): not counted;
        // 4x4 at ceil(900/16) = 57 tiles could take 122 µs > 92: not counted either.
        assert_eq!(run(900, 57), (1, vec![]));
        // No set position with a slow 1x1: 4x4's floor 8 µs ties nothing, 8x8's 1 µs could win.
        let slow = PolyKernel::new(vec![
            member(Schedule::dense("d"), vec![(0, 100.0)]),
            member(Schedule::sparse("t4", Granularity::new(4, 4)), vec![(0, 8.0), (100, 208.0)]),
            member(Schedule::sparse("t8", Granularity::new(8, 8)), vec![(0, 1.0), (10, 101.0)]),
        ])
        .unwrap();
        let mut asked = Vec::new();
        let pick = slow.select_lazy(64, |g| {
            asked.push(g);
            if g == Granularity::new(8, 8) {
                1
            } else {
                4
            }
        });
        // 4x4 counted first (bar is dense's 100 µs): 4 tiles, 16 µs; 8x8 could reach 11 µs: counted, wins.
        assert_eq!((pick, asked), (2, vec![Granularity::new(4, 4), Granularity::new(8, 8)]));
        // Ties: a sparse member predicting exactly the dense time loses to dense, and of two
        // equal sparse members the earlier wins, counted or not.
        let tie = PolyKernel::new(vec![
            member(Schedule::sparse("a", Granularity::new(2, 2)), vec![(0, 50.0)]),
            member(Schedule::sparse("b", Granularity::new(1, 1)), vec![(0, 50.0)]),
            member(Schedule::dense("d"), vec![(0, 50.0)]),
        ])
        .unwrap();
        assert_eq!(tie.select_lazy(10, |_| 3), 2);
        let tie = PolyKernel::new(vec![
            member(Schedule::sparse("a", Granularity::new(2, 2)), vec![(0, 40.0)]),
            member(Schedule::sparse("b", Granularity::new(1, 1)), vec![(0, 40.0)]),
            member(Schedule::dense("d"), vec![(0, 50.0)]),
        ])
        .unwrap();
        assert_eq!(tie.select_lazy(10, |_| 3), tie.select(&[3, 10, 0]));
        assert_eq!(tie.select_lazy(10, |_| 3), 0);
    }

    #[test]
    fn ties_go_to_dense() {
        let pk = PolyKernel::new(vec![
            member(Schedule::sparse("s", Granularity::new(2, 2)), vec![(0, 50.0)]),
            member(Schedule::dense("d"), vec![(0, 50.0)]),
        ])
        .unwrap();
        assert_eq!(pk.select(&[0, 0]), 1);
        // The dense member's own count is ignored, whatever it is.
        assert_eq!(pk.select(&[0, 123_456]), 1);
    }

    #[test]
    fn invalid_polykernels_are_refused() {
        let d = || member(Schedule::dense("d"), vec![(0, 1.0)]);
        let s = |n: &str, h, w| member(Schedule::sparse(n, Granularity::new(h, w)), vec![(0, 1.0)]);
        let e = PolyKernel::new(vec![s("a", 2, 2)]).unwrap_err().to_string();
        assert!(e.contains("no dense member"), "{e}");
        assert!(PolyKernel::new(vec![]).unwrap_err().to_string().contains("no dense member"));
        let two = vec![d(), member(Schedule::dense("d2"), vec![(0, 2.0)])];
        let e = PolyKernel::new(two).unwrap_err().to_string();
        assert!(e.contains("2 dense members") && e.contains("d2"), "{e}");
        let mut many = vec![d()];
        many.extend((0..MAX_MEMBERS).map(|i| s(&format!("s{i}"), 2, 2)));
        let e = PolyKernel::new(many).unwrap_err().to_string();
        assert!(e.contains(&format!("{} members", MAX_MEMBERS + 1)), "{e}");
        let e = PolyKernel::new(vec![d(), s("z", 0, 4)]).unwrap_err().to_string();
        assert!(e.contains("'z'") && e.contains("zero side"), "{e}");
        let e = PolyKernel::new(vec![d(), s("x", 2, 2), s("x", 4, 4)]).unwrap_err().to_string();
        assert!(e.contains("named 'x'"), "{e}");
        let pk = PolyKernel::new(vec![d(), s("a", 2, 2)]).unwrap();
        assert!(pk.try_select(&[1]).unwrap_err().to_string().contains("1 tile counts for 2 members"));
        assert_eq!(pk.select(&[1, 2, 3]), 0, "mismatched counts fall back to dense");
        assert!(pk.member_counts(&[1, 2]).is_err());
        assert_eq!(pk.predict(5, 0), None);
    }

    #[test]
    fn json_round_trip_and_validation_on_load() {
        let pk = synthetic();
        let json = serde_json::to_string_pretty(&pk).unwrap();
        assert!(json.contains("\"unroll\": 4") && json.contains("\"granularity\": null"), "{json}");
        let back: PolyKernel = serde_json::from_str(&json).unwrap();
        assert_eq!(back, pk);
        assert_eq!(back.dense_index(), 1);
        let s = Schedule::sparse("k", Granularity::new(3, 5)).with_knob("vec", 4).with_knob("block", 128);
        let sj = serde_json::to_string(&s).unwrap();
        assert_eq!(sj, r#"{"name":"k","granularity":{"h":3,"w":5},"knobs":{"block":128,"vec":4}}"#);
        assert_eq!(serde_json::from_str::<Schedule>(&sj).unwrap(), s);
        // Knobs may be left out of a hand-written profile.
        let bare: Schedule = serde_json::from_str(r#"{"name":"d","granularity":null}"#).unwrap();
        assert!(bare.is_dense() && bare.knobs.is_empty());
        // A file with two dense members does not load.
        let mut bad: serde_json::Value = serde_json::from_str(&json).unwrap();
        bad["members"][2]["schedule"]["granularity"] = serde_json::Value::Null;
        let e = serde_json::from_value::<PolyKernel>(bad).unwrap_err().to_string();
        assert!(e.contains("dense members"), "{e}");
    }
}
