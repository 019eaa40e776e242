//! Between protobuf messages and the JSON objects the rest of minik8s works
//! on, walking the [`Schema`]. A few apimachinery types have a JSON form
//! unlike their message (Time is a string, IntOrString a number or a string,
//! RawExtension inline JSON); they are handled by name.

use super::schema::{Cardinality, Field, Schema, Type};
use super::wire::{put_bytes, put_key, put_uint, Reader, Wire};
use super::ProtobufError;
use base64::Engine;
use serde_json::{Map, Value};

const TIME: &str = "apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "apimachinery.pkg.apis.meta.v1.MicroTime";
const FIELDS_V1: &str = "apimachinery.pkg.apis.meta.v1.FieldsV1";
const VERBS: &str = "apimachinery.pkg.apis.meta.v1.Verbs";

/// Go's named string slices (`type Verbs []string`, `type ExtraValue
/// []string`): a message of one repeated string in protobuf, a plain array
/// in JSON.
fn is_string_list(name: &str) -> bool {
    name == VERBS || name.ends_with(".ExtraValue")
}
const INT_OR_STRING: &str = "apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY: &str = "apimachinery.pkg.api.resource.Quantity";
const RAW_EXTENSION: &str = "apimachinery.pkg.runtime.RawExtension";
const APIEXTENSIONS: &str = "apiextensions_apiserver.pkg.apis.apiextensions.";

/// Nested messages deeper than this are refused rather than risk the stack.
const MAX_DEPTH: usize = 64;

/// Go fields that are pointers, where a zero value (0, false, "") means
/// something other than "unset". Go marshals every non-pointer field, zero or
/// not, and its JSON encoding then drops the `omitempty` zeros; minik8s works
/// on JSON, so a decoded zero is dropped unless its field is listed here
/// (`replicas: 0` must stay 0, `restartPolicy: ""` must become unset).
const ZERO_IS_A_VALUE: &[&str] = &[
    "DeploymentSpec.replicas",
    "DeploymentSpec.revisionHistoryLimit",
    "DeploymentSpec.progressDeadlineSeconds",
    "RollingUpdateDeployment.maxUnavailable",
    "RollingUpdateDeployment.maxSurge",
    "ReplicaSetSpec.replicas",
    "ReplicationControllerSpec.replicas",
    "StatefulSetSpec.replicas",
    "StatefulSetSpec.revisionHistoryLimit",
    "RollingUpdateStatefulSetStrategy.partition",
    "RollingUpdateStatefulSetStrategy.maxUnavailable",
    "DaemonSetSpec.revisionHistoryLimit",
    "RollingUpdateDaemonSet.maxUnavailable",
    "RollingUpdateDaemonSet.maxSurge",
    "ScaleSpec.replicas",
    "JobSpec.parallelism",
    "JobSpec.completions",
    "JobSpec.activeDeadlineSeconds",
    "JobSpec.backoffLimit",
    "JobSpec.backoffLimitPerIndex",
    "JobSpec.maxFailedIndexes",
    "JobSpec.ttlSecondsAfterFinished",
    "JobSpec.suspend",
    "JobSpec.manualSelector",
    "CronJobSpec.startingDeadlineSeconds",
    "CronJobSpec.suspend",
    "CronJobSpec.successfulJobsHistoryLimit",
    "CronJobSpec.failedJobsHistoryLimit",
    "PodSpec.terminationGracePeriodSeconds",
    "PodSpec.activeDeadlineSeconds",
    "PodSpec.automountServiceAccountToken",
    "PodSpec.shareProcessNamespace",
    "PodSpec.enableServiceLinks",
    "PodSpec.priority",
    "PodSpec.setHostnameAsFQDN",
    "PodSpec.hostUsers",
    "Probe.terminationGracePeriodSeconds",
    "SecurityContext.privileged",
    "SecurityContext.runAsUser",
    "SecurityContext.runAsGroup",
    "SecurityContext.runAsNonRoot",
    "SecurityContext.readOnlyRootFilesystem",
    "SecurityContext.allowPrivilegeEscalation",
    "PodSecurityContext.runAsUser",
    "PodSecurityContext.runAsGroup",
    "PodSecurityContext.runAsNonRoot",
    "PodSecurityContext.fsGroup",
    "ServiceAccount.automountServiceAccountToken",
    "ConfigMap.immutable",
    "Secret.immutable",
    "ConfigMapVolumeSource.defaultMode",
    "ConfigMapVolumeSource.optional",
    "SecretVolumeSource.defaultMode",
    "SecretVolumeSource.optional",
    "ProjectedVolumeSource.defaultMode",
    "DownwardAPIVolumeSource.defaultMode",
    "DownwardAPIVolumeFile.mode",
    "KeyToPath.mode",
    "ConfigMapKeySelector.optional",
    "SecretKeySelector.optional",
    "ConfigMapEnvSource.optional",
    "SecretEnvSource.optional",
    "ConfigMapProjection.optional",
    "SecretProjection.optional",
    "PersistentVolumeClaimSpec.storageClassName",
    "ServiceSpec.allocateLoadBalancerNodePorts",
    "HorizontalPodAutoscalerSpec.minReplicas",
    "HPAScalingRules.stabilizationWindowSeconds",
    "PodDisruptionBudgetSpec.minAvailable",
    "PodDisruptionBudgetSpec.maxUnavailable",
    "EndpointConditions.ready",
    "EndpointConditions.serving",
    "EndpointConditions.terminating",
    "EndpointPort.port",
    "LeaseSpec.leaseDurationSeconds",
    "LeaseSpec.leaseTransitions",
    "ObjectMeta.deletionGracePeriodSeconds",
    "OwnerReference.controller",
    "OwnerReference.blockOwnerDeletion",
    "DeleteOptions.gracePeriodSeconds",
    "DeleteOptions.orphanDependents",
    "ListMeta.remainingItemCount",
];

