//! Property tests of masks and DISTiles against per-position reference implementations, on
//! fresh random masks every run (the seed is printed on failure; `DYNASPA_TEST_SEED` replays it).

use super::test_rng::TestRng;
use super::tiles::aligned_tiles_naive;
use super::{BitMask, Component, DisTile, Granularity, TileSet};
use std::collections::VecDeque;

/// Checks every tile of `t` (made from `m`): its in-bounds extent is exactly the part of the
/// full tile inside the mask (so writing only the extent never goes out of bounds), and it holds
/// at least one set bit. Also that the tiles cover every set bit. Returns nothing; panics with
/// `what` in the message.
fn check_tiles(m: &BitMask, t: &TileSet, what: &str) {
    let (h, w) = (m.height(), m.width());
    let (gh, gw) = (t.granularity.h as usize, t.granularity.w as usize);
    assert!(gh >= 1 && gw >= 1, "{what}: granularity {}", t.granularity);
    assert_eq!((t.height, t.width), (h, w), "{what}: size");
    for &tile in &t.tiles {
        let (y0, y1, x0, x1) = t.extent(tile);
        assert!(y0 < y1 && y1 <= h && x0 < x1 && x1 <= w, "{what}: tile {tile:?} extent {:?}", (y0, y1, x0, x1));
        for dy in 0..gh {
            for dx in 0..gw {
                let (y, x) = (y0 + dy, x0 + dx);
                let in_extent = y < y1 && x < x1;
                // Phantom positions are exactly those past height or width.
                assert_eq!(in_extent, y < h && x < w, "{what}: tile {tile:?} position {:?}", (y, x));
            }
        }
        assert_eq!(t.phantom(tile), gh * gw - (y1 - y0) * (x1 - x0));
        assert!(t.positions(tile).any(|(y, x)| m.get(y, x)), "{what}: tile {tile:?} holds no set bit\n{m:?}");
        assert!(t.positions(tile).all(|(y, x)| y < h && x < w));
    }
    let cov = t.coverage();
    for y in 0..h {
        for x in 0..w {
            if m.get(y, x) {
                assert!(cov.get(y, x), "{what}: set bit ({y}, {x}) not covered\n{m:?}");
            }
        }
    }
    let mut sorted = t.tiles.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, t.tiles, "{what}: tiles not in row-major order or repeated");
}

/// Checks the write plan of `t`: every set bit of `m` stored exactly once, nothing else stored.
fn check_write_plan(m: &BitMask, t: &TileSet, what: &str) {
    let plan = t.positions_written_once(m).unwrap();
    let (gh, gw) = (t.granularity.h as usize, t.granularity.w as usize);
    let mut stores = vec![0u32; m.len()];
    for (i, &tile) in t.tiles.iter().enumerate() {
        let mut n = 0;
        for dy in 0..gh {
            for dx in 0..gw {
                if plan.writes(i, dy, dx) {
                    let (y, x) = (tile.y as usize + dy, tile.x as usize + dx);
                    assert!(y < m.height() && x < m.width(), "{what}: plan stores phantom {:?}", (y, x));
                    assert!(m.get(y, x), "{what}: plan stores inactive {:?}", (y, x));
                    stores[y * m.width() + x] += 1;
                    n += 1;
                }
            }
        }
        assert_eq!(plan.count(i), n);
    }
    for (i, (&s, b)) in stores.iter().zip(m.to_bools()).enumerate() {
        assert_eq!(s, b as u32, "{what}: position {i} stored {s} times (set: {b})\n{m:?}");
    }
}

