//! HTTP/1.1 response body framing for the client's own HTTP/1.1 path (`h1`): a chunked body
//! decoded as bytes arrive (RFC 9112 §7.1: hex size, extensions skipped, CRLF, data, CRLF;
//! the zero-size chunk, then trailer lines up to an empty one), a body of a stated length, or
//! one that runs to the connection's end. A plain state machine: fed any split of the bytes,
//! it hands out the same data and ends at the same byte.

/// The longest chunk-size line (with extensions) or trailer line accepted.
const MAX_LINE: usize = 4096;

/// How a response body is framed, and how far it has been read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Chunked(Chunked),
    /// `Content-Length`: this many bytes still to come.
    Length(u64),
    /// Neither: the body ends when the server closes the connection.
    UntilClose,
}

/// Where a chunked body's decoding stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chunked {
    state: State,
    /// The size line or trailer line read so far.
    line: Vec<u8>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum State {
    /// Reading a chunk-size line.
    #[default]
    Size,
    /// This many data bytes of the current chunk still to come.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// Trailer lines after the last chunk, up to an empty one.
    Trailer,
    Done,
}

/// A body's HTTP/1.1 framing that cannot be trusted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("a chunk longer than its size")]
    ChunkOverrun,
    #[error("a chunk-size or trailer line over {MAX_LINE} bytes")]
    LineTooLong,
    /// The line as received (lossily as text).
    #[error("invalid chunk size line {0:?}")]
    ChunkSize(String),
    #[error("content-length {0:?} is not a length")]
    ContentLength(String),
    #[error("two content-lengths, {0} and {1}")]
    TwoLengths(u64, u64),
}

impl Body {
    /// True once the whole body has been read (a body that runs to the close never is).
    pub fn finished(&self) -> bool {
        match self {
            Body::Chunked(c) => c.state == State::Done,
            Body::Length(n) => *n == 0,
            Body::UntilClose => false,
        }
    }

    /// Decodes `bytes`, handing each run of body data to `data`; returns how many bytes it
    /// took (fewer than given only once the body is finished: the rest is not this body's).
    pub fn feed(&mut self, bytes: &[u8], mut data: impl FnMut(&[u8])) -> Result<usize, FramingError> {
        match self {
            Body::Chunked(c) => c.feed(bytes, data),
            Body::Length(n) => {
                let take = bytes.len().min(usize::try_from(*n).unwrap_or(usize::MAX));
                if take > 0 {
                    data(&bytes[..take]);
                }
                *n -= take as u64;
                Ok(take)
            }
            Body::UntilClose => {
                if !bytes.is_empty() {
                    data(bytes);
                }
                Ok(bytes.len())
            }
        }
    }
}

impl Chunked {
    fn feed(&mut self, bytes: &[u8], mut data: impl FnMut(&[u8])) -> Result<usize, FramingError> {
        let mut at = 0;
        while at < bytes.len() {
            let rest = &bytes[at..];
            match self.state {
                State::Done => return Ok(at),
                State::Data(n) => {
                    let take = rest.len().min(usize::try_from(n).unwrap_or(usize::MAX));
                    data(&rest[..take]);
                    at += take;
                    self.state = if n == take as u64 { State::DataEnd } else { State::Data(n - take as u64) };
                }
                State::Size | State::DataEnd | State::Trailer => {
                    let Some(line) = self.line_from(rest, &mut at)? else { continue };
                    self.state = match self.state {
                        State::Size => match parse_size(&line)? {
                            0 => State::Trailer,
                            n => State::Data(n),
                        },
                        State::DataEnd if line.is_empty() => State::Size,
                        State::DataEnd => return Err(FramingError::ChunkOverrun),
                        _ if line.is_empty() => State::Done,
                        _ => State::Trailer,
                    };
                }
            }
        }
        Ok(at)
    }

