//! The stored form of an object and the way back: the store keeps an
//! object's JSON without `resourceVersion` (the row's revision is it), and
//! every read stamps the revision in again — decoded ([`decode_object`]) or,
//! for a LIST or a watch event, straight into the answer's bytes
//! ([`write_stamped`]) without parsing more than `metadata`.

use serde_json::Value;

/// Turns a stored value into the API object, stamping its resourceVersion.
pub(crate) fn decode_object(value: &[u8], revision: i64) -> Option<Value> {
    let mut obj: Value = serde_json::from_slice(value).ok()?;
    minik8s_api::meta::metadata_mut(&mut obj).insert(
        "resourceVersion".into(),
        Value::String(revision.to_string()),
    );
    Some(obj)
}

/// The top level of a stored object: its fields in order, their values unparsed.
struct TopLevel<'a>(Vec<(&'a str, &'a serde_json::value::RawValue)>);

impl<'de> serde::Deserialize<'de> for TopLevel<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = TopLevel<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut fields = Vec::new();
                while let Some(field) = map.next_entry()? {
                    fields.push(field);
                }
                Ok(TopLevel(fields))
            }
        }
        d.deserialize_map(Fields)
    }
}

/// Where `metadata`'s value is in a stored object: (start, end) byte
/// offsets. The object is read only up to it: the fields after it (spec and
/// status, most of a pod) are not even scanned. None when the value is not
/// an object or has no `metadata`.
pub(crate) fn metadata_span(value: &[u8]) -> Option<(usize, usize)> {
    use std::cell::Cell;
    struct UpToMetadata<'a, 'de>(&'a Cell<Option<&'de serde_json::value::RawValue>>);
    impl<'de> serde::de::Visitor<'de> for UpToMetadata<'_, 'de> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<&str>()? {
                let raw: &serde_json::value::RawValue = map.next_value()?;
                if key == "metadata" {
                    self.0.set(Some(raw));
                    // Stop here: the parser then finds no closing brace and
                    // errs, which is expected (the span is already known).
                    return Ok(());
                }
            }
            Ok(())
        }
    }
    let found = Cell::new(None);
    let mut de = serde_json::Deserializer::from_slice(value);
    let _ = serde::Deserializer::deserialize_map(&mut de, UpToMetadata(&found));
    let raw = found.get()?.get();
    let start = raw.as_ptr() as usize - value.as_ptr() as usize;
    Some((start, start + raw.len()))
}

/// Writes a stored object to `out` with its resourceVersion stamped, as
/// [`decode_object`] then serializing would, parsing nothing but
/// `metadata`: the bytes before and after it are copied as they are. A
/// LIST of 50,000 pods spent most of its time decoding and re-encoding
/// them, then scanning them whole. The stored values are the apiserver's
/// own serialized objects; false (and nothing written) for another shape.
pub(crate) fn write_stamped(out: &mut Vec<u8>, value: &[u8], revision: i64) -> bool {
    if write_stamped_first(out, value, revision) {
        return true;
    }
    let Some((start, end)) = metadata_span(value) else {
        return false;
    };
    let Ok(TopLevel(meta)) = serde_json::from_slice::<TopLevel>(&value[start..end]) else {
        return false;
    };
    out.extend_from_slice(&value[..start]);
    // metadata's own fields are copied too (managedFields is most of it);
    // resourceVersion is replaced where it is, or added last.
    let rv = format!("\"{revision}\"");
    out.push(b'{');
    let mut had_rv = false;
    for (j, (k, v)) in meta.iter().enumerate() {
        if j > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut *out, k);
        out.push(b':');
        if *k == "resourceVersion" {
            out.extend_from_slice(rv.as_bytes());
            had_rv = true;
        } else {
            out.extend_from_slice(v.get().as_bytes());
        }
    }
    if !had_rv {
        if !meta.is_empty() {
            out.push(b',');
        }
        out.extend_from_slice(b"\"resourceVersion\":");
        out.extend_from_slice(rv.as_bytes());
    }
    out.push(b'}');
    out.extend_from_slice(&value[end..]);
    true
}

/// [`write_stamped`] for the shape the store holds, without parsing:
/// `metadata` opens after a few plain strings (`apiVersion`, `kind`) and no
/// `"resourceVersion"` is anywhere in the object (the store keeps none: the
/// row's revision is it), so the revision goes in as `metadata`'s first
/// member. The order of members means nothing in JSON; this way a GET or a
/// LIST never scans `metadata` (managedFields is most of it). False, with
/// nothing written, for any other shape.
fn write_stamped_first(out: &mut Vec<u8>, value: &[u8], revision: i64) -> bool {
    let Some(open) = metadata_opening(value) else {
        return false;
    };
    if memchr::memmem::find(value, b"\"resourceVersion\"").is_some() {
        return false;
    }
    out.extend_from_slice(&value[..=open]);
    out.extend_from_slice(b"\"resourceVersion\":\"");
    out.extend_from_slice(revision.to_string().as_bytes());
    out.push(b'"');
    if value.get(open + 1) != Some(&b'}') {
        out.push(b',');
    }
    out.extend_from_slice(&value[open + 1..]);
    true
}