fn zero_is_a_value(message: &str, field: &str) -> bool {
    let short = message.rsplit('.').next().unwrap_or(message);
    // Case-insensitive: k8s-pb spells `HPAScalingRules` as `HpaScalingRules`.
    ZERO_IS_A_VALUE.iter().any(|e| {
        e.split_once('.')
            .is_some_and(|(m, f)| f == field && m.eq_ignore_ascii_case(short))
    })
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

fn malformed(message: &str, field: &Field, what: &str) -> ProtobufError {
    ProtobufError::Malformed(format!("{message}.{}: {what}", field.json))
}

/// The JSON form of message `name` encoded in `bytes`.
pub fn to_json(
    schema: &Schema,
    name: &str,
    bytes: &[u8],
    depth: usize,
) -> Result<Value, ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::Malformed(format!(
            "messages nested deeper than {MAX_DEPTH}"
        )));
    }
    if let Some(special) = special_to_json(schema, name, bytes, depth)? {
        return Ok(special);
    }
    let msg = schema
        .message(name)
        .ok_or_else(|| ProtobufError::Malformed(format!("no message {name}")))?;
    let mut obj = Map::new();
    let mut reader = Reader::new(bytes);
    while let Some((tag, wire)) = reader.field()? {
        // Fields this version does not know are skipped, as Go does.
        let Some(field) = msg.by_tag(tag) else {
            continue;
        };
        match field.card {
            Cardinality::One if field.inline => {
                if let Value::Object(fields) = value_to_json(schema, name, field, wire, depth)? {
                    obj.extend(fields);
                }
            }
            Cardinality::One => {
                let v = value_to_json(schema, name, field, wire, depth)?;
                if !is_zero(&v) || (!v.is_null() && zero_is_a_value(name, field.json)) {
                    obj.insert(field.json.to_string(), v);
                } else {
                    obj.remove(field.json);
                }
            }
            Cardinality::List => {
                let list = obj
                    .entry(field.json)
                    .or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(list) = list else {
                    unreachable!("lists are arrays")
                };
                match (field.ty, wire) {
                    // A packed run of scalars.
                    (
                        Type::Int32 | Type::Int64 | Type::Bool | Type::Double | Type::Float,
                        Wire::Bytes(run),
                    ) => {
                        let mut packed = Reader::new(run);
                        while !packed.at_end() {
                            let w = match field.ty {
                                Type::Double => Wire::Fixed64(packed.fixed64()?),
                                Type::Float => Wire::Fixed32(packed.fixed32()?),
                                _ => Wire::Varint(packed.varint()?),
                            };
                            list.push(value_to_json(schema, name, field, w, depth)?);
                        }
                    }
                    _ => list.push(value_to_json(schema, name, field, wire, depth)?),
                }
            }
            Cardinality::Map => {
                let Wire::Bytes(entry) = wire else {
                    return Err(malformed(
                        name,
                        field,
                        "a map entry must be length-delimited",
                    ));
                };
                let (key, value) = map_entry_to_json(schema, name, field, entry, depth)?;
                let map = obj
                    .entry(field.json)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, value);
                }
            }
        }
    }
    Ok(Value::Object(obj))
}