/// 4-connected components by breadth-first search: boxes in order of first position, and a
/// label per position (`usize::MAX` for unset).
fn components_naive(m: &BitMask) -> (Vec<Component>, Vec<usize>) {
    let (h, w) = (m.height(), m.width());
    let mut label = vec![usize::MAX; h * w];
    let mut comps = Vec::new();
    for sy in 0..h {
        for sx in 0..w {
            if !m.get(sy, sx) || label[sy * w + sx] != usize::MAX {
                continue;
            }
            let id = comps.len();
            let mut c = Component { y0: sy, y1: sy + 1, x0: sx, x1: sx + 1, size: 0 };
            let mut queue = VecDeque::from([(sy, sx)]);
            label[sy * w + sx] = id;
            while let Some((y, x)) = queue.pop_front() {
                c.size += 1;
                (c.y0, c.y1, c.x0, c.x1) = (c.y0.min(y), c.y1.max(y + 1), c.x0.min(x), c.x1.max(x + 1));
                let next = [(y.wrapping_sub(1), x), (y + 1, x), (y, x.wrapping_sub(1)), (y, x + 1)];
                for (ny, nx) in next {
                    if ny < h && nx < w && m.get(ny, nx) && label[ny * w + nx] == usize::MAX {
                        label[ny * w + nx] = id;
                        queue.push_back((ny, nx));
                    }
                }
            }
            comps.push(c);
        }
    }
    (comps, label)
}

/// Component tiles by definition: per component, a grid from its box's top-left, keeping the
/// cells holding one of its positions.
fn component_tiles_naive(m: &BitMask, g: Granularity) -> Vec<DisTile> {
    let (comps, label) = components_naive(m);
    let (gh, gw) = (g.h as usize, g.w as usize);
    let mut tiles = Vec::new();
    for (id, c) in comps.iter().enumerate() {
        for ty in (c.y0..c.y1).step_by(gh) {
            for tx in (c.x0..c.x1).step_by(gw) {
                let own = (ty..(ty + gh).min(m.height())).any(|y| (tx..(tx + gw).min(m.width())).any(|x| label[y * m.width() + x] == id));
                if own {
                    tiles.push(DisTile { y: ty as u32, x: tx as u32 });
                }
            }
        }
    }
    tiles.sort();
    tiles.dedup();
    tiles
}

fn random_mask(rng: &mut TestRng, max_side: usize) -> BitMask {
    let (h, w) = (rng.side(max_side), rng.side(max_side));
    rng.mask(h, w)
}

#[test]
fn aligned_tiles_equal_the_reference_at_every_granularity_up_to_16() {
    let (mut rng, _seed) = TestRng::fresh();
    for case in 0..48 {
        let m = random_mask(&mut rng, 100);
        let mut all = Vec::new();
        for gh in 1..=16u16 {
            for gw in 1..=16u16 {
                let g = Granularity::new(gh, gw);
                all.push(g);
                let what = format!("case {case} {}x{} g {g}", m.height(), m.width());
                let t = m.aligned_tiles(g);
                let naive = aligned_tiles_naive(&m, g);
                assert_eq!(t, naive, "{what}\n{m:?}");
                assert_eq!(m.count_aligned_tiles(g), t.len(), "{what}");
                for tile in &t.tiles {
                    assert!(tile.y % gh as u32 == 0 && tile.x % gw as u32 == 0, "{what}: {tile:?} not aligned");
                }
                check_tiles(&m, &t, &what);
                if (gh + gw) % 5 == 0 {
                    check_write_plan(&m, &t, &what);
                }
            }
        }
        // Many granularities at once, in a random order with repeats.
        let pick: Vec<Granularity> = (0..rng.range(1, 12)).map(|_| all[rng.range(0, all.len())]).collect();
        let many = m.count_tiles_many(&pick);
        let one: Vec<usize> = pick.iter().map(|&g| aligned_tiles_naive(&m, g).len()).collect();
        assert_eq!(many, one, "case {case} {pick:?}\n{m:?}");
    }
}

