//! The parts of SPDY/3.1 that kubectl's streams need (`port-forward`, and
//! exec's fallback): frames, and the zlib-compressed header blocks.
//!
//! ```text
//!  control frame: |1|version=3|type| |flags|length(24)| payload
//!  data frame:    |0|stream id(31) | |flags|length(24)| data
//!  SYN_STREAM (1): stream id, associated id, priority, header block
//!  SYN_REPLY  (2): stream id, header block       RST_STREAM (3): stream id, status
//!  PING (6): id (echoed)   GOAWAY (7): last stream id, status   FLAG_FIN = 1
//! ```
//!
//! A header block is `count, (name length, name, value length, value)*`
//! (32-bit big-endian lengths), compressed by one zlib stream per direction
//! that starts from SPDY's dictionary. Inflating needs that dictionary as the
//! window's history; our own blocks are zlib *stored* blocks, which need no
//! dictionary to read (so the header says none).

use miniz_oxide::inflate::core::{decompress, inflate_flags, DecompressorOxide};
use miniz_oxide::inflate::TINFLStatus;
use std::sync::OnceLock;

pub const FLAG_FIN: u8 = 1;
const VERSION: u16 = 3;
const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;

/// Reads the next frame off a connection; None at its end or on a frame
/// that does not parse (the session is over either way).
pub async fn read_frame<R>(read: &mut R) -> Option<Frame>
where
    R: tokio::io::AsyncRead + Unpin,
{
    use tokio::io::AsyncReadExt;
    let mut head = [0u8; 8];
    read.read_exact(&mut head).await.ok()?;
    let mut payload = vec![0u8; payload_len(&head)];
    read.read_exact(&mut payload).await.ok()?;
    match parse(head, payload) {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::debug!(error = %e, "bad SPDY frame");
            None
        }
    }
}

/// The `101 Switching Protocols` that turns an HTTP connection into SPDY/3.1
/// carrying `protocol` (`X-Stream-Protocol-Version`).
pub fn switching_protocols(protocol: &'static str) -> axum::response::Response {
    use axum::http::{header, HeaderValue, StatusCode};
    let mut resp = axum::response::Response::new(axum::body::Body::empty());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
    h.insert(STREAM_PROTOCOL, HeaderValue::from_static(protocol));
    resp
}

/// The header naming the protocol spoken over the streams.
pub const STREAM_PROTOCOL: &str = "x-stream-protocol-version";

/// The SPDY/3 header dictionary (draft-mbelshe-httpbis-spdy-00, 2.6.10.1):
/// these words, each with a 32-bit length before it, then `TAIL`.
const WORDS: &[&str] = &[
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
];
const TAIL: &str = concat!(
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request",
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented",
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00",
    " Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,",
    "application/xml,application/xhtml+xml,text/plain,text/javascript,public",
    "privatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
);

pub fn dictionary() -> &'static [u8] {
    static DICT: OnceLock<Vec<u8>> = OnceLock::new();
    DICT.get_or_init(|| {
        let mut d = Vec::new();
        for w in WORDS {
            d.extend_from_slice(&(w.len() as u32).to_be_bytes());
            d.extend_from_slice(w.as_bytes());
        }
        d.extend_from_slice(TAIL.as_bytes());
        d
    })
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SpdyError {
    #[error("spdy: {0}")]
    Protocol(String),
}

fn protocol(m: impl Into<String>) -> SpdyError {
    SpdyError::Protocol(m.into())
}

/// A frame as read.
#[derive(Debug, PartialEq)]
pub enum Frame {
    SynStream {
        stream: u32,
        fin: bool,
        headers: Vec<u8>,
    },
    Data {
        stream: u32,
        fin: bool,
        data: Vec<u8>,
    },
    RstStream {
        stream: u32,
    },
    Ping {
        id: u32,
    },
    GoAway,
    /// SETTINGS, WINDOW_UPDATE, HEADERS...: nothing to do for us.
    Other,
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, SpdyError> {
    b.get(at..at + 4)
        .map(|s| u32::from_be_bytes(s.try_into().expect("4 bytes")))
        .ok_or_else(|| protocol("frame too short"))
}

/// One frame from its 8-byte head and payload.
pub fn parse(head: [u8; 8], payload: Vec<u8>) -> Result<Frame, SpdyError> {
    let flags = head[4];
    let fin = flags & FLAG_FIN != 0;
    if head[0] & 0x80 == 0 {
        let stream = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) & 0x7fff_ffff;
        return Ok(Frame::Data {
            stream,
            fin,
            data: payload,
        });
    }
    let version = u16::from_be_bytes([head[0] & 0x7f, head[1]]);
    if version != VERSION {
        return Err(protocol(format!("unsupported version {version}")));
    }
    Ok(match u16::from_be_bytes([head[2], head[3]]) {
        SYN_STREAM => Frame::SynStream {
            stream: u32_at(&payload, 0)? & 0x7fff_ffff,
            fin,
            headers: payload
                .get(10..)
                .ok_or_else(|| protocol("short SYN_STREAM"))?
                .to_vec(),
        },
        RST_STREAM => Frame::RstStream {
            stream: u32_at(&payload, 0)? & 0x7fff_ffff,
        },
        PING => Frame::Ping {
            id: u32_at(&payload, 0)?,
        },
        GOAWAY => Frame::GoAway,
        _ => Frame::Other,
    })
}

