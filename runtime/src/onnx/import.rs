//! ModelProto -> Graph: values, initializers, nodes in topological order, static input shapes.
//! Shapes of intermediate values are filled in afterwards by `graph::shape`.

use super::external::ExternalData;
use super::proto::onnx::{type_proto, ModelProto, ValueInfoProto};
use super::{ops, tensor_proto};
use crate::error::{Error, Result};
use crate::graph::{Graph, Node, Op, Value, ValueId};
use crate::tensor::DType;
use protobuf::Message;
use std::collections::HashMap;
use std::sync::Arc;

/// Opsets of the default domain we accept. 22–25 only add element types (bfloat16, float8,
/// int4, float4...) to the ops we support, which we do not take, so their semantics are 21's.
pub const MIN_OPSET: i64 = 11;
pub const MAX_OPSET: i64 = 25;

/// Protobuf nesting deeper than this is refused (crafted files otherwise overflow the stack).
const RECURSION_LIMIT: u32 = 64;

#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Value for a symbolic first (batch) dimension of a graph input.
    pub batch: usize,
    /// Values for other symbolic dimensions, by name.
    pub dims: HashMap<String, usize>,
    /// Graph inputs frozen to these values: they become constants, so shape-deciding inputs
    /// (a Reshape's shape, Resize's sizes...) fed from outside still give static shapes.
    pub constants: HashMap<String, crate::tensor::Tensor>,
    /// The folder that tensors stored as external data are read from (their locations are
    /// relative to it and must stay inside it). Loading from a path sets it to the model's
    /// folder; a model given as bytes without it cannot have external data.
    pub model_dir: Option<std::path::PathBuf>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { batch: 1, dims: HashMap::new(), constants: HashMap::new(), model_dir: None }
    }
}

pub fn parse_model(bytes: &[u8]) -> Result<ModelProto> {
    if bytes.is_empty() {
        return Err(Error::Decode("the file is empty".into()));
    }
    let mut input = protobuf::CodedInputStream::from_bytes(bytes);
    input.set_recursion_limit(RECURSION_LIMIT);
    let mut m = ModelProto::new();
    m.merge_from(&mut input).and_then(|_| input.check_eof()).map_err(|e| Error::Decode(format!("not a valid ONNX protobuf ({e})")))?;
    if !m.graph.is_some() {
        return Err(Error::Decode("the file parses but holds no graph: not an ONNX model".into()));
    }
    Ok(m)
}

/// The opset the model declares for the default domain.
pub fn default_opset(m: &ModelProto) -> Result<i64> {
    let v = m
        .opset_import
        .iter()
        .find(|o| matches!(o.domain(), "" | "ai.onnx"))
        .map(|o| o.version())
        .ok_or_else(|| Error::InvalidModel("no opset_import for the default ONNX domain".into()))?;
    if !(MIN_OPSET..=MAX_OPSET).contains(&v) {
        return Err(Error::Unsupported(vec![format!(
            "the model uses opset {v} of the default domain; supported are {MIN_OPSET} to {MAX_OPSET}"
        )]));
    }
    Ok(v)
}

struct Builder {
    values: Vec<Value>,
    by_name: HashMap<String, ValueId>,
}

impl Builder {
    fn add(&mut self, v: Value) -> ValueId {
        let id = self.values.len();
        self.by_name.insert(v.name.clone(), id);
        self.values.push(v);
        id
    }
}

