//! A serde serializer that records the shape of a value instead of its figures: which fields a
//! struct (or a map with text keys) has, in order, and the kind of each value.

use std::fmt;

use serde::Serialize;
use serde::ser::{
    self, SerializeMap, SerializeSeq, SerializeStruct, SerializeTuple, SerializeTupleStruct,
};

/// The shape of a serialized value.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Int,
    Float,
    Bool,
    Str,
    /// A text value, kept as it is: a map key, or a value that becomes [`Shape::Str`].
    Text(String),
    /// `None` itself: the sample left an `Option` unset, so the inner type is unknown.
    Null,
    Optional(Box<Shape>),
    List(Box<Shape>),
    Tuple(Vec<Shape>),
    /// A struct, or a map with text keys (what `#[serde(flatten)]` makes): its fields in order.
    Record(Vec<(String, Shape)>),
}

impl Shape {
    /// As a value: text is a string, whatever it says.
    fn value(self) -> Shape {
        match self {
            Shape::Text(_) => Shape::Str,
            other => other,
        }
    }
}

/// Why a value's shape cannot be recorded.
#[derive(Debug)]
pub struct Unsupported(pub String);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsupported {}

impl From<fmt::Error> for Unsupported {
    fn from(e: fmt::Error) -> Self {
        Self(e.to_string())
    }
}

impl ser::Error for Unsupported {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self(msg.to_string())
    }
}

type Result<T> = std::result::Result<T, Unsupported>;

/// The shape of `value`.
pub fn shape_of<T: Serialize + ?Sized>(value: &T) -> Result<Shape> {
    Ok(value.serialize(Recorder)?.value())
}

fn unsupported<T>(what: &str) -> Result<T> {
    Err(Unsupported(format!(
        "{what} has no Python form in the generator"
    )))
}

/// The serializer: each value becomes its [`Shape`].
struct Recorder;

/// Collects the elements of a list or tuple.
#[derive(Default)]
struct Items {
    items: Vec<Shape>,
    tuple: bool,
}

impl Items {
    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.items.push(shape_of(value)?);
        Ok(())
    }

    fn finish(self) -> Result<Shape> {
        if self.tuple {
            return Ok(Shape::Tuple(self.items));
        }
        let mut items = self.items.into_iter();
        let Some(first) = items.next() else {
            return unsupported("an empty list (give the sample an element)");
        };
        if items.any(|s| s != first) {
            return unsupported("a list of elements of different shapes");
        }
        Ok(Shape::List(Box::new(first)))
    }
}

/// Collects the fields of a struct or map; a key given again keeps its place and takes the new
/// value, as a Python dict does.
#[derive(Default)]
struct Fields {
    fields: Vec<(String, Shape)>,
    key: Option<String>,
}

impl Fields {
    fn set(&mut self, key: String, value: Shape) {
        match self.fields.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.fields.push((key, value)),
        }
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<()> {
        self.set(key.to_owned(), shape_of(value)?);
        Ok(())
    }
}

impl ser::Serializer for Recorder {
    type Ok = Shape;
    type Error = Unsupported;
    type SerializeSeq = Items;
    type SerializeTuple = Items;
    type SerializeTupleStruct = Items;
    type SerializeTupleVariant = ser::Impossible<Shape, Unsupported>;
    type SerializeMap = Fields;
    type SerializeStruct = Fields;
    type SerializeStructVariant = ser::Impossible<Shape, Unsupported>;

    fn serialize_bool(self, _: bool) -> Result<Shape> {
        Ok(Shape::Bool)
    }
    fn serialize_i8(self, _: i8) -> Result<Shape> {
        Ok(Shape::Int)
    }
    fn serialize_i16(self, _: i16) -> Result<Shape> {
        Ok(Shape::Int)
    }
    fn serialize_i32(self, _: i32) -> Result<Shape> {
        Ok(Shape::Int)
    }
    fn serialize_i64(self, _: i64) -> Result<Shape> {
        Ok(Shape::Int)
    }
    fn serialize_u8(self, _: u8) -> Result<Shape> {
        Ok(Shape::Int)
    }
    fn serialize_u16(self, _: u16) -> Result<Shape> {
        Ok(Shape::Int)
    }
    fn serialize_u32(self, _: u32) -> Result<Shape> {
        Ok(Shape::Int)
    }
    fn serialize_u64(self, _: u64) -> Result<Shape> {
        Ok(Shape::Int)
    }
    fn serialize_f32(self, _: f32) -> Result<Shape> {
        Ok(Shape::Float)
    }
    fn serialize_f64(self, _: f64) -> Result<Shape> {
        Ok(Shape::Float)
    }
    fn serialize_char(self, v: char) -> Result<Shape> {
        Ok(Shape::Text(v.to_string()))
    }
    fn serialize_str(self, v: &str) -> Result<Shape> {
        Ok(Shape::Text(v.to_owned()))
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<Shape> {
        unsupported("bytes")
    }
    fn serialize_none(self) -> Result<Shape> {
        Ok(Shape::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Shape> {
        Ok(Shape::Optional(Box::new(shape_of(value)?)))
    }
    fn serialize_unit(self) -> Result<Shape> {
        unsupported("()")
    }
    fn serialize_unit_struct(self, name: &'static str) -> Result<Shape> {
        unsupported(name)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<Shape> {
        Ok(Shape::Text(variant.to_owned()))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<Shape> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<Shape> {
        unsupported(name)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Items> {
        Ok(Items::default())
    }
    fn serialize_tuple(self, _: usize) -> Result<Items> {
        Ok(Items {
            items: Vec::new(),
            tuple: true,
        })
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Items> {
        self.serialize_tuple(len)
    }
    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        unsupported(name)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Fields> {
        Ok(Fields::default())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Fields> {
        Ok(Fields::default())
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant> {
        unsupported(name)
    }
}

impl SerializeSeq for Items {
    type Ok = Shape;
    type Error = Unsupported;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.push(value)
    }
    fn end(self) -> Result<Shape> {
        self.finish()
    }
}

impl SerializeTuple for Items {
    type Ok = Shape;
    type Error = Unsupported;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.push(value)
    }
    fn end(self) -> Result<Shape> {
        self.finish()
    }
}

impl SerializeTupleStruct for Items {
    type Ok = Shape;
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.push(value)
    }
    fn end(self) -> Result<Shape> {
        self.finish()
    }
}

impl SerializeMap for Fields {
    type Ok = Shape;
    type Error = Unsupported;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        match key.serialize(Recorder)? {
            Shape::Text(k) => {
                self.key = Some(k);
                Ok(())
            }
            _ => unsupported("a map key that is not text"),
        }
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let Some(key) = self.key.take() else {
            return unsupported("a map value without its key");
        };
        self.field(&key, value)
    }
    fn end(self) -> Result<Shape> {
        Ok(Shape::Record(self.fields))
    }
}

impl SerializeStruct for Fields {
    type Ok = Shape;
    type Error = Unsupported;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.field(key, value)
    }
    fn end(self) -> Result<Shape> {
        Ok(Shape::Record(self.fields))
    }
}