#[test]
fn aligned_tiles_at_large_granularities_and_wide_masks() {
    // Rows and tiles wider than a word: window ORs and group starts cross word boundaries.
    let (mut rng, _seed) = TestRng::fresh();
    for case in 0..150 {
        let (h, w) = (rng.side(70), rng.range(1, 300));
        let m = rng.mask(h, w);
        let gs: Vec<Granularity> = (0..6).map(|_| Granularity::new(rng.range(1, 80) as u16, rng.range(1, 140) as u16)).collect();
        for &g in &gs {
            let t = m.aligned_tiles(g);
            assert_eq!(t, aligned_tiles_naive(&m, g), "case {case} {h}x{w} g {g}\n{m:?}");
            assert_eq!(m.count_aligned_tiles(g), t.len());
            check_tiles(&m, &t, &format!("case {case} g {g}"));
        }
        let want: Vec<usize> = gs.iter().map(|&g| m.count_aligned_tiles(g)).collect();
        assert_eq!(m.count_tiles_many(&gs), want, "case {case} {gs:?}");
    }
}

#[test]
fn zero_granularity_sides_count_as_one() {
    let m = BitMask::from_fn(5, 7, |y, x| (y * 3 + x) % 4 == 0);
    let t = m.aligned_tiles(Granularity::new(0, 2));
    assert_eq!(t.granularity, Granularity::new(1, 2));
    assert_eq!(t, m.aligned_tiles(Granularity::new(1, 2)));
    assert_eq!(m.count_aligned_tiles(Granularity::new(0, 0)), m.count_ones());
    let n = m.count_ones();
    assert!(n > 0);
    assert_eq!(m.count_tiles_many(&[Granularity::new(0, 0), Granularity::new(1, 1)]), vec![n, n]);
    assert_eq!(m.component_tiles(Granularity::new(0, 0)).len(), m.count_ones());
    assert!(BitMask::zeros(0, 4).aligned_tiles(Granularity::new(2, 2)).is_empty());
    assert_eq!(BitMask::zeros(3, 0).count_tiles_many(&[Granularity::new(2, 2)]), vec![0]);
}

#[test]
fn component_tiles_equal_the_reference_and_store_each_active_position_once() {
    let (mut rng, _seed) = TestRng::fresh();
    for case in 0..40 {
        let m = random_mask(&mut rng, 100);
        let (comps, _) = components_naive(&m);
        assert_eq!(m.components(), comps, "case {case}\n{m:?}");
        for gh in 1..=16u16 {
            for gw in 1..=16u16 {
                let g = Granularity::new(gh, gw);
                let what = format!("case {case} {}x{} g {g}", m.height(), m.width());
                let t = m.component_tiles(g);
                assert_eq!(t.tiles, component_tiles_naive(&m, g), "{what}\n{m:?}");
                check_tiles(&m, &t, &what);
                check_write_plan(&m, &t, &what);
            }
        }
    }
}

#[test]
fn component_tiles_on_wide_masks() {
    let (mut rng, _seed) = TestRng::fresh();
    for case in 0..100 {
        let (h, w) = (rng.side(40), rng.range(60, 260));
        let m = rng.mask(h, w);
        let g = Granularity::new(rng.range(1, 20) as u16, rng.range(1, 100) as u16);
        let t = m.component_tiles(g);
        assert_eq!(t.tiles, component_tiles_naive(&m, g), "case {case} g {g}\n{m:?}");
        check_tiles(&m, &t, &format!("case {case} g {g}"));
        check_write_plan(&m, &t, &format!("case {case} g {g}"));
    }
}

#[test]
fn overlapping_component_tiles_are_deduplicated() {
    // Two components whose 3x3 tiles overlap: the right one's box starts at column 2, so its
    // tile at (0, 2) and the left one's at (0, 0) share column 2.
    let m = BitMask::from_fn(3, 6, |y, x| x == 0 || (x == 2 && y == 0) || (x >= 3 && y == 2));
    let t = m.component_tiles(Granularity::new(3, 3));
    assert!(t.len() >= 2);
    let plan = t.positions_written_once(&m).unwrap();
    let total: usize = (0..t.len()).map(|i| plan.count(i)).sum();
    assert_eq!(total, m.count_ones());
    assert!(t.coverage().count_ones() < t.computed_positions(), "no overlap in {t:?}");
    assert!(t.positions_written_once(&BitMask::zeros(3, 5)).is_err());
    let bad = TileSet { tiles: vec![DisTile { y: 3, x: 0 }], ..t.clone() };
    let e = bad.positions_written_once(&m).unwrap_err().to_string();
    assert!(e.contains("outside"), "{e}");
}

