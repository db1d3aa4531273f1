//! Random, mostly malformed inputs to every op of the elementwise/movement/reduce/resize/pad
//! kernels: errors are fine, panics are not. Overflow checks are on in test builds, so
//! arithmetic on hostile values (INT64_MIN starts, huge pads) is covered too.

use super::*;
use dynaspa_runtime::graph::*;
use std::sync::Arc;

const DTYPES: [DType; 7] = [DType::F32, DType::F64, DType::I64, DType::I32, DType::I8, DType::U8, DType::Bool];

fn int_value(rng: &mut Rng) -> i64 {
    match rng.below(10) {
        0 => i64::MAX,
        1 => i64::MIN,
        2 => 1 << 40,
        _ => rng.below(9) as i64 - 4,
    }
}

fn tensor(rng: &mut Rng) -> Tensor {
    let rank = rng.below(5) as usize;
    let shape: Vec<usize> = (0..rank).map(|_| rng.below(4) as usize).collect();
    let n = count(&shape);
    let dt = DTYPES[rng.below(7) as usize];
    let f = |rng: &mut Rng| match rng.below(12) {
        0 => f64::NAN,
        1 => f64::INFINITY,
        2 => -1e30,
        _ => rng.f32(-3.0, 3.0) as f64,
    };
    let d = match dt {
        DType::F32 => TensorData::F32((0..n).map(|_| f(rng) as f32).collect()),
        DType::F64 => TensorData::F64((0..n).map(|_| f(rng)).collect()),
        DType::I64 => TensorData::I64((0..n).map(|_| int_value(rng)).collect()),
        DType::I32 => TensorData::I32((0..n).map(|_| int_value(rng) as i32).collect()),
        DType::I8 => TensorData::I8((0..n).map(|_| int_value(rng) as i8).collect()),
        DType::U8 => TensorData::U8((0..n).map(|_| int_value(rng) as u8).collect()),
        DType::Bool => TensorData::Bool((0..n).map(|_| rng.below(2) == 1).collect()),
    };
    data(&shape, d)
}

fn ops(rng: &mut Rng) -> Op {
    let i = |rng: &mut Rng| rng.below(9) as i64 - 4;
    let unary = [
        UnaryKind::Relu,
        UnaryKind::LeakyRelu(0.1),
        UnaryKind::Sigmoid,
        UnaryKind::HardSigmoid(0.2, 0.5),
        UnaryKind::HardSwish,
        UnaryKind::Tanh,
        UnaryKind::Erf,
        UnaryKind::Gelu(false),
        UnaryKind::Gelu(true),
        UnaryKind::Exp,
        UnaryKind::Sqrt,
        UnaryKind::Neg,
        UnaryKind::Abs,
        UnaryKind::Not,
        UnaryKind::Sign,
        UnaryKind::Round,
        UnaryKind::Floor,
        UnaryKind::Ceil,
        UnaryKind::Reciprocal,
        UnaryKind::Log,
        UnaryKind::Softplus,
        UnaryKind::Sin,
        UnaryKind::Cos,
    ];
    let binary = [
        BinaryKind::Add,
        BinaryKind::Sub,
        BinaryKind::Mul,
        BinaryKind::Div,
        BinaryKind::Pow,
        BinaryKind::Greater,
        BinaryKind::Less,
        BinaryKind::Equal,
        BinaryKind::And,
        BinaryKind::GreaterOrEqual,
        BinaryKind::LessOrEqual,
        BinaryKind::Or,
        BinaryKind::Xor,
        BinaryKind::Min,
        BinaryKind::Max,
    ];
    let pick = |rng: &mut Rng, n: u64| rng.below(n) as usize;
    match rng.below(20) {
        0 => Op::Unary(unary[pick(rng, unary.len() as u64)]),
        1 => Op::Clip,
        2 => Op::Binary(binary[pick(rng, binary.len() as u64)]),
        3 => Op::Cast { to: DTYPES[pick(rng, 7)] },
        4 => Op::Where,
        5 => Op::Reshape { allowzero: false },
        6 => Op::Transpose { perm: (0..rng.below(5)).map(|_| rng.below(5) as usize).collect() },
        7 => Op::Concat { axis: i(rng) },
        8 => Op::Slice,
        9 => Op::Split { axis: i(rng), split: None, num_outputs: None },
        10 => Op::Gather { axis: i(rng) },
        11 => Op::Expand,
        12 => Op::Shape { start: int_value(rng), end: if rng.below(2) == 0 { None } else { Some(int_value(rng)) } },
        13 => Op::ConstantOfShape { value: Arc::new(tensor(rng)) },
        14 => Op::Reduce(Reduce {
            kind: [ReduceKind::Mean, ReduceKind::Sum, ReduceKind::Max][pick(rng, 3)],
            axes: if rng.below(2) == 0 { None } else { Some((0..rng.below(3)).map(|_| i(rng)).collect()) },
            keepdims: rng.below(2) == 0,
            noop_with_empty_axes: rng.below(2) == 0,
        }),
        15 => Op::CumSum { exclusive: rng.below(2) == 0, reverse: rng.below(2) == 0 },
        16 | 17 => Op::Resize(Resize {
            mode: if rng.below(2) == 0 { ResizeMode::Nearest } else { ResizeMode::Linear },
            coord: [
                CoordTransform::HalfPixel,
                CoordTransform::HalfPixelSymmetric,
                CoordTransform::PytorchHalfPixel,
                CoordTransform::AlignCorners,
                CoordTransform::Asymmetric,
                CoordTransform::TfCropAndResize,
            ][pick(rng, 6)],
            nearest: [NearestMode::RoundPreferFloor, NearestMode::RoundPreferCeil, NearestMode::Floor, NearestMode::Ceil][pick(rng, 4)],
            exclude_outside: rng.below(2) == 0,
            extrapolation_value: 1.5,
            antialias: rng.below(2) == 0,
            axes: if rng.below(2) == 0 { None } else { Some((0..rng.below(3)).map(|_| i(rng)).collect()) },
            keep_aspect: [KeepAspect::Stretch, KeepAspect::NotLarger, KeepAspect::NotSmaller][pick(rng, 3)],
        }),
        _ => Op::Pad { mode: [PadMode::Constant, PadMode::Reflect, PadMode::Edge, PadMode::Wrap][pick(rng, 4)] },
    }
}

