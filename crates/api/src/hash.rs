//! The hashes controllers put into names and labels: Kubernetes' revision hash
//! (FNV-32a rendered with the "safe encode" alphabet, as in
//! `controller-revision-hash`) and the SHA-1 hex keys LWS uses for groups.

use serde_json::Value;
use sha1::{Digest, Sha1};

/// Kubernetes' `rand.SafeEncodeString` alphabet: no vowels, no look-alikes,
/// so a hash never spells a word or reads ambiguously.
const SAFE_ALPHABET: &[u8] = b"bcdfghjkmnpqrstvwxz2456789";

/// FNV-1a, 32 bits.
pub fn fnv32a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c9dc5u32, |h, b| {
        (h ^ *b as u32).wrapping_mul(0x0100_0193)
    })
}

/// The decimal digits of `n`, each mapped through the safe alphabet.
pub fn safe_encode(n: u32) -> String {
    n.to_string()
        .bytes()
        .map(|b| SAFE_ALPHABET[b as usize % SAFE_ALPHABET.len()] as char)
        .collect()
}

/// JSON with every object's keys sorted, so equal values hash equally
/// whatever order their keys arrived in.
pub fn canonical_json(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v).to_string()
}

/// The revision hash of a value (e.g. a pod template): stable, short, opaque.
pub fn revision_hash(v: &Value) -> String {
    safe_encode(fnv32a(canonical_json(v).as_bytes()))
}

/// Lower-case hex SHA-1 of `s` (40 characters).
pub fn sha1_hex(s: &str) -> String {
    Sha1::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fnv_and_sha1_match_their_reference_vectors() {
        assert_eq!(fnv32a(b""), 0x811c9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c292c);
        assert_eq!(sha1_hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
    }

    #[test]
    fn revision_hash_ignores_key_order_but_not_values() {
        let a = json!({"x": 1, "y": {"b": 2, "a": [1, {"d": 1, "c": 2}]}});
        let b = json!({"y": {"a": [1, {"c": 2, "d": 1}], "b": 2}, "x": 1});
        assert_eq!(revision_hash(&a), revision_hash(&b));
        assert_ne!(revision_hash(&a), revision_hash(&json!({"x": 2})));
        assert!(revision_hash(&a)
            .bytes()
            .all(|c| SAFE_ALPHABET.contains(&c)));
    }
}