#[test]
fn dilate_xy_equals_the_reference() {
    let (mut rng, _seed) = TestRng::fresh();
    for case in 0..300 {
        let (h, w) = (rng.side(90), rng.range(1, 200));
        let m = if rng.range(0, 2) == 0 {
            // Sparse dots, so the dilation's shape is visible.
            let d = rng.unit() * 0.05;
            BitMask::from_fn(h, w, |_, _| rng.unit() < d)
        } else {
            rng.mask(h, w)
        };
        let (ry, rx) = (rng.range(0, 9), rng.range(0, 9));
        let (ry, rx) = if rng.range(0, 10) == 0 { (ry * 20, rx * 20) } else { (ry, rx) };
        let want = BitMask::from_fn(h, w, |y, x| {
            (y.saturating_sub(ry)..(y + ry + 1).min(h)).any(|yy| (x.saturating_sub(rx)..(x + rx + 1).min(w)).any(|xx| m.get(yy, xx)))
        });
        let got = m.dilate_xy(ry, rx);
        assert_eq!(got, want, "case {case} ry {ry} rx {rx}\n{m:?}");
        assert_eq!(got.words(), want.words(), "padding bits");
        if ry == rx {
            assert_eq!(m.dilate(2 * rx + 1).unwrap(), want);
        }
    }
}

#[test]
fn max_pool_equals_the_reference() {
    let (mut rng, _seed) = TestRng::fresh();
    for case in 0..200 {
        let r = rng.range(1, 9);
        let (a, b) = (rng.side(20), rng.side(20));
        let m = rng.mask(a * r, b * r);
        let want = BitMask::from_fn(a, b, |y, x| (0..r).any(|dy| (0..r).any(|dx| m.get(y * r + dy, x * r + dx))));
        assert_eq!(m.max_pool(r).unwrap(), want, "case {case} r {r}\n{m:?}");
    }
}

fn as_f32(m: &BitMask, rng: &mut TestRng) -> Vec<f32> {
    m.to_bools()
        .iter()
        .map(|&b| {
            if b {
                1.0
            } else if rng.range(0, 4) == 0 {
                -0.0
            } else {
                0.0
            }
        })
        .collect()
}

#[test]
fn from_f32_round_trips() {
    let (mut rng, _seed) = TestRng::fresh();
    for case in 0..300 {
        let m = random_mask(&mut rng, 120);
        let v = as_f32(&m, &mut rng);
        let back = BitMask::from_f32(m.height(), m.width(), &v).unwrap();
        assert_eq!(back, m, "case {case}");
        assert_eq!(back.words(), m.words(), "case {case}: padding bits");
    }
}

/// Runs cover exactly the set positions, each maximal, in order; refilling a mask in place
/// gives what building it anew does.
#[test]
fn runs_and_refill_match_the_bits() {
    let (mut rng, _seed) = TestRng::fresh();
    for case in 0..300 {
        let m = random_mask(&mut rng, 150);
        let mut runs = Vec::new();
        m.for_each_run(|a, b| runs.push((a, b)));
        let bits: Vec<bool> = m.to_bools();
        let mut want = Vec::new();
        let mut i = 0;
        while i < bits.len() {
            if bits[i] {
                let a = i;
                while i < bits.len() && bits[i] {
                    i += 1;
                }
                want.push((a, i));
            } else {
                i += 1;
            }
        }
        assert_eq!(runs, want, "case {case}: {m:?}");
        let other = random_mask(&mut rng, 150);
        if other.height() == m.height() && other.width() == m.width() {
            let mut r = other.clone();
            r.refill_f32(&as_f32(&m, &mut rng)).unwrap();
            assert_eq!(r, m, "case {case}: refill");
            assert_eq!(r.words(), m.words(), "case {case}: refill padding bits");
        }
        let mut r = m.clone();
        assert!(r.refill_f32(&vec![0.0; m.len() + 1]).is_err());
    }
}