/// The payload length a frame head announces.
pub fn payload_len(head: &[u8; 8]) -> usize {
    u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize
}

fn control(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(8 + payload.len());
    f.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    f.extend_from_slice(&kind.to_be_bytes());
    f.push(flags);
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    f.extend_from_slice(payload);
    f
}

pub fn syn_reply(stream: u32, header_block: &[u8]) -> Vec<u8> {
    let mut p = stream.to_be_bytes().to_vec();
    p.extend_from_slice(header_block);
    control(SYN_REPLY, 0, &p)
}

pub fn ping(id: u32) -> Vec<u8> {
    control(PING, 0, &id.to_be_bytes())
}

pub fn rst_stream(stream: u32, status: u32) -> Vec<u8> {
    let mut p = stream.to_be_bytes().to_vec();
    p.extend_from_slice(&status.to_be_bytes());
    control(RST_STREAM, 0, &p)
}

pub fn goaway(last_stream: u32) -> Vec<u8> {
    let mut p = last_stream.to_be_bytes().to_vec();
    p.extend_from_slice(&0u32.to_be_bytes());
    control(GOAWAY, 0, &p)
}

/// DATA frames for `data` (at most 16 MiB - 1 each), FIN on the last one.
pub fn data(stream: u32, fin: bool, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 8);
    let chunks: Vec<&[u8]> = if data.is_empty() {
        vec![&[]]
    } else {
        data.chunks(0xff_ffff).collect()
    };
    let last = chunks.len() - 1;
    for (i, chunk) in chunks.into_iter().enumerate() {
        out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
        out.push(if fin && i == last { FLAG_FIN } else { 0 });
        out.extend_from_slice(&(chunk.len() as u32).to_be_bytes()[1..]);
        out.extend_from_slice(chunk);
    }
    out
}

/// `count, (len, name, len, value)*` with 32-bit big-endian lengths.
fn serialize(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut raw = (headers.len() as u32).to_be_bytes().to_vec();
    for (k, v) in headers {
        for s in [k, v] {
            raw.extend_from_slice(&(s.len() as u32).to_be_bytes());
            raw.extend_from_slice(s.as_bytes());
        }
    }
    raw
}

/// Our direction's header blocks: a zlib stream of stored blocks.
#[derive(Default)]
pub struct HeaderWriter {
    started: bool,
}

impl HeaderWriter {
    pub fn block(&mut self, headers: &[(&str, &str)]) -> Vec<u8> {
        let raw = serialize(headers);
        let mut out = Vec::new();
        if !self.started {
            // CMF 0x78 (deflate, 32 KiB window), FLG 0x01: no dictionary, valid check bits.
            out.extend_from_slice(&[0x78, 0x01]);
            self.started = true;
        }
        for chunk in raw.chunks(0xffff) {
            let len = chunk.len() as u16;
            out.push(0x00); // not final, stored
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&(!len).to_le_bytes());
            out.extend_from_slice(chunk);
        }
        // A sync flush's empty stored block: a reader hands out the data as
        // soon as it reaches this marker, instead of reading on for the next
        // block (into the next frame) and failing (Go's spdystream does).
        out.extend_from_slice(&[0x00, 0x00, 0x00, 0xff, 0xff]);
        out
    }
}

/// The peer's header blocks: one inflate stream whose history starts with
/// the dictionary.
pub struct HeaderReader {
    inflate: Box<DecompressorOxide>,
    /// Dictionary, then everything inflated so far.
    out: Vec<u8>,
    header_left: usize,
}

/// Everything inflated on one connection is kept as history; this bounds it.
const MAX_HISTORY: usize = 4 << 20;

impl Default for HeaderReader {
    fn default() -> Self {
        HeaderReader {
            inflate: Box::default(),
            out: dictionary().to_vec(),
            header_left: 2,
        }
    }
}

