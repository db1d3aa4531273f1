//! Typed access to a node's attributes, with errors that name the node, op and attribute.

use super::proto::onnx::{attribute_proto::AttributeType, AttributeProto, NodeProto};
use super::tensor_proto;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

pub struct Attrs<'a> {
    node: &'a NodeProto,
    name: String,
}

impl<'a> Attrs<'a> {
    pub fn new(node: &'a NodeProto, name: &str) -> Self {
        Attrs { node, name: name.to_string() }
    }
    pub fn err(&self, msg: impl Into<String>) -> Error {
        Error::node(&self.name, self.node.op_type(), msg)
    }
    fn get(&self, key: &str) -> Option<&'a AttributeProto> {
        self.node.attribute.iter().find(|a| a.name() == key)
    }
    fn typed(&self, key: &str, want: AttributeType) -> Result<Option<&'a AttributeProto>> {
        match self.get(key) {
            None => Ok(None),
            Some(a) => {
                let t = a.type_.map(|t| t.enum_value_or(AttributeType::UNDEFINED));
                // Writers that omit `type` still fill the right field; accept those.
                if t.is_some() && t != Some(want) && t != Some(AttributeType::UNDEFINED) {
                    return Err(self.err(format!("attribute '{key}' should be {want:?}, is {:?}", t.unwrap())));
                }
                Ok(Some(a))
            }
        }
    }
    pub fn int(&self, key: &str) -> Result<Option<i64>> {
        Ok(self.typed(key, AttributeType::INT)?.map(|a| a.i()))
    }
    pub fn int_or(&self, key: &str, d: i64) -> Result<i64> {
        Ok(self.int(key)?.unwrap_or(d))
    }
    pub fn bool_or(&self, key: &str, d: bool) -> Result<bool> {
        match self.int(key)? {
            None => Ok(d),
            Some(0) => Ok(false),
            Some(1) => Ok(true),
            Some(v) => Err(self.err(format!("attribute '{key}' must be 0 or 1, is {v}"))),
        }
    }
    pub fn float(&self, key: &str) -> Result<Option<f32>> {
        Ok(self.typed(key, AttributeType::FLOAT)?.map(|a| a.f()))
    }
    pub fn float_or(&self, key: &str, d: f32) -> Result<f32> {
        Ok(self.float(key)?.unwrap_or(d))
    }
    pub fn ints(&self, key: &str) -> Result<Option<Vec<i64>>> {
        Ok(self.typed(key, AttributeType::INTS)?.map(|a| a.ints.clone()))
    }
    pub fn floats(&self, key: &str) -> Result<Option<Vec<f32>>> {
        Ok(self.typed(key, AttributeType::FLOATS)?.map(|a| a.floats.clone()))
    }
    pub fn string(&self, key: &str) -> Result<Option<String>> {
        match self.typed(key, AttributeType::STRING)? {
            None => Ok(None),
            Some(a) => String::from_utf8(a.s().to_vec()).map(Some).map_err(|_| self.err(format!("attribute '{key}' is not valid UTF-8"))),
        }
    }
    pub fn string_or(&self, key: &str, d: &str) -> Result<String> {
        Ok(self.string(key)?.unwrap_or_else(|| d.to_string()))
    }
    pub fn tensor(&self, key: &str) -> Result<Option<Tensor>> {
        match self.typed(key, AttributeType::TENSOR)? {
            None => Ok(None),
            Some(a) => {
                let what = format!("node '{}' attribute '{key}'", self.name);
                tensor_proto::decode(&a.t, &what).map(Some)
            }
        }
    }
    /// Non-negative integers (kernel sizes, strides...).
    pub fn usizes(&self, key: &str) -> Result<Option<Vec<usize>>> {
        match self.ints(key)? {
            None => Ok(None),
            Some(v) => v
                .iter()
                .map(|&x| usize::try_from(x).map_err(|_| self.err(format!("attribute '{key}' has negative value {x}"))))
                .collect::<Result<Vec<_>>>()
                .map(Some),
        }
    }
    /// Every attribute name not in `known`; unknown attributes mean semantics we would miss.
    pub fn check_known(&self, known: &[&str]) -> Result<()> {
        for a in &self.node.attribute {
            if !known.contains(&a.name()) {
                return Err(self.err(format!("attribute '{}' is not supported", a.name())));
            }
        }
        Ok(())
    }
}
