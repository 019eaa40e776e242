//! Device selectors: CEL over one device, as Kubernetes evaluates them.
//!
//! ```text
//!  device ─▶ { driver, attributes[domain][id], capacity[domain][id], allowMultipleAllocations }
//!  "device.driver == 'gpu.minik8s.io' && device.capacity['gpu.minik8s.io'].memory.compareTo(quantity('40Gi')) >= 0"
//! ```
//!
//! Attributes are `int`, `bool`, `string` or semantic versions (`semver`);
//! capacities are quantities. Kubernetes' CEL libraries for both are here as
//! opaque values with their functions: `quantity(s)`, `isQuantity(s)`,
//! `semver(s)`, `isSemver(s)`, and the members `compareTo`, `isGreaterThan`,
//! `isLessThan`, `asInteger`, `asApproximateFloat`, `sign`, `isInteger`,
//! `major`, `minor`, `patch`.

use crate::schema::cel::compile as compile_rule;
use cel::extractors::This;
use cel::objects::{Key, Map, Opaque, Value as Cel};
use cel::{Context, ExecutionError, Program};
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};
use minik8s_api::quantity::Quantity as Parsed;
use std::collections::HashMap;
use std::sync::Arc;

/// A device as selectors see it (made by [`device_value`]).
pub type DeviceValue = Cel;

/// Kubernetes' limit on a selector expression's length.
pub const MAX_EXPRESSION_LENGTH: usize = 10 * 1024;

/// A quantity in CEL: its text and its value.
#[derive(Debug, Clone)]
pub struct Quantity {
    text: String,
    value: f64,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}