impl HeaderReader {
    pub fn headers(&mut self, mut block: &[u8]) -> Result<Vec<(String, String)>, SpdyError> {
        if self.header_left > 0 {
            // The zlib header (and a dictionary id when FDICT is set).
            let cut = self.header_left.min(block.len());
            if self.header_left == 2 && cut >= 2 {
                let has_dict = block[1] & 0x20 != 0;
                let dict_id = adler32(dictionary());
                if has_dict {
                    let id = u32_at(block, 2)?;
                    if id != dict_id {
                        return Err(protocol("the header block uses another dictionary"));
                    }
                    block = &block[6..];
                } else {
                    block = &block[2..];
                }
                self.header_left = 0;
            } else {
                return Err(protocol("header block too short"));
            }
        }
        let start = self.out.len();
        let mut consumed = 0;
        loop {
            let pos = self.out.len();
            self.out.resize(pos + 16 * 1024, 0);
            let flags = inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF
                | inflate_flags::TINFL_FLAG_HAS_MORE_INPUT;
            let (status, read, written) = decompress(
                &mut self.inflate,
                &block[consumed..],
                &mut self.out,
                pos,
                flags,
            );
            self.out.truncate(pos + written);
            consumed += read;
            match status {
                TINFLStatus::HasMoreOutput => continue,
                TINFLStatus::NeedsMoreInput | TINFLStatus::Done if consumed >= block.len() => break,
                TINFLStatus::NeedsMoreInput | TINFLStatus::Done => continue,
                other => return Err(protocol(format!("inflating headers: {other:?}"))),
            }
        }
        if self.out.len() > MAX_HISTORY {
            return Err(protocol("too many header bytes on one connection"));
        }
        parse_headers(&self.out[start..])
    }
}

fn parse_headers(raw: &[u8]) -> Result<Vec<(String, String)>, SpdyError> {
    let count = u32_at(raw, 0)? as usize;
    let mut at = 4;
    let mut out = Vec::new();
    let text = |at: &mut usize| -> Result<String, SpdyError> {
        let len = u32_at(raw, *at)? as usize;
        let s = raw
            .get(*at + 4..*at + 4 + len)
            .ok_or_else(|| protocol("header block truncated"))?;
        *at += 4 + len;
        Ok(String::from_utf8_lossy(s).into_owned())
    };
    for _ in 0..count.min(1024) {
        let k = text(&mut at)?;
        let v = text(&mut at)?;
        out.push((k.to_ascii_lowercase(), v));
    }
    Ok(out)
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dictionary_is_spdy3s() {
        // 1,423 bytes in the SPDY/3 draft; its Adler-32 is the id in a peer's zlib header.
        assert_eq!(dictionary().len(), 1423);
        assert_eq!(&dictionary()[..11], b"\0\0\0\x07options");
        assert!(dictionary().ends_with(b"enq=0."));
    }

    #[test]
    fn our_header_blocks_read_back_through_inflate() {
        let mut w = HeaderWriter::default();
        let mut r = HeaderReader::default();
        let first = w.block(&[
            ("streamtype", "error"),
            ("port", "8080"),
            ("requestid", "0"),
        ]);
        assert_eq!(
            r.headers(&first).unwrap(),
            vec![
                ("streamtype".to_string(), "error".to_string()),
                ("port".into(), "8080".into()),
                ("requestid".into(), "0".into())
            ]
        );
        // Each block ends in a sync flush, so a reader stops at the frame's end.
        assert!(first.ends_with(&[0x00, 0x00, 0x00, 0xff, 0xff]));
        let second = w.block(&[("streamtype", "data")]);
        assert_eq!(r.headers(&second).unwrap()[0].1, "data");
    }

    #[test]
    fn frames_round_trip_and_bad_ones_are_errors() {
        let f = data(5, true, b"hello");
        let head: [u8; 8] = f[..8].try_into().unwrap();
        assert_eq!(payload_len(&head), 5);
        assert_eq!(
            parse(head, f[8..].to_vec()).unwrap(),
            Frame::Data {
                stream: 5,
                fin: true,
                data: b"hello".to_vec()
            }
        );
        let p = ping(7);
        assert_eq!(
            parse(p[..8].try_into().unwrap(), p[8..].to_vec()).unwrap(),
            Frame::Ping { id: 7 }
        );
        let mut v2 = ping(1);
        v2[1] = 2;
        assert!(parse(v2[..8].try_into().unwrap(), v2[8..].to_vec()).is_err());
        let syn = control(SYN_STREAM, 0, &[0, 0, 0]);
        assert!(parse(syn[..8].try_into().unwrap(), syn[8..].to_vec()).is_err());
        assert!(HeaderReader::default().headers(&[0x78]).is_err());
    }
}