    /// The next whole line (without its CRLF) from `rest`, advancing `at` past what was read;
    /// `None` when the line goes on past `rest` (its start kept).
    fn line_from(&mut self, rest: &[u8], at: &mut usize) -> Result<Option<Vec<u8>>, FramingError> {
        let end = rest.iter().position(|&b| b == b'\n');
        let piece = &rest[..end.unwrap_or(rest.len())];
        if self.line.len() + piece.len() > MAX_LINE {
            return Err(FramingError::LineTooLong);
        }
        match end {
            Some(i) => {
                self.line.extend_from_slice(piece);
                *at += i + 1;
                let mut line = std::mem::take(&mut self.line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                Ok(Some(line))
            }
            None => {
                self.line.extend_from_slice(piece);
                *at += rest.len();
                Ok(None)
            }
        }
    }
}

/// A chunk-size line's size: hex digits, then maybe `;extensions`.
fn parse_size(line: &[u8]) -> Result<u64, FramingError> {
    let bad = || FramingError::ChunkSize(String::from_utf8_lossy(line).into_owned());
    let digits = line.split(|&b| b == b';').next().unwrap_or_default();
    let text = std::str::from_utf8(digits).unwrap_or("").trim_matches([' ', '\t']);
    if text.is_empty() || text.len() > 15 {
        return Err(bad());
    }
    u64::from_str_radix(text, 16).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `bytes` fed in pieces cut at `cuts`: the data, the bytes taken, and whether it finished.
    fn decode(bytes: &[u8], cuts: &[usize]) -> Result<(Vec<u8>, usize, bool), FramingError> {
        let mut body = Body::Chunked(Chunked::default());
        let (mut out, mut taken, mut from) = (Vec::new(), 0, 0);
        let mut ends: Vec<usize> = cuts.iter().map(|&c| c.min(bytes.len())).collect();
        ends.push(bytes.len());
        ends.sort_unstable();
        for end in ends {
            taken += body.feed(&bytes[from.max(taken)..end.max(taken)], |d| out.extend_from_slice(d))?;
            from = end;
        }
        Ok((out, taken, body.finished()))
    }

    #[test]
    fn chunks_with_extensions_and_trailers_end_at_their_last_byte() {
        let wire = b"5;name=v\r\nhello\r\nB\r\n, world! :)\r\n0\r\nx-trailer: 1\r\n\r\nNEXT";
        let (data, taken, done) = decode(wire, &[]).unwrap();
        assert_eq!(data, b"hello, world! :)");
        assert!(done);
        assert_eq!(&wire[taken..], b"NEXT");
    }

    #[test]
    fn bad_framing_is_named() {
        assert_eq!(decode(b"zz\r\n", &[]).unwrap_err(), FramingError::ChunkSize("zz".into()));
        assert_eq!(decode(b"2\r\nabc\r\n", &[]).unwrap_err(), FramingError::ChunkOverrun);
        let long = [b"1".repeat(MAX_LINE + 10), b"\r\n".to_vec()].concat();
        assert_eq!(decode(&long, &[100]).unwrap_err(), FramingError::LineTooLong);
    }

    #[test]
    fn lengths_and_close_delimited_bodies() {
        let mut b = Body::Length(3);
        let mut out = Vec::new();
        assert_eq!(b.feed(b"abcdef", |d| out.extend_from_slice(d)).unwrap(), 3);
        assert!(b.finished() && out == b"abc");
        let mut c = Body::UntilClose;
        assert_eq!(c.feed(b"xyz", |_| {}).unwrap(), 3);
        assert!(!c.finished());
    }

    proptest! {
        /// Any body, chunked in any sizes and fed in any split, decodes to itself and stops at
        /// its last byte.
        #[test]
        fn any_split_decodes_the_same(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            sizes in proptest::collection::vec(1usize..40, 1..20),
            cuts in proptest::collection::vec(0usize..600, 0..12),
        ) {
            let mut wire = Vec::new();
            let (mut at, mut k) = (0, 0);
            while at < data.len() {
                let n = sizes[k % sizes.len()].min(data.len() - at);
                wire.extend_from_slice(format!("{n:x}\r\n").as_bytes());
                wire.extend_from_slice(&data[at..at + n]);
                wire.extend_from_slice(b"\r\n");
                at += n;
                k += 1;
            }
            wire.extend_from_slice(b"0\r\n\r\n");
            let len = wire.len();
            wire.extend_from_slice(b"HTTP/1.1 200");
            let (out, taken, done) = decode(&wire, &cuts).unwrap();
            prop_assert_eq!(out, data);
            prop_assert_eq!(taken, len);
            prop_assert!(done);
        }
    }
}