fn map_entry_to_json(
    schema: &Schema,
    name: &str,
    field: &Field,
    entry: &[u8],
    depth: usize,
) -> Result<(String, Value), ProtobufError> {
    let mut key = String::new();
    let mut value = None;
    let mut reader = Reader::new(entry);
    while let Some((tag, wire)) = reader.field()? {
        match (tag, wire) {
            (1, Wire::Bytes(k)) => {
                key = std::str::from_utf8(k)
                    .map_err(|_| malformed(name, field, "a map key is not UTF-8"))?
                    .to_string()
            }
            (2, w) => value = Some(value_to_json(schema, name, field, w, depth)?),
            _ => {
                return Err(malformed(
                    name,
                    field,
                    "a map entry has an unexpected field",
                ))
            }
        }
    }
    let value = match value {
        Some(v) => v,
        None => match field.ty {
            Type::Message => to_json(schema, field.message, &[], depth + 1)?,
            Type::String | Type::Bytes => Value::String(String::new()),
            _ => Value::from(0),
        },
    };
    Ok((key, value))
}

fn value_to_json(
    schema: &Schema,
    name: &str,
    field: &Field,
    wire: Wire<'_>,
    depth: usize,
) -> Result<Value, ProtobufError> {
    Ok(match (field.ty, wire) {
        (Type::Int32, Wire::Varint(v)) => Value::from(v as i64 as i32),
        (Type::Int64, Wire::Varint(v)) => Value::from(v as i64),
        (Type::Bool, Wire::Varint(v)) => Value::Bool(v != 0),
        (Type::Double, Wire::Fixed64(v)) => serde_json::Number::from_f64(f64::from_bits(v))
            .map(Value::Number)
            .ok_or_else(|| malformed(name, field, "not a finite number"))?,
        (Type::Float, Wire::Fixed32(v)) => {
            serde_json::Number::from_f64(f64::from(f32::from_bits(v)))
                .map(Value::Number)
                .ok_or_else(|| malformed(name, field, "not a finite number"))?
        }
        (Type::String, Wire::Bytes(b)) => Value::String(
            std::str::from_utf8(b)
                .map_err(|_| malformed(name, field, "a string is not UTF-8"))?
                .to_string(),
        ),
        (Type::Bytes, Wire::Bytes(b)) => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(b))
        }
        (Type::Message, Wire::Bytes(b)) => to_json(schema, field.message, b, depth + 1)?,
        (ty, _) => {
            return Err(malformed(
                name,
                field,
                &format!("wire type does not fit {ty:?}"),
            ))
        }
    })
}