impl Eq for Quantity {}
impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A semantic version in CEL (`major.minor.patch[-pre]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver {
    parts: (u64, u64, u64),
    pre: String,
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

impl Semver {
    pub fn parse(s: &str) -> Option<Semver> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let (core, pre) = match s.split_once('-') {
            Some((c, p)) => (c, p.split('+').next().unwrap_or("").to_string()),
            None => (s.split('+').next().unwrap_or(""), String::new()),
        };
        let mut it = core.split('.').map(|p| p.parse::<u64>().ok());
        let parts = (it.next()??, it.next()??, it.next()??);
        it.next().is_none().then_some(Semver { parts, pre })
    }

    fn cmp(&self, other: &Semver) -> std::cmp::Ordering {
        // A pre-release sorts before its release.
        self.parts.cmp(&other.parts).then_with(|| {
            match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => std::cmp::Ordering::Equal,
                (true, false) => std::cmp::Ordering::Greater,
                (false, true) => std::cmp::Ordering::Less,
                (false, false) => self.pre.cmp(&other.pre),
            }
        })
    }
}

fn quantity_of(s: &str) -> Result<Quantity, String> {
    Parsed::parse(s)
        .map(|q| Quantity {
            text: s.to_string(),
            value: q.0,
        })
        .map_err(|e| e.to_string())
}

fn opaque<T: Opaque + 'static>(v: &Cel) -> Option<&T> {
    match v {
        Cel::Opaque(o) => o.downcast_ref::<T>(),
        _ => None,
    }
}

/// `a.compareTo(b)` for two quantities or two versions: -1, 0 or 1.
fn compare(function: &str, a: &Cel, b: &Cel) -> Result<i64, ExecutionError> {
    let ordering = if let (Some(x), Some(y)) = (opaque::<Quantity>(a), opaque::<Quantity>(b)) {
        x.value
            .partial_cmp(&y.value)
            .unwrap_or(std::cmp::Ordering::Equal)
    } else if let (Some(x), Some(y)) = (opaque::<Semver>(a), opaque::<Semver>(b)) {
        x.cmp(y)
    } else {
        return Err(ExecutionError::function_error(
            function,
            "expects two quantities or two semantic versions",
        ));
    };
    Ok(ordering as i64)
}

fn quantity_member<T>(
    function: &'static str,
    this: &Cel,
    f: impl FnOnce(&Quantity) -> T,
) -> Result<T, ExecutionError> {
    opaque::<Quantity>(this)
        .map(f)
        .ok_or_else(|| ExecutionError::function_error(function, "expects a quantity"))
}

fn semver_member<'a>(function: &'static str, this: &'a Cel) -> Result<&'a Semver, ExecutionError> {
    opaque::<Semver>(this)
        .ok_or_else(|| ExecutionError::function_error(function, "expects a semantic version"))
}

/// Adds Kubernetes' quantity and semver functions to a context.
fn add_functions(ctx: &mut Context) -> Result<(), String> {
    let err = |e: cel::DeclarationError| format!("{e:?}");
    ctx.add_function(
        "quantity",
        |s: Arc<String>| -> Result<Cel, ExecutionError> {
            quantity_of(&s)
                .map(|q| Cel::Opaque(Arc::new(q)))
                .map_err(|e| ExecutionError::function_error("quantity", e))
        },
    )
    .map_err(err)?;
    ctx.add_function("isQuantity", |s: Arc<String>| quantity_of(&s).is_ok())
        .map_err(err)?;
    ctx.add_function("semver", |s: Arc<String>| -> Result<Cel, ExecutionError> {
        Semver::parse(&s)
            .map(|v| Cel::Opaque(Arc::new(v)))
            .ok_or_else(|| ExecutionError::function_error("semver", format!("invalid semver: {s}")))
    })
    .map_err(err)?;
    ctx.add_function("isSemver", |s: Arc<String>| Semver::parse(&s).is_some())
        .map_err(err)?;
    ctx.add_function("compareTo", |This(a): This<Cel>, b: Cel| {
        compare("compareTo", &a, &b)
    })
    .map_err(err)?;
    ctx.add_function("isGreaterThan", |This(a): This<Cel>, b: Cel| {
        compare("isGreaterThan", &a, &b).map(|o| o > 0)
    })
    .map_err(err)?;
    ctx.add_function("isLessThan", |This(a): This<Cel>, b: Cel| {
        compare("isLessThan", &a, &b).map(|o| o < 0)
    })
    .map_err(err)?;
    ctx.add_function("asInteger", |This(a): This<Cel>| {
        quantity_member("asInteger", &a, |q| q.value).and_then(|v| {
            (v.fract() == 0.0 && v.abs() < i64::MAX as f64)
                .then_some(v as i64)
                .ok_or_else(|| {
                    ExecutionError::function_error("asInteger", "cannot convert value to integer")
                })
        })
    })
    .map_err(err)?;
    ctx.add_function("asApproximateFloat", |This(a): This<Cel>| {
        quantity_member("asApproximateFloat", &a, |q| q.value)
    })
    .map_err(err)?;
    ctx.add_function("isInteger", |This(a): This<Cel>| {
        quantity_member("isInteger", &a, |q| q.value.fract() == 0.0)
    })
    .map_err(err)?;
    ctx.add_function("sign", |This(a): This<Cel>| {
        quantity_member("sign", &a, |q| {
            q.value.signum() as i64 * i64::from(q.value != 0.0)
        })
    })
    .map_err(err)?;
    ctx.add_function("major", |This(a): This<Cel>| {
        semver_member("major", &a).map(|v| v.parts.0 as i64)
    })
    .map_err(err)?;
    ctx.add_function("minor", |This(a): This<Cel>| {
        semver_member("minor", &a).map(|v| v.parts.1 as i64)
    })
    .map_err(err)?;
    ctx.add_function("patch", |This(a): This<Cel>| {
        semver_member("patch", &a).map(|v| v.parts.2 as i64)
    })
    .map_err(err)?;
    Ok(())
}

/// A compiled device selector.
pub struct Selector {
    pub source: String,
    program: Program,
}

impl std::fmt::Debug for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Selector").field(&self.source).finish()
    }
}

impl Selector {
    /// Compiles `expression`, or says why it does not compile (Kubernetes'
    /// `compilation failed: ...`).
    pub fn compile(expression: &str) -> Result<Selector, String> {
        if expression.len() > MAX_EXPRESSION_LENGTH {
            return Err(format!(
                "must be at most {MAX_EXPRESSION_LENGTH} bytes long"
            ));
        }
        Ok(Selector {
            source: expression.to_string(),
            program: compile_rule(expression)?,
        })
    }

    /// Does `device` (made by [`device_value`]) match? A runtime error (a
    /// missing attribute, a wrong type) is an error, as in Kubernetes, not
    /// a silent mismatch.
    pub fn matches(&self, device: &Cel) -> Result<bool, String> {
        let mut ctx = Context::default();
        add_functions(&mut ctx)?;
        ctx.add_variable_from_value("device", device.clone());
        match self.program.execute(&ctx) {
            Ok(Cel::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "CEL result of type {:?} should have been a bool",
                other.type_of()
            )),
            Err(e) => Err(format!("CEL runtime error: {e}")),
        }
    }
}

fn key(s: &str) -> Key {
    Key::String(Arc::new(s.to_string()))
}

fn attribute_value(a: &DeviceAttribute) -> Cel {
    if let Some(b) = a.bool {
        Cel::Bool(b)
    } else if let Some(i) = a.int {
        Cel::Int(i)
    } else if let Some(s) = &a.string {
        Cel::String(Arc::new(s.clone()))
    } else if let Some(v) = a.version.as_deref().and_then(Semver::parse) {
        Cel::Opaque(Arc::new(v))
    } else {
        Cel::Null
    }
}

/// The `device` variable of selectors for one device of `driver`: domains
/// of attributes and capacity (the driver's own always present, maybe
/// empty), so `device.attributes['gpu.minik8s.io'].model` reads as in
/// Kubernetes.
pub fn device_value(driver: &str, device: &Device) -> Cel {
    let mut attributes: HashMap<String, HashMap<Key, Cel>> = HashMap::new();
    let mut capacity: HashMap<String, HashMap<Key, Cel>> = HashMap::new();
    attributes.entry(driver.to_string()).or_default();
    capacity.entry(driver.to_string()).or_default();
    for (name, a) in device.attributes.iter().flatten() {
        let (domain, id) = minik8s_api::dra::qualify(driver, name);
        attributes
            .entry(domain.to_string())
            .or_default()
            .insert(key(id), attribute_value(a));
    }
    for (name, c) in device.capacity.iter().flatten() {
        let (domain, id) = minik8s_api::dra::qualify(driver, name);
        let value = quantity_of(&c.value.0)
            .map(|q| Cel::Opaque(Arc::new(q)))
            .unwrap_or(Cel::Null);
        capacity
            .entry(domain.to_string())
            .or_default()
            .insert(key(id), value);
    }
    let nested = |m: HashMap<String, HashMap<Key, Cel>>| {
        let outer: HashMap<Key, Cel> = m
            .into_iter()
            .map(|(d, inner)| {
                (
                    key(&d),
                    Cel::Map(Map {
                        map: Arc::new(inner),
                    }),
                )
            })
            .collect();
        Cel::Map(Map {
            map: Arc::new(outer),
        })
    };
    let mut fields: HashMap<Key, Cel> = HashMap::new();
    fields.insert(key("driver"), Cel::String(Arc::new(driver.to_string())));
    fields.insert(key("attributes"), nested(attributes));
    fields.insert(key("capacity"), nested(capacity));
    fields.insert(
        key("allowMultipleAllocations"),
        Cel::Bool(device.allow_multiple_allocations.unwrap_or(false)),
    );
    Cel::Map(Map {
        map: Arc::new(fields),
    })
}

/// The quantity text of a CEL value made by `quantity()` (for messages).
pub fn quantity_text(v: &Cel) -> Option<&str> {
    opaque::<Quantity>(v).map(|q| q.text.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gpu(model: &str, memory: &str, version: &str) -> Cel {
        let d: Device = serde_json::from_value(json!({
            "name": "gpu-0",
            "attributes": {"model": {"string": model}, "index": {"int": 0},
                           "driverVersion": {"version": version},
                           "example.com/numa": {"int": 1}},
            "capacity": {"memory": {"value": memory}}
        }))
        .unwrap();
        device_value("gpu.minik8s.io", &d)
    }

    fn check(expr: &str, device: &Cel) -> Result<bool, String> {
        Selector::compile(expr)?.matches(device)
    }

    #[test]
    fn selectors_read_attributes_capacity_and_versions() {
        let d = gpu("a100", "40Gi", "1.2.3");
        for (expr, want) in [
            ("device.driver == 'gpu.minik8s.io'", true),
            ("device.attributes['gpu.minik8s.io'].model == 'a100'", true),
            ("device.attributes['gpu.minik8s.io'].model == 'h100'", false),
            ("device.attributes['example.com'].numa == 1", true),
            (
                "device.capacity['gpu.minik8s.io'].memory.compareTo(quantity('40Gi')) >= 0",
                true,
            ),
            (
                "device.capacity['gpu.minik8s.io'].memory.isGreaterThan(quantity('80Gi'))",
                false,
            ),
            (
                "device.capacity['gpu.minik8s.io'].memory.isLessThan(quantity('41Gi'))",
                true,
            ),
            (
                "device.capacity['gpu.minik8s.io'].memory.asInteger() == 42949672960",
                true,
            ),
            (
                "device.attributes['gpu.minik8s.io'].driverVersion.isGreaterThan(semver('1.2.0'))",
                true,
            ),
            (
                "device.attributes['gpu.minik8s.io'].driverVersion.major() == 1",
                true,
            ),
            ("'model' in device.attributes['gpu.minik8s.io']", true),
            (
                "isQuantity('1Gi') && !isQuantity('x') && isSemver('1.0.0')",
                true,
            ),
        ] {
            assert_eq!(check(expr, &d), Ok(want), "{expr}");
        }
    }

    #[test]
    fn errors_are_reported_not_swallowed() {
        let d = gpu("a100", "40Gi", "1.2.3");
        let missing = check("device.attributes['gpu.minik8s.io'].nothere == 1", &d);
        assert!(missing.unwrap_err().starts_with("CEL runtime error"));
        assert!(check("device.driver", &d)
            .unwrap_err()
            .contains("should have been a bool"));
        assert!(Selector::compile("device.driver ==")
            .unwrap_err()
            .starts_with("compilation failed"));
        assert!(Selector::compile(&"a".repeat(MAX_EXPRESSION_LENGTH + 1)).is_err());
    }
}