/// The output a kernel says it computed, from its "computed DTYPE [shape] but ..." error.
fn computed_spec(msg: &str) -> Option<TensorSpec> {
    let rest = &msg[msg.find("computed ")? + 9..];
    let (dt, rest) = rest.split_once(' ')?;
    let dims = &rest[rest.find('[')? + 1..rest.find(']')?];
    let shape = dims.split(',').filter(|s| !s.trim().is_empty()).map(|s| s.trim().parse().ok()).collect::<Option<Vec<usize>>>()?;
    let dtype = *DTYPES.iter().find(|d| d.to_string() == dt)?;
    Some(TensorSpec { dtype, shape })
}

#[test]
fn hostile_inputs_never_panic() {
    let mut rng = Rng::new(1234);
    let mut reached_kernel = 0;
    for iter in 0..30_000 {
        let op = ops(&mut rng);
        let ins: Vec<Option<Tensor>> = (0..rng.below(6)).map(|_| if rng.below(8) == 0 { None } else { Some(tensor(&mut rng)) }).collect();
        let refs: Vec<Option<&Tensor>> = ins.iter().map(|t| t.as_ref()).collect();
        let first = ins.iter().flatten().next();
        let n_out = if matches!(op, Op::Split { .. }) { 1 + rng.below(3) as usize } else { 1 };
        let outs: Vec<TensorSpec> = (0..n_out)
            .map(|_| match (rng.below(2), first) {
                (0, Some(t)) => TensorSpec { dtype: t.dtype(), shape: t.shape().to_vec() },
                _ => TensorSpec { dtype: DTYPES[rng.below(7) as usize], shape: (0..rng.below(4)).map(|_| rng.below(4) as usize).collect() },
            })
            .collect();
        let run = |outs: &[TensorSpec]| std::panic::catch_unwind(|| crate::cpu::eval_op(&op, &refs, outs));
        let res = run(&outs).unwrap_or_else(|_| panic!("iteration {iter}: {op:?} panicked on {ins:?} -> {outs:?}"));
        // Retry with the output the kernel computed, to get past the declared-output check.
        if let Err(e) = &res {
            if let Some(spec) = computed_spec(&e.to_string()).filter(|_| n_out == 1) {
                let again = run(std::slice::from_ref(&spec));
                let r = again.unwrap_or_else(|_| panic!("iteration {iter}: {op:?} panicked on {ins:?} -> {spec:?}"));
                reached_kernel += r.is_ok() as usize;
            }
        } else {
            reached_kernel += 1;
        }
    }
    assert!(reached_kernel > 2000, "only {reached_kernel} calls got through validation");
}