/// Where the `{` of `metadata` is in `{"k":"v",...,"metadata":{...`, when
/// only members with plain string values (no escapes) come before it.
fn metadata_opening(value: &[u8]) -> Option<usize> {
    // The end of the plain string opening at `at` (the index of its closing quote).
    let plain_string = |at: usize| -> Option<usize> {
        if value.get(at) != Some(&b'"') {
            return None;
        }
        let end = at + 1 + memchr::memchr(b'"', value.get(at + 1..)?)?;
        (!value[at + 1..end].contains(&b'\\')).then_some(end)
    };
    if value.first() != Some(&b'{') {
        return None;
    }
    let mut at = 1;
    loop {
        let key_end = plain_string(at)?;
        if value.get(key_end + 1) != Some(&b':') {
            return None;
        }
        let v = key_end + 2;
        if &value[at + 1..key_end] == b"metadata" {
            return (value.get(v) == Some(&b'{')).then_some(v);
        }
        let v_end = plain_string(v)?;
        if value.get(v_end + 1) != Some(&b',') {
            return None;
        }
        at = v_end + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_object_is_written_as_decoding_would() {
        let with_rv = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","labels":{"x":"y\"z"},"resourceVersion":"1","uid":"u"},"spec":{"containers":[{"name":"c","image":"i"}],"x":[1.5,null,true]},"status":{}}"#;
        let without_rv = br#"{"kind":"Pod","metadata":{"name":"a"},"spec":{}}"#;
        let empty_meta = br#"{"kind":"Pod","metadata":{}}"#;
        let meta_later =
            br#"{"spec":{"metadata":{"name":"inner"}},"metadata":{"name":"b"},"status":{"s":"}"}}"#;
        let meta_last =
            br#"{"kind":"Pod","spec":{},"metadata":{"name":"c","resourceVersion":"3"}}"#;
        for stored in [&with_rv[..], without_rv, empty_meta, meta_later, meta_last] {
            let mut out = Vec::new();
            assert!(write_stamped(&mut out, stored, 42));
            // The same JSON (members may come in another order).
            assert_eq!(
                serde_json::from_slice::<Value>(&out).unwrap(),
                decode_object(stored, 42).unwrap(),
                "{}",
                String::from_utf8_lossy(&out)
            );
        }
        // An escape is kept as written: the same JSON, other bytes.
        let escaped = br#"{"metadata":{"name":"\u00e9"}}"#;
        let mut out = Vec::new();
        assert!(write_stamped(&mut out, escaped, 7));
        assert_eq!(
            serde_json::from_slice::<Value>(&out).unwrap(),
            decode_object(escaped, 7).unwrap()
        );
    }

    #[test]
    fn the_stored_shape_gets_its_revision_first_in_metadata() {
        let mut out = Vec::new();
        let stored = br#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"status":{}}"#;
        assert!(write_stamped(&mut out, stored, 42));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"resourceVersion":"42","name":"n"},"status":{}}"#
        );
        // An escape before metadata, or a stored resourceVersion: the parsing way.
        for other in [
            &br#"{"kind":"N\u0041","metadata":{"name":"n"}}"#[..],
            br#"{"kind":"Node","metadata":{"name":"n","resourceVersion":"1"}}"#,
            br#"{"kind":"Node","spec":{},"metadata":{"name":"n"}}"#,
        ] {
            assert!(!write_stamped_first(&mut Vec::new(), other, 1));
            let mut out = Vec::new();
            assert!(write_stamped(&mut out, other, 9));
            assert_eq!(
                serde_json::from_slice::<Value>(&out).unwrap(),
                decode_object(other, 9).unwrap()
            );
        }
    }

    #[test]
    fn other_shapes_are_left_to_the_decoder() {
        let mut out = b"[".to_vec();
        assert!(!write_stamped(&mut out, b"[1,2]", 1));
        assert!(!write_stamped(&mut out, br#"{"kind":"X"}"#, 1));
        assert!(!write_stamped(&mut out, br#"{"metadata":[]}"#, 1));
        assert!(!write_stamped(&mut out, b"{not json", 1));
        assert_eq!(out, b"[");
    }
}
