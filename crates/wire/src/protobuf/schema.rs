//! The message table: for every Kubernetes protobuf message, its fields'
//! tags, JSON names and types. `schema.txt` is derived from the `k8s-pb`
//! crate's prost types and `k8s-openapi`'s JSON names by
//! `tests/protobuf_schema.rs`, which also checks it stays current.

use std::collections::HashMap;
use std::sync::OnceLock;

const SCHEMA: &str = include_str!("schema.txt");
/// Kubernetes 1.37 fields and messages k8s-pb does not have yet.
const SCHEMA_1_37: &str = include_str!("schema_1_37.txt");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cardinality {
    One,
    List,
    /// `map<string, V>`: repeated entries with the key in field 1, the value in 2.
    Map,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    String,
    Bytes,
    Int32,
    Int64,
    Bool,
    Double,
    Float,
    Message,
}

#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub tag: u32,
    pub json: &'static str,
    pub card: Cardinality,
    pub ty: Type,
    /// The message type's full name when `ty` is `Message`.
    pub message: &'static str,
    /// Go embeds this message in its parent (`json:",inline"`): in JSON its
    /// fields are the parent's own (a Volume's source, the
    /// `LocalObjectReference` of a ConfigMap reference, a Probe's handler).
    /// Always `One` and a `Message`.
    pub inline: bool,
}

#[derive(Debug, Default)]
pub struct Message {
    /// In tag order.
    pub fields: Vec<Field>,
    by_tag: HashMap<u32, usize>,
}

impl Message {
    pub fn by_tag(&self, tag: u32) -> Option<&Field> {
        self.by_tag.get(&tag).map(|&i| &self.fields[i])
    }
}

#[derive(Debug, Default)]
pub struct Schema {
    messages: HashMap<&'static str, Message>,
    /// apiVersion (`apps/v1`) → the module holding its messages (`api.apps.v1`).
    modules: HashMap<&'static str, &'static str>,
}

/// Where kinds every group shares (Status, DeleteOptions, List, WatchEvent) live.
const META_V1: &str = "apimachinery.pkg.apis.meta.v1";

impl Schema {
    pub fn get() -> &'static Schema {
        static SCHEMA_TABLE: OnceLock<Schema> = OnceLock::new();
        SCHEMA_TABLE.get_or_init(|| {
            let mut schema = Schema::parse(SCHEMA);
            schema.parse_more(SCHEMA_1_37);
            schema
        })
    }

    pub fn message(&self, name: &str) -> Option<&Message> {
        self.messages.get(name)
    }

    /// Messages whose last name segment is `short` (any case), in any module.
    pub fn messages_named<'a>(&'a self, short: &'a str) -> impl Iterator<Item = &'a Message> + 'a {
        self.messages
            .iter()
            .filter(move |(name, _)| {
                name.rsplit('.')
                    .next()
                    .is_some_and(|n| n.eq_ignore_ascii_case(short))
            })
            .map(|(_, m)| m)
    }

    /// The message name for an object's `apiVersion` and `kind`, if it has one.
    pub fn message_for(&self, api_version: &str, kind: &str) -> Option<String> {
        let module = self.modules.get(api_version)?;
        [format!("{module}.{kind}"), format!("{META_V1}.{kind}")]
            .into_iter()
            .find(|name| self.messages.contains_key(name.as_str()))
    }

    fn parse(text: &'static str) -> Schema {
        let mut schema = Schema::default();
        schema.parse_more(text);
        schema
    }

    /// Adds the lines of `text`; an `M` of a known message reopens it.
    fn parse_more(&mut self, text: &'static str) {
        let schema = self;
        let mut current: Option<&'static str> = None;
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let parts: Vec<&'static str> = line.split_whitespace().collect();
            match parts.as_slice() {
                ["V", api_version, module] => {
                    schema.modules.insert(api_version, module);
                }
                ["M", name] => {
                    schema.messages.entry(name).or_default();
                    current = Some(name);
                }
                ["F", tag, json, card, ty, rest @ ..] => {
                    let msg = schema
                        .messages
                        .get_mut(current.expect("F after M"))
                        .expect("current message");
                    let field = Field {
                        tag: tag.parse().expect("numeric tag"),
                        json,
                        card: match *card {
                            "one" | "inline" => Cardinality::One,
                            "list" => Cardinality::List,
                            "map" => Cardinality::Map,
                            other => panic!("cardinality {other}"),
                        },
                        ty: match *ty {
                            "string" => Type::String,
                            "bytes" => Type::Bytes,
                            "int32" => Type::Int32,
                            "int64" => Type::Int64,
                            "bool" => Type::Bool,
                            "double" => Type::Double,
                            "float" => Type::Float,
                            "msg" => Type::Message,
                            other => panic!("type {other}"),
                        },
                        message: rest.first().copied().unwrap_or(""),
                        inline: *card == "inline",
                    };
                    msg.by_tag.insert(field.tag, msg.fields.len());
                    msg.fields.push(field);
                }
                other => panic!("schema line {other:?}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_resolve_to_their_messages() {
        let s = Schema::get();
        assert_eq!(s.message_for("v1", "Pod").unwrap(), "api.core.v1.Pod");
        assert_eq!(
            s.message_for("apps/v1", "DeploymentList").unwrap(),
            "api.apps.v1.DeploymentList"
        );
        assert_eq!(
            s.message_for("v1", "Status").unwrap(),
            "apimachinery.pkg.apis.meta.v1.Status"
        );
        assert_eq!(
            s.message_for("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
            None
        );
        let spec = s.message("api.core.v1.ServiceSpec").unwrap();
        let cluster_ips = spec.fields.iter().find(|f| f.json == "clusterIPs").unwrap();
        assert_eq!(
            (cluster_ips.card, cluster_ips.ty),
            (Cardinality::List, Type::String)
        );
    }
}