/// The vector packing (where the machine has it) and the portable one agree on every length,
/// on the bits and on whether a value is bad.
#[test]
fn f32_packings_agree() {
    let (mut rng, _seed) = TestRng::fresh();
    let vals = [0.0f32, -0.0, 1.0, 0.5, f32::NAN, -1.0, f32::from_bits(1)];
    for case in 0..500 {
        let n = rng.range(0, 300);
        let bad_rate = [0, 0, 1, 50][rng.range(0, 4)];
        let v: Vec<f32> =
            (0..n).map(|_| if rng.range(0, 1000) < bad_rate { vals[rng.range(3, vals.len())] } else { vals[rng.range(0, 3)] }).collect();
        let (mut a, mut b) = (vec![0u64; n.div_ceil(64)], vec![0u64; n.div_ceil(64)]);
        let (ok_a, ok_b) = (super::bitmask::pack_all(&v, &mut a), super::bitmask::pack_portable(&v, &mut b));
        assert_eq!(ok_a, ok_b, "case {case}: validity");
        if ok_a {
            assert_eq!(a, b, "case {case}: bits");
        }
    }
}

#[test]
fn from_f32_rejects_non_binary_values_naming_the_first() {
    let (mut rng, _seed) = TestRng::fresh();
    let bad = [
        f32::NAN,
        -f32::NAN,
        0.5,
        2.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.0 + f32::EPSILON,
        1.0 - f32::EPSILON / 2.0,
        f32::from_bits(1),
        -f32::from_bits(1),
        f32::MIN_POSITIVE,
        f32::from_bits(0x3f80_0000 | 1 << 31),
    ];
    for case in 0..300 {
        let m = random_mask(&mut rng, 80);
        let mut v = as_f32(&m, &mut rng);
        let i = rng.range(0, v.len());
        let value = bad[rng.range(0, bad.len())];
        v[i] = value;
        if i + 1 < v.len() && rng.range(0, 2) == 0 {
            // A later offender must not be the one reported.
            let j = rng.range(i + 1, v.len());
            v[j] = 0.25;
        }
        let e = BitMask::from_f32(m.height(), m.width(), &v).unwrap_err().to_string();
        let (y, x) = (i / m.width(), i % m.width());
        assert!(e.contains(&format!("(y {y}, x {x})")) && e.contains(&format!("is {value:?}")), "case {case}: {e}");
    }
    let e = BitMask::from_f32(3, 4, &[0.0; 11]).unwrap_err().to_string();
    assert!(e.contains("3x4") && e.contains("11"), "{e}");
    assert!(BitMask::from_f32(usize::MAX, 2, &[]).is_err());
    assert_eq!(BitMask::from_f32(0, 5, &[]).unwrap().len(), 0);
}

#[test]
fn packed_words_keep_zero_padding_and_match_bits() {
    let (mut rng, _seed) = TestRng::fresh();
    for _ in 0..200 {
        let m = random_mask(&mut rng, 70);
        let (n, tail) = (m.len(), m.len() % 64);
        if tail != 0 {
            assert_eq!(m.words()[n / 64] >> tail, 0);
        }
        let u32s = m.to_u32_words();
        for (i, b) in m.bits().iter().by_vals().enumerate() {
            assert_eq!((m.words()[i / 64] >> (i % 64)) & 1 == 1, b);
            assert_eq!((u32s[i / 32] >> (i % 32)) & 1 == 1, b);
        }
        let bv = m.bits().to_bitvec();
        assert_eq!(BitMask::from_bitvec(m.height(), m.width(), bv).unwrap(), m);
        assert_eq!(BitMask::ones(m.height(), m.width()).count_ones(), n);
    }
    assert!(BitMask::from_bitvec(2, 3, bitvec::bitvec![u64, bitvec::order::Lsb0; 0; 5]).is_err());
}
