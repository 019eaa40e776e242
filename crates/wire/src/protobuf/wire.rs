//! The protobuf wire format: varints, keys and length-delimited fields.
//! Only what Kubernetes' proto2 messages use (no groups).

use super::ProtobufError;

/// One field as it appears on the wire.
#[derive(Debug, Clone, Copy)]
pub enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// Reads the fields of one message in order.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self
                .buf
                .get(self.pos)
                .ok_or(ProtobufError::Truncated("a varint"))?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtobufError::Malformed(
            "a varint longer than 10 bytes".into(),
        ))
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn fixed64(&mut self) -> Result<u64, ProtobufError> {
        Ok(u64::from_le_bytes(
            self.take(8, "a 64-bit field")?.try_into().expect("8 bytes"),
        ))
    }

    pub fn fixed32(&mut self) -> Result<u32, ProtobufError> {
        Ok(u32::from_le_bytes(
            self.take(4, "a 32-bit field")?.try_into().expect("4 bytes"),
        ))
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ProtobufError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(ProtobufError::Truncated(what))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// The next field's tag and value, or `None` at the end of the message.
    pub fn field(&mut self) -> Result<Option<(u32, Wire<'a>)>, ProtobufError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let tag = u32::try_from(key >> 3)
            .ok()
            .filter(|&t| t > 0)
            .ok_or_else(|| ProtobufError::Malformed(format!("field number {}", key >> 3)))?;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => Wire::Fixed64(self.fixed64()?),
            2 => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| ProtobufError::Truncated("a length-delimited field"))?;
                Wire::Bytes(self.take(len, "a length-delimited field")?)
            }
            5 => Wire::Fixed32(self.fixed32()?),
            other => {
                return Err(ProtobufError::Malformed(format!(
                    "wire type {other} in field {tag}"
                )))
            }
        };
        Ok(Some((tag, wire)))
    }
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn put_key(out: &mut Vec<u8>, tag: u32, wire_type: u8) {
    put_varint(out, (u64::from(tag) << 3) | u64::from(wire_type));
}

pub fn put_bytes(out: &mut Vec<u8>, tag: u32, bytes: &[u8]) {
    put_key(out, tag, 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

pub fn put_uint(out: &mut Vec<u8>, tag: u32, v: u64) {
    put_key(out, tag, 0);
    put_varint(out, v);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_including_negative_int32() {
        for v in [0u64, 1, 127, 128, 300, u64::MAX, (-5i64) as u64] {
            let mut buf = Vec::new();
            put_uint(&mut buf, 7, v);
            let mut r = Reader::new(&buf);
            match r.field().unwrap() {
                Some((7, Wire::Varint(got))) => assert_eq!(got, v),
                other => panic!("{other:?}"),
            }
            assert!(r.field().unwrap().is_none());
        }
    }

    #[test]
    fn truncated_input_is_an_error_not_a_panic() {
        let mut buf = Vec::new();
        put_bytes(&mut buf, 1, b"hello");
        for cut in 0..buf.len() {
            let mut r = Reader::new(&buf[..cut]);
            if cut > 0 {
                assert!(r.field().is_err(), "cut at {cut}");
            }
        }
        assert!(Reader::new(&[0x0b]).field().is_err(), "group wire type");
        assert!(Reader::new(&[0x00, 0x00]).field().is_err(), "field 0");
    }
}