/// Builds the graph; every unsupported node is listed in one `Error::Unsupported`.
pub fn import(m: &ModelProto, opts: &LoadOptions) -> Result<Graph> {
    let opset = default_opset(m)?;
    let g = &m.graph;
    let mut b = Builder { values: Vec::new(), by_name: HashMap::new() };
    let mut external = ExternalData::new(opts.model_dir.as_deref());
    for (i, init) in g.initializer.iter().enumerate() {
        let name = init.name().to_string();
        if name.is_empty() {
            return Err(Error::InvalidModel(format!("initializer #{i} has no name")));
        }
        let t = tensor_proto::decode_in(init, &format!("initializer '{name}'"), &mut external)?;
        b.add(Value { name, dtype: t.dtype(), shape: t.shape().to_vec(), constant: Some(Arc::new(t)) });
    }
    if !g.sparse_initializer.is_empty() {
        return Err(Error::Unsupported(vec!["sparse initializers".into()]));
    }
    let mut inputs = Vec::new();
    for vi in &g.input {
        if b.by_name.contains_key(vi.name()) {
            continue; // an initializer listed as input (IR < 4 style): it stays constant
        }
        if let Some(t) = opts.constants.get(vi.name()) {
            let (dtype, _) = input_type(vi, opts)?;
            if dtype != t.dtype() {
                return Err(Error::Input { name: vi.name().into(), msg: format!("frozen value is {}, input is {dtype}", t.dtype()) });
            }
            let v = Value { name: vi.name().into(), dtype, shape: t.shape().to_vec(), constant: Some(Arc::new(t.clone())) };
            b.add(v);
            continue;
        }
        let (dtype, shape) = input_type(vi, opts)?;
        inputs.push(b.add(Value { name: vi.name().to_string(), dtype, shape, constant: None }));
    }

    let mut unsupported = Vec::new();
    let mut nodes = Vec::new();
    for (i, n) in g.node.iter().enumerate() {
        let name = if n.name().is_empty() { format!("{}_{i}", n.op_type()) } else { n.name().to_string() };
        let domain = n.domain();
        let describe = || format!("node '{name}' (op {}, domain '{}', opset {opset})", n.op_type(), domain);
        if !matches!(domain, "" | "ai.onnx") {
            unsupported.push(format!("{}: custom domain", describe()));
            continue;
        }
        match ops::parse(n, &name, opset) {
            Ok(Some(op)) => nodes.push((name, op, n)),
            Ok(None) => unsupported.push(format!("{}: op not supported", describe())),
            Err(e) => unsupported.push(format!("{}: {e}", describe())),
        }
    }
    if !unsupported.is_empty() {
        return Err(Error::Unsupported(unsupported));
    }

    let mut ir_nodes = Vec::with_capacity(nodes.len());
    for (name, op, n) in &nodes {
        let mut outs = Vec::new();
        for o in &n.output {
            if o.is_empty() {
                continue; // optional output not requested
            }
            if b.by_name.contains_key(o) {
                return Err(Error::InvalidModel(format!("node '{name}': output '{o}' is produced twice")));
            }
            outs.push(b.add(Value { name: o.clone(), dtype: DType::F32, shape: vec![], constant: None }));
        }
        ir_nodes.push(Node { name: name.clone(), op: op.clone(), inputs: Vec::new(), outputs: outs, sparse: None });
    }
    // Inputs resolve after every output is known, so out-of-order node lists still import.
    for (node, (name, op, n)) in ir_nodes.iter_mut().zip(&nodes) {
        for i in &n.input {
            if i.is_empty() {
                node.inputs.push(None);
                continue;
            }
            let id = b.by_name.get(i).copied().ok_or_else(|| {
                Error::InvalidModel(format!(
                    "node '{name}' ({}): input '{i}' is not produced by any node, initializer or graph input",
                    op.name()
                ))
            })?;
            node.inputs.push(Some(id));
        }
        if let Op::Constant { .. } = op {
            if !node.inputs.is_empty() {
                return Err(Error::node(name, "Constant", "Constant takes no inputs"));
            }
        }
    }
    let outputs = g
        .output
        .iter()
        .map(|o| {
            b.by_name.get(o.name()).copied().ok_or_else(|| Error::InvalidModel(format!("graph output '{}' is never produced", o.name())))
        })
        .collect::<Result<Vec<_>>>()?;
    let nodes = topo_sort(ir_nodes, b.values.len())?;
    let onnx_parameters = b.values.iter().filter_map(|v| v.constant.as_ref()).filter(|t| t.dtype().is_float()).map(|t| t.len()).sum();
    Ok(Graph {
        name: g.name().to_string(),
        values: b.values,
        nodes,
        inputs,
        outputs,
        opset,
        metadata: m.metadata_props.iter().map(|p| (p.key().to_string(), p.value().to_string())).collect(),
        onnx_parameters,
        stored_half: stores_half(g),
    })
}

