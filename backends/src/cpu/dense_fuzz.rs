//! The dense kernels must reject bad shapes and attributes with an error, never panic: random
//! small shapes (zeros included), attributes and output specs, consistent or not.

use super::test_util::*;
use super::{conv, conv_transpose, matmul, norm, pool, softmax};
use dynaspa_runtime::graph::*;
use dynaspa_runtime::Tensor;

fn shape(rng: &mut Rng, rank: usize, max: usize) -> Vec<usize> {
    (0..rank).map(|_| rng.below(max + 1)).collect()
}

fn small(rng: &mut Rng, n: usize, max: usize) -> Vec<usize> {
    (0..n).map(|_| rng.below(max + 1)).collect()
}

fn window(rng: &mut Rng, sp: usize) -> Window {
    // Lengths are usually right, sometimes not; values include 0 (invalid stride/dilation).
    let len = |rng: &mut Rng, n: usize| if rng.below(8) == 0 { rng.below(4) } else { n };
    let (k, s, p, d) = (len(rng, sp), len(rng, sp), len(rng, 2 * sp), len(rng, sp));
    Window {
        kernel_shape: small(rng, k, 3),
        strides: small(rng, s, 3),
        pads: small(rng, p, 2),
        dilations: small(rng, d, 2),
        auto_pad: AutoPad::NotSet,
    }
}

fn tensor(rng: &mut Rng, rank: usize, max: usize) -> Tensor {
    let s = shape(rng, rank, max);
    rng.tensor(&s)
}

#[test]
fn kernels_never_panic_on_garbage() {
    let mut rng = Rng::new(2024);
    for case in 0..3000 {
        let rank = 1 + rng.below(5);
        let sp = rank.saturating_sub(2).max(1);
        let x = tensor(&mut rng, rank, 4);
        let w = tensor(&mut rng, rank, 3);
        let b = tensor(&mut rng, 1, 4);
        let out = spec(&shape(&mut rng, rank, 5));
        let ins = [Some(&x), Some(&w), Some(&b), Some(&x), Some(&b)];
        let cut = rng.below(6);
        let ins = &ins[..cut];
        let r = std::panic::catch_unwind(|| {
            let mut rng = Rng::new(case);
            let conv_p = Conv {
                window: window(&mut rng, sp),
                group: rng.below(3),
                fused_add: rng.below(2) == 0,
                activation: [None, Some(Activation::Relu)][rng.below(2)],
            };
            let _ = conv::conv(&conv_p, ins, &out);
            let ct = ConvTranspose { window: window(&mut rng, sp), group: rng.below(3), output_padding: vec![], output_shape: None };
            let _ = conv_transpose::conv_transpose(&ct, ins, &out);
            let pool_p = Pool { window: window(&mut rng, sp), ceil_mode: rng.below(2) == 0, count_include_pad: rng.below(2) == 0 };
            let _ = pool::max_pool(&pool_p, ins, &out);
            let _ = pool::average_pool(&pool_p, ins, &out);
            let _ = pool::global_average_pool(ins, &out);
            let _ = matmul::matmul(ins, &out);
            let _ = matmul::gemm(1.0, 0.5, rng.below(2) == 0, rng.below(2) == 0, ins, &out);
            let axis = rng.below(9) as i64 - 4;
            let _ = softmax::softmax(axis, rng.below(2) == 0, ins, &out);
            let _ = norm::batch_norm(1e-5, ins, &out);
            let _ = norm::layer_norm(axis, 1e-5, ins, &out);
            let _ = norm::instance_norm(1e-5, ins, &out);
            let _ = norm::group_norm(rng.below(4), 1e-5, rng.below(2) == 0, ins, &out);
        });
        assert!(r.is_ok(), "case {case}: x {:?} w {:?} b {:?} out {:?} inputs {cut}", x.shape(), w.shape(), b.shape(), out.shape);
    }
}
