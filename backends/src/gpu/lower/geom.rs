//! The spatial geometry of a windowed op (conv, pool) padded to 3 dims, which the dense conv,
//! the vendor conv and the sparse conv lowerings all read.

use super::ctx::unsupported;
use dynaspa_runtime::graph::Window;
use dynaspa_runtime::Result;

/// Spatial geometry padded to 3 dims: (input, output, kernel, strides, begin pads, dilations, end pads).
pub(crate) struct Geom3 {
    pub input: [usize; 3],
    pub output: [usize; 3],
    pub kernel: [usize; 3],
    pub stride: [usize; 3],
    pub pad: [usize; 3],
    pub dil: [usize; 3],
    pub pad_end: [usize; 3],
}

/// The geometry of `op` taking `xs` to `os` with `kernel` taps under window `w`, or why the
/// kernels do not take it (other than 1 to 3 spatial dims, or attributes of another rank).
pub(crate) fn geom(op: &str, w: &Window, xs: &[usize], os: &[usize], kernel: &[usize]) -> Result<Geom3> {
    let sp = xs.len().saturating_sub(2);
    if !(1..=3).contains(&sp) || os.len() != xs.len() || kernel.len() != sp {
        return unsupported(format!("{op} of {xs:?} into {os:?} (other than 1 to 3 spatial dims)"));
    }
    let per = |v: &[usize], def: usize, what: &str| -> Result<Vec<usize>> {
        match v.len() {
            0 => Ok(vec![def; sp]),
            l if l == sp => Ok(v.to_vec()),
            _ => unsupported(format!("{op} with {what} {v:?} for {sp} spatial dims")),
        }
    };
    let stride = per(&w.strides, 1, "strides")?;
    let dil = per(&w.dilations, 1, "dilations")?;
    let pads = if w.pads.is_empty() { vec![0; 2 * sp] } else { w.pads.clone() };
    if pads.len() != 2 * sp {
        return unsupported(format!("{op} with pads {pads:?} for {sp} spatial dims"));
    }
    let lift = |v: &[usize], fill: usize| -> [usize; 3] {
        let mut o = [fill; 3];
        o[3 - sp..].copy_from_slice(v);
        o
    };
    Ok(Geom3 {
        input: lift(&xs[2..], 1),
        output: lift(&os[2..], 1),
        kernel: lift(kernel, 1),
        stride: lift(&stride, 1),
        pad: lift(&pads[..sp], 0),
        dil: lift(&dil, 1),
        pad_end: lift(&pads[sp..], 0),
    })
}