/// Whether any initializer, graph input or output, or Cast of `g` is a half-precision float.
fn stores_half(g: &super::proto::onnx::GraphProto) -> bool {
    let elem = |vi: &ValueInfoProto| match &vi.type_.value {
        Some(type_proto::Value::TensorType(tt)) => tensor_proto::is_half(tt.elem_type()),
        _ => false,
    };
    let cast_to_half = |n: &super::proto::onnx::NodeProto| {
        n.op_type() == "Cast" && n.attribute.iter().any(|a| a.name() == "to" && tensor_proto::is_half(a.i() as i32))
    };
    g.initializer.iter().any(|t| tensor_proto::is_half(t.data_type()))
        || g.input.iter().chain(&g.output).any(elem)
        || g.node.iter().any(cast_to_half)
}

fn input_type(vi: &ValueInfoProto, opts: &LoadOptions) -> Result<(DType, Vec<usize>)> {
    let name = vi.name();
    let err = |msg: String| Error::Input { name: name.to_string(), msg };
    let Some(type_proto::Value::TensorType(tt)) = &vi.type_.value else {
        return Err(err("only tensor inputs are supported".into()));
    };
    let code = tt.elem_type();
    let dtype = tensor_proto::widened(code).ok_or_else(|| err(format!("element type {} is not supported", DType::onnx_name(code))))?;
    if !tt.shape.is_some() {
        return Err(err("the model gives no shape for this input".into()));
    }
    let mut shape = Vec::new();
    for (i, d) in tt.shape.dim.iter().enumerate() {
        use super::proto::onnx::tensor_shape_proto::dimension::Value as D;
        let v = match &d.value {
            Some(D::DimValue(v)) if *v >= 0 => *v as usize,
            Some(D::DimValue(v)) => return Err(err(format!("dimension {i} is negative ({v})"))),
            Some(D::DimParam(p)) if opts.dims.contains_key(p) => opts.dims[p],
            _ if i == 0 => opts.batch,
            Some(D::DimParam(p)) => return Err(err(format!("dimension {i} is symbolic ('{p}'); give its size as a load option"))),
            None => return Err(err(format!("dimension {i} has no size; give it as a load option"))),
        };
        shape.push(v);
    }
    Ok((dtype, shape))
}

/// Kahn's algorithm; ONNX requires topological order but not every writer honours it.
fn topo_sort(nodes: Vec<Node>, n_values: usize) -> Result<Vec<Node>> {
    let mut producer = vec![None; n_values];
    for (i, n) in nodes.iter().enumerate() {
        for &o in &n.outputs {
            producer[o] = Some(i);
        }
    }
    let mut indeg = vec![0usize; nodes.len()];
    let mut users = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for v in n.inputs.iter().flatten() {
            if let Some(p) = producer[*v] {
                indeg[i] += 1;
                users[p].push(i);
            }
        }
    }
    let mut ready: std::collections::VecDeque<usize> = (0..nodes.len()).filter(|&i| indeg[i] == 0).collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(i) = ready.pop_front() {
        order.push(i);
        for &u in &users[i] {
            indeg[u] -= 1;
            if indeg[u] == 0 {
                ready.push_back(u);
            }
        }
    }
    if order.len() != nodes.len() {
        let stuck: Vec<_> = (0..nodes.len()).filter(|i| !order.contains(i)).map(|i| nodes[i].name.clone()).take(5).collect();
        return Err(Error::InvalidModel(format!("the graph has a cycle through nodes {stuck:?}")));
    }
    let mut slots: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    Ok(order.into_iter().map(|i| slots[i].take().unwrap()).collect())
}

/// Names of a model's runtime inputs (graph inputs that are not initializers), in order.
pub fn input_names(bytes: &[u8]) -> Result<Vec<String>> {
    let m = parse_model(bytes)?;
    let inits: std::collections::HashSet<&str> = m.graph.initializer.iter().map(|t| t.name()).collect();
    Ok(m.graph.input.iter().map(|i| i.name()).filter(|n| !inits.contains(n)).map(String::from).collect())
}
