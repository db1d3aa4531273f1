//! Builds small ONNX models in memory for tests that need a specific (often broken) model.

use dynaspa::runtime::onnx::proto::onnx::{
    tensor_shape_proto, type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto,
    TypeProto, ValueInfoProto,
};
use protobuf::Message;

pub fn value_info(name: &str, elem: i32, shape: &[i64]) -> ValueInfoProto {
    let mut s = TensorShapeProto::new();
    for &d in shape {
        let mut dim = tensor_shape_proto::Dimension::new();
        dim.set_dim_value(d);
        s.dim.push(dim);
    }
    let mut t = type_proto::Tensor::new();
    t.set_elem_type(elem);
    t.shape = Some(s).into();
    let mut tp = TypeProto::new();
    tp.value = Some(type_proto::Value::TensorType(t));
    let mut v = ValueInfoProto::new();
    v.set_name(name.into());
    v.type_ = Some(tp).into();
    v
}

pub fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    let mut n = NodeProto::new();
    n.set_op_type(op.into());
    n.set_name(name.into());
    n.input = inputs.iter().map(|s| s.to_string()).collect();
    n.output = outputs.iter().map(|s| s.to_string()).collect();
    n
}

pub fn int_attr(name: &str, v: i64) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.set_name(name.into());
    a.set_i(v);
    a.set_type(dynaspa::runtime::onnx::proto::onnx::attribute_proto::AttributeType::INT);
    a
}

pub fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.set_name(name.into());
    a.ints = v.to_vec();
    a.set_type(dynaspa::runtime::onnx::proto::onnx::attribute_proto::AttributeType::INTS);
    a
}

pub fn float_attr(name: &str, v: f32) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.set_name(name.into());
    a.set_f(v);
    a.set_type(dynaspa::runtime::onnx::proto::onnx::attribute_proto::AttributeType::FLOAT);
    a
}

pub fn str_attr(name: &str, v: &str) -> AttributeProto {
    let mut a = AttributeProto::new();
    a.set_name(name.into());
    a.set_s(v.as_bytes().to_vec());
    a.set_type(dynaspa::runtime::onnx::proto::onnx::attribute_proto::AttributeType::STRING);
    a
}

pub fn with_attrs(mut n: NodeProto, attrs: Vec<AttributeProto>) -> NodeProto {
    n.attribute = attrs;
    n
}

pub fn f32_init(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    let mut t = TensorProto::new();
    t.set_name(name.into());
    t.dims = dims.to_vec();
    t.set_data_type(1);
    t.float_data = data.to_vec();
    t
}

pub fn i64_init(name: &str, dims: &[i64], data: &[i64]) -> TensorProto {
    let mut t = TensorProto::new();
    t.set_name(name.into());
    t.dims = dims.to_vec();
    t.set_data_type(7);
    t.int64_data = data.to_vec();
    t
}

pub fn model(nodes: Vec<NodeProto>, inputs: Vec<ValueInfoProto>, outputs: Vec<ValueInfoProto>, inits: Vec<TensorProto>) -> Vec<u8> {
    model_opset(17, nodes, inputs, outputs, inits)
}

pub fn model_opset(
    opset: i64,
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
) -> Vec<u8> {
    let mut g = GraphProto::new();
    g.set_name("test".into());
    g.node = nodes;
    g.input = inputs;
    g.output = outputs;
    g.initializer = inits;
    let mut m = ModelProto::new();
    m.set_ir_version(8);
    let mut o = OperatorSetIdProto::new();
    o.set_domain(String::new());
    o.set_version(opset);
    m.opset_import.push(o);
    m.graph = Some(g).into();
    m.write_to_bytes().expect("serialises")
}

/// A byte string of `depth` nested messages (graph -> node -> attribute -> graph -> ...),
/// the shape of a file crafted to overflow a recursive decoder's stack.
pub fn deeply_nested(depth: usize) -> Vec<u8> {
    fn wrap(field: u32, inner: Vec<u8>) -> Vec<u8> {
        let mut out = Vec::with_capacity(inner.len() + 12);
        let varint = |mut v: u64, out: &mut Vec<u8>| loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        };
        varint(((field << 3) | 2) as u64, &mut out);
        varint(inner.len() as u64, &mut out);
        out.extend_from_slice(&inner);
        out
    }
    let mut b = Vec::new();
    for _ in 0..depth {
        b = wrap(6, b); // AttributeProto.g
        b = wrap(5, b); // NodeProto.attribute
        b = wrap(1, b); // GraphProto.node
    }
    wrap(7, b) // ModelProto.graph
}
