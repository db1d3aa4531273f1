//! Numpy multidirectional broadcasting for elementwise kernels of two and three inputs.

use super::par::fill_par;
use super::strided::{istrides, Walk};
use dynaspa_runtime::tensor::numel;
use dynaspa_runtime::{Error, Result};

/// Strides for reading an input of `shape` as if it had the broadcast shape `out`
/// (0 along broadcast dims), or an error when `shape` does not broadcast to `out`.
pub(crate) fn bcast_strides(shape: &[usize], out: &[usize], what: &str) -> Result<Vec<isize>> {
    if shape.len() > out.len() {
        return Err(Error::Other(format!("{what}: input {shape:?} has more dims than the output {out:?}")));
    }
    let lead = out.len() - shape.len();
    let own = istrides(shape);
    let mut s = vec![0isize; out.len()];
    for (i, &d) in shape.iter().enumerate() {
        let o = out[lead + i];
        if d == o {
            s[lead + i] = if d == 1 { 0 } else { own[i] };
        } else if d != 1 {
            return Err(Error::Other(format!("{what}: input {shape:?} does not broadcast to {out:?}")));
        }
    }
    Ok(s)
}

/// The numpy broadcast of `shapes`, or an error naming them.
pub(crate) fn broadcast_shape(shapes: &[&[usize]], what: &str) -> Result<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        let lead = rank - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[lead + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(Error::Other(format!("{what}: shapes {shapes:?} do not broadcast together")));
            }
        }
    }
    Ok(out)
}

fn check_len(len: usize, shape: &[usize], what: &str) -> Result<()> {
    if numel(shape) != len {
        return Err(Error::Other(format!("{what}: {len} elements do not fill shape {shape:?}")));
    }
    Ok(())
}

/// `out[i] = f(a[..], b[..])` over the broadcast shape `osh`.
pub(crate) fn map2<A, B, O, F>(a: &[A], ash: &[usize], b: &[B], bsh: &[usize], osh: &[usize], what: &str, f: F) -> Result<Vec<O>>
where
    A: Copy + Sync,
    B: Copy + Sync,
    O: Copy + Default + Send,
    F: Fn(A, B) -> O + Sync,
{
    check_len(a.len(), ash, what)?;
    check_len(b.len(), bsh, what)?;
    let sa = bcast_strides(ash, osh, what)?;
    let sb = bcast_strides(bsh, osh, what)?;
    let walk = Walk::<2>::new(osh, [&sa, &sb], [0, 0]);
    let [ia, ib] = walk.inner_strides();
    fill_par(numel(osh), |start, out: &mut [O]| {
        walk.runs(start, out.len(), |pos, len, [oa, ob]| {
            let dst = &mut out[pos..pos + len];
            let (oa, ob) = (oa as usize, ob as usize);
            // One loop per stride pattern, so each compiles to a tight (vectorisable) loop.
            match (ia, ib) {
                (0, 0) => dst.fill(f(a[oa], b[ob])),
                (_, 0) => {
                    let y = b[ob];
                    for (d, &x) in dst.iter_mut().zip(&a[oa..oa + len]) {
                        *d = f(x, y);
                    }
                }
                (0, _) => {
                    let x = a[oa];
                    for (d, &y) in dst.iter_mut().zip(&b[ob..ob + len]) {
                        *d = f(x, y);
                    }
                }
                _ => {
                    for ((d, &x), &y) in dst.iter_mut().zip(&a[oa..oa + len]).zip(&b[ob..ob + len]) {
                        *d = f(x, y);
                    }
                }
            }
        })
    })
}

/// `out[i] = f(a[..], b[..], c[..])` over the broadcast shape `osh`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn map3<A, B, C, O, F>(
    (a, ash): (&[A], &[usize]),
    (b, bsh): (&[B], &[usize]),
    (c, csh): (&[C], &[usize]),
    osh: &[usize],
    what: &str,
    f: F,
) -> Result<Vec<O>>
where
    A: Copy + Sync,
    B: Copy + Sync,
    C: Copy + Sync,
    O: Copy + Default + Send,
    F: Fn(A, B, C) -> O + Sync,
{
    check_len(a.len(), ash, what)?;
    check_len(b.len(), bsh, what)?;
    check_len(c.len(), csh, what)?;
    let sa = bcast_strides(ash, osh, what)?;
    let sb = bcast_strides(bsh, osh, what)?;
    let sc = bcast_strides(csh, osh, what)?;
    let walk = Walk::<3>::new(osh, [&sa, &sb, &sc], [0, 0, 0]);
    let [ia, ib, ic] = walk.inner_strides();
    fill_par(numel(osh), |start, out: &mut [O]| {
        walk.runs(start, out.len(), |pos, len, [oa, ob, oc]| {
            let dst = &mut out[pos..pos + len];
            if ia == 1 && ib == 1 && ic == 1 {
                let (oa, ob, oc) = (oa as usize, ob as usize, oc as usize);
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = f(a[oa + j], b[ob + j], c[oc + j]);
                }
            } else {
                for (j, d) in dst.iter_mut().enumerate() {
                    let j = j as isize;
                    *d = f(a[(oa + j * ia) as usize], b[(ob + j * ib) as usize], c[(oc + j * ic) as usize]);
                }
            }
        })
    })
}