/// The JSON forms that differ from the message's fields.
/// Long: one arm per special JSON form (quantities, times, int-or-string,
/// raw extensions...), each small, kept together as one table.
fn special_to_json(
    schema: &Schema,
    name: &str,
    bytes: &[u8],
    depth: usize,
) -> Result<Option<Value>, ProtobufError> {
    let fields = || -> Result<Vec<(u32, Wire<'_>)>, ProtobufError> {
        let mut r = Reader::new(bytes);
        let mut out = Vec::new();
        while let Some(f) = r.field()? {
            out.push(f);
        }
        Ok(out)
    };
    let varint = |tag: u32| -> Result<Option<u64>, ProtobufError> {
        Ok(fields()?.iter().rev().find_map(|(t, w)| match w {
            Wire::Varint(v) if *t == tag => Some(*v),
            _ => None,
        }))
    };
    let bytes_of = |tag: u32| -> Result<Option<&[u8]>, ProtobufError> {
        Ok(fields()?.into_iter().rev().find_map(|(t, w)| match w {
            Wire::Bytes(b) if t == tag => Some(b),
            _ => None,
        }))
    };
    let text = |b: &[u8]| {
        std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|_| ProtobufError::Malformed(format!("{name}: a string is not UTF-8")))
    };
    let raw_json = |b: Option<&[u8]>| -> Result<Value, ProtobufError> {
        match b {
            None | Some([]) => Ok(Value::Null),
            Some(b) => serde_json::from_slice(b)
                .map_err(|e| ProtobufError::Malformed(format!("{name}: embedded JSON: {e}"))),
        }
    };
    Ok(Some(match name {
        TIME | MICRO_TIME => {
            let Some(seconds) = varint(1)? else {
                return Ok(Some(Value::Null));
            };
            let nanos = varint(2)?.unwrap_or(0) as i64 as u32;
            let t = chrono::DateTime::from_timestamp(seconds as i64, nanos)
                .ok_or_else(|| ProtobufError::Malformed(format!("{name}: out of range")))?;
            let format = if name == TIME {
                "%Y-%m-%dT%H:%M:%SZ"
            } else {
                "%Y-%m-%dT%H:%M:%S%.6fZ"
            };
            Value::String(t.format(format).to_string())
        }
        INT_OR_STRING => match varint(1)?.unwrap_or(0) {
            0 => Value::from(varint(2)?.unwrap_or(0) as i64 as i32),
            _ => Value::String(text(bytes_of(3)?.unwrap_or_default())?),
        },
        QUANTITY => Value::String(text(bytes_of(1)?.unwrap_or_default())?),
        RAW_EXTENSION | FIELDS_V1 => raw_json(bytes_of(1)?)?,
        n if is_string_list(n) => Value::Array(
            fields()?
                .into_iter()
                .filter_map(|(t, w)| match w {
                    Wire::Bytes(b) if t == 1 => Some(text(b).map(Value::String)),
                    _ => None,
                })
                .collect::<Result<_, _>>()?,
        ),
        n if n.starts_with(APIEXTENSIONS) => {
            let props = |b: &[u8]| {
                let module = &n[..n.rfind('.').unwrap_or(0)];
                to_json(schema, &format!("{module}.JsonSchemaProps"), b, depth + 1)
            };
            match n.rsplit('.').next().unwrap_or_default() {
                "Json" => raw_json(bytes_of(1)?)?,
                // {schema} or [schemas...]
                "JsonSchemaPropsOrArray" => match bytes_of(1)? {
                    Some(b) => props(b)?,
                    None => Value::Array(
                        fields()?
                            .into_iter()
                            .filter_map(|(t, w)| match w {
                                Wire::Bytes(b) if t == 2 => Some(props(b)),
                                _ => None,
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                },
                // true/false, or a schema (which allows)
                "JsonSchemaPropsOrBool" => match bytes_of(2)? {
                    Some(b) => props(b)?,
                    None => Value::Bool(varint(1)?.unwrap_or(0) != 0),
                },
                // a schema, or a list of property names
                "JsonSchemaPropsOrStringArray" => match bytes_of(1)? {
                    Some(b) => props(b)?,
                    None => Value::Array(
                        fields()?
                            .into_iter()
                            .filter_map(|(t, w)| match w {
                                Wire::Bytes(b) if t == 2 => Some(text(b).map(Value::String)),
                                _ => None,
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                },
                _ => return Ok(None),
            }
        }
        _ => return Ok(None),
    }))
}

/// Appends the fields of message `name` for the JSON value `v` to `out`.
pub fn from_json(
    schema: &Schema,
    name: &str,
    v: &Value,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::Malformed(format!(
            "objects nested deeper than {MAX_DEPTH}"
        )));
    }
    if special_from_json(schema, name, v, out, depth)? {
        return Ok(());
    }
    let msg = schema
        .message(name)
        .ok_or_else(|| ProtobufError::Malformed(format!("no message {name}")))?;
    let Value::Object(obj) = v else {
        return Err(ProtobufError::Malformed(format!(
            "{name}: expected an object, got {v}"
        )));
    };
    for field in &msg.fields {
        if field.inline {
            // The inlined message's fields are this object's own.
            scalar_from_json(schema, name, field, v, out, depth)?;
            continue;
        }
        let Some(value) = obj.get(field.json).filter(|v| !v.is_null()) else {
            continue;
        };
        match field.card {
            Cardinality::One => scalar_from_json(schema, name, field, value, out, depth)?,
            Cardinality::List => {
                let Value::Array(items) = value else {
                    return Err(malformed(name, field, "expected an array"));
                };
                for item in items {
                    scalar_from_json(schema, name, field, item, out, depth)?;
                }
            }
            Cardinality::Map => {
                let Value::Object(entries) = value else {
                    return Err(malformed(name, field, "expected an object"));
                };
                for (k, item) in entries {
                    let mut entry = Vec::new();
                    put_bytes(&mut entry, 1, k.as_bytes());
                    scalar_from_json(
                        schema,
                        name,
                        &Field { tag: 2, ..*field },
                        item,
                        &mut entry,
                        depth,
                    )?;
                    put_bytes(out, field.tag, &entry);
                }
            }
        }
    }
    Ok(())
}

fn scalar_from_json(
    schema: &Schema,
    name: &str,
    field: &Field,
    v: &Value,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), ProtobufError> {
    let wrong = || malformed(name, field, &format!("{v} does not fit {:?}", field.ty));
    match field.ty {
        Type::String => put_bytes(out, field.tag, v.as_str().ok_or_else(wrong)?.as_bytes()),
        Type::Bytes => {
            let b = base64::engine::general_purpose::STANDARD
                .decode(v.as_str().ok_or_else(wrong)?)
                .map_err(|_| wrong())?;
            put_bytes(out, field.tag, &b);
        }
        Type::Int32 | Type::Int64 => put_uint(out, field.tag, v.as_i64().ok_or_else(wrong)? as u64),
        Type::Bool => put_uint(out, field.tag, u64::from(v.as_bool().ok_or_else(wrong)?)),
        Type::Double => {
            put_key(out, field.tag, 1);
            out.extend_from_slice(&v.as_f64().ok_or_else(wrong)?.to_le_bytes());
        }
        Type::Float => {
            put_key(out, field.tag, 5);
            out.extend_from_slice(&(v.as_f64().ok_or_else(wrong)? as f32).to_le_bytes());
        }
        Type::Message => {
            let mut inner = Vec::new();
            from_json(schema, field.message, v, &mut inner, depth + 1)?;
            put_bytes(out, field.tag, &inner);
        }
    }
    Ok(())
}

fn special_from_json(
    schema: &Schema,
    name: &str,
    v: &Value,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<bool, ProtobufError> {
    let wrong = || ProtobufError::Malformed(format!("{name}: {v} is not a valid value"));
    match name {
        TIME | MICRO_TIME => {
            let t = chrono::DateTime::parse_from_rfc3339(v.as_str().ok_or_else(wrong)?)
                .map_err(|_| wrong())?;
            put_uint(out, 1, t.timestamp() as u64);
            let nanos = if name == TIME {
                0
            } else {
                t.timestamp_subsec_micros() * 1000
            };
            if nanos > 0 {
                put_uint(out, 2, u64::from(nanos));
            }
        }
        INT_OR_STRING => match v {
            Value::Number(n) => {
                put_uint(out, 1, 0);
                put_uint(out, 2, n.as_i64().ok_or_else(wrong)? as u64);
            }
            Value::String(s) => {
                put_uint(out, 1, 1);
                put_bytes(out, 3, s.as_bytes());
            }
            _ => return Err(wrong()),
        },
        QUANTITY => match v {
            Value::String(s) => put_bytes(out, 1, s.as_bytes()),
            Value::Number(n) => put_bytes(out, 1, n.to_string().as_bytes()),
            _ => return Err(wrong()),
        },
        RAW_EXTENSION | FIELDS_V1 => put_bytes(out, 1, v.to_string().as_bytes()),
        n if is_string_list(n) => {
            for verb in v.as_array().ok_or_else(wrong)? {
                put_bytes(out, 1, verb.as_str().ok_or_else(wrong)?.as_bytes());
            }
        }
        n if n.starts_with(APIEXTENSIONS) => {
            let module = &n[..n.rfind('.').unwrap_or(0)];
            let props = format!("{module}.JsonSchemaProps");
            let schema_of = |tag: u32, s: &Value, out: &mut Vec<u8>| {
                let mut inner = Vec::new();
                from_json(schema, &props, s, &mut inner, depth + 1)?;
                put_bytes(out, tag, &inner);
                Ok::<(), ProtobufError>(())
            };
            match (n.rsplit('.').next().unwrap_or_default(), v) {
                ("Json", v) => put_bytes(out, 1, v.to_string().as_bytes()),
                ("JsonSchemaPropsOrArray", Value::Array(items)) => {
                    for item in items {
                        schema_of(2, item, out)?;
                    }
                }
                ("JsonSchemaPropsOrArray", s) => schema_of(1, s, out)?,
                ("JsonSchemaPropsOrBool", Value::Bool(b)) => put_uint(out, 1, u64::from(*b)),
                ("JsonSchemaPropsOrBool", s) => {
                    put_uint(out, 1, 1);
                    schema_of(2, s, out)?;
                }
                ("JsonSchemaPropsOrStringArray", Value::Array(items)) => {
                    for item in items {
                        put_bytes(out, 2, item.as_str().ok_or_else(wrong)?.as_bytes());
                    }
                }
                ("JsonSchemaPropsOrStringArray", s) => schema_of(1, s, out)?,
                _ => return Ok(false),
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Every message the zero-value list names exists (a typo would silently
/// turn `replicas: 0` into "unset").
#[cfg(test)]
pub(super) fn zero_value_fields_exist(schema: &Schema) -> Result<(), String> {
    for entry in ZERO_IS_A_VALUE {
        let (message, field) = entry.split_once('.').expect("Message.field");
        let found = schema
            .messages_named(message)
            .any(|m| m.fields.iter().any(|f| f.json == field));
        if !found {
            return Err(format!("{entry} names no field of the schema"));
        }
    }
    Ok(())
}

/// See [`super::unwrap_base64`]: walks `v` as message `name`.
pub fn unwrap_base64(schema: &Schema, name: &str, v: &mut Value, depth: usize) -> bool {
    // Types whose JSON is not their message (inline JSON, times...) hold no base64.
    let special = [
        TIME,
        MICRO_TIME,
        FIELDS_V1,
        INT_OR_STRING,
        QUANTITY,
        RAW_EXTENSION,
    ];
    if depth > MAX_DEPTH || special.contains(&name) || name.starts_with(APIEXTENSIONS) {
        return false;
    }
    let Some(msg) = schema.message(name).filter(|_| v.is_object()) else {
        return false;
    };
    let mut changed = false;
    for field in &msg.fields {
        if field.inline {
            changed |= unwrap_base64(schema, field.message, v, depth + 1);
            continue;
        }
        let Value::Object(obj) = &mut *v else {
            return changed;
        };
        let Some(value) = obj.get_mut(field.json) else {
            continue;
        };
        let values: Vec<&mut Value> = match (field.card, value) {
            (Cardinality::One, v) => vec![v],
            (Cardinality::List, Value::Array(items)) => items.iter_mut().collect(),
            (Cardinality::Map, Value::Object(entries)) => entries.values_mut().collect(),
            _ => continue,
        };
        for item in values {
            match (field.ty, item) {
                (Type::Bytes, Value::String(s)) if s.contains(['\r', '\n']) => {
                    s.retain(|c| c != '\r' && c != '\n');
                    changed = true;
                }
                (Type::Message, item) => {
                    changed |= unwrap_base64(schema, field.message, item, depth + 1)
                }
                _ => {}
            }
        }
    }
    changed
}
