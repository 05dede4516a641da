//! Server-sent events (the WHATWG `text/event-stream` format) decoded from a response's byte
//! chunks in linear time and bounded memory.
//!
//! `eventsource-stream` (used before) appends every chunk to one buffer and parses that buffer
//! from its start on every chunk, and copies what is left after each line: a line that arrives
//! in `k` chunks costs `O(k × length)`, so one 50 MB line took 12.9 s and 598 MB. Here each
//! byte is looked at once: a chunk is searched for line ends from where the last search ended,
//! complete lines are handled in place, and only an unfinished line is kept (copied once).
//! An event (its `data` lines and the line being read) longer than the limit fails the stream
//! ([`SseError::TooLong`]) instead of growing without end.
//!
//! Only `data` matters to the client: `event`, `id` and `retry` fields and comments are
//! skipped. As the format says: lines end in CR LF, LF or CR; a leading byte-order mark is
//! dropped; `field: value` loses one space after the colon; an empty line dispatches the event
//! (none when it has no data); an event cut by the end of the stream is not dispatched.

use std::ops::ControlFlow;

/// The longest SSE event a response may send (its data lines and any one line): a token's
/// chunk is a few hundred bytes, a final chunk with usage and engine stamps about a
/// kilobyte. Past it the request fails with "SSE event longer than 4 MiB from URL".
pub const MAX_EVENT_BYTES: usize = 4 << 20;

/// Why a stream of events cannot be read on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseError {
    /// An event (or one line) is longer than `limit` bytes.
    TooLong { limit: usize },
    /// A line is not UTF-8.
    NotUtf8,
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseError::TooLong { limit } => write!(f, "SSE event longer than {}", size(*limit)),
            SseError::NotUtf8 => f.write_str("an SSE line is not UTF-8"),
        }
    }
}

/// `n` bytes in words: `4 MiB`, `64 KiB`, `100 bytes`.
pub(crate) fn size(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// The decoder's state between chunks.
#[derive(Debug)]
pub struct SseDecoder {
    limit: usize,
    /// The line being read, when a chunk ended inside it.
    line: Vec<u8>,
    /// The event's data so far (each `data` line's value and a line feed).
    data: String,
    /// The last chunk ended in CR: a LF opening the next one ends no second line.
    skip_lf: bool,
    /// No line ended yet (a byte-order mark may open the first).
    first_line: bool,
    /// Bytes searched for line ends, in all (each byte once: the linear-time guarantee).
    scanned: usize,
}

impl SseDecoder {
    /// A decoder that refuses events longer than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        SseDecoder { limit, line: Vec::new(), data: String::new(), skip_lf: false, first_line: true, scanned: 0 }
    }

    /// Feeds one chunk; calls `on_event` with the data of each event it completes, in order,
    /// until `on_event` breaks (the rest of the chunk is then left unread).
    pub fn feed(
        &mut self,
        chunk: &[u8],
        mut on_event: impl FnMut(&str) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>, SseError> {
        let mut rest = chunk;
        if self.skip_lf && !rest.is_empty() {
            self.skip_lf = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        loop {
            let Some(i) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
                self.scanned += rest.len();
                self.check(rest.len())?;
                self.line.extend_from_slice(rest);
                return Ok(ControlFlow::Continue(()));
            };
            self.scanned += i + 1;
            let (head, cr) = (&rest[..i], rest[i] == b'\r');
            rest = &rest[i + 1..];
            if cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.skip_lf = true,
                    Some(_) => {}
                }
            }
            self.check(head.len())?;
            let flow = if self.line.is_empty() {
                self.line_done(head, &mut on_event)?
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(head);
                let flow = self.line_done(&line, &mut on_event);
                line.clear();
                self.line = line;
                flow?
            };
            if flow.is_break() {
                return Ok(flow);
            }
        }
    }

    /// `more` bytes added to the event would pass the limit.
    fn check(&self, more: usize) -> Result<(), SseError> {
        if self.data.len() + self.line.len() + more > self.limit {
            return Err(SseError::TooLong { limit: self.limit });
        }
        Ok(())
    }

    fn line_done(
        &mut self,
        line: &[u8],
        on_event: &mut impl FnMut(&str) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>, SseError> {
        let mut line = std::str::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
        if std::mem::take(&mut self.first_line) {
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.is_empty() {
            if self.data.is_empty() {
                return Ok(ControlFlow::Continue(()));
            }
            self.data.pop(); // the last data line's line feed
            let flow = on_event(&self.data);
            self.data.clear();
            return Ok(flow);
        }
        let (field, value) = match line.split_once(':') {
            Some(("", _)) => return Ok(ControlFlow::Continue(())), // a comment
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        if field == "data" {
            self.check(value.len() + 1)?;
            self.data.push_str(value);
            self.data.push('\n');
        }
        Ok(ControlFlow::Continue(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event of `chunks` through one decoder, and how it ended.
    fn events(limit: usize, chunks: &[&[u8]]) -> (Vec<String>, Result<(), SseError>) {
        let mut d = SseDecoder::new(limit);
        let mut out = Vec::new();
        for c in chunks {
            if let Err(e) = d.feed(c, |e| {
                out.push(e.to_string());
                ControlFlow::Continue(())
            }) {
                return (out, Err(e));
            }
        }
        (out, Ok(()))
    }

    #[test]
    fn the_format_s_line_ends_fields_and_comments() {
        let s: &[u8] = b"\xef\xbb\xbfdata: a\r\n\r\n: comment\ndata:b\ndata:  c\nevent: x\nid: 7\n\ndata\n\n\
            data: d\r\rdata: e\n\nretry: 5\n\ndata: cut";
        let (ev, end) = events(1 << 20, &[s]);
        assert_eq!(end, Ok(()));
        assert_eq!(ev, ["a", "b\n c", "", "d", "e"]);
        // The same bytes in every split into two chunks, and byte by byte.
        for i in 0..=s.len() {
            assert_eq!(events(1 << 20, &[&s[..i], &s[i..]]).0, ev, "split at {i}");
        }
        let bytes: Vec<&[u8]> = s.chunks(1).collect();
        assert_eq!(events(1 << 20, &bytes).0, ev);
        // CR then LF across a chunk boundary is one line end, not two, an empty chunk between.
        assert_eq!(events(64, &[b"data: x\r", b"\ndata: y\n\n"]).0, ["x\ny"]);
        assert_eq!(events(64, &[b"data: x\r", b"", b"\ndata: y\n\n"]).0, ["x\ny"]);
    }

    #[test]
    fn an_event_over_the_limit_fails_however_it_arrives() {
        let limit = 100;
        let long = format!("data: {}\n\n", "x".repeat(limit));
        // In one chunk, line by line, and byte by byte.
        assert_eq!(events(limit, &[long.as_bytes()]).1, Err(SseError::TooLong { limit }));
        let bytes: Vec<&[u8]> = long.as_bytes().chunks(1).collect();
        assert_eq!(events(limit, &bytes).1, Err(SseError::TooLong { limit }));
        // Many short data lines of one event add up.
        let many = "data: xxxxxxxxx\n".repeat(20) + "\n";
        assert_eq!(events(limit, &[many.as_bytes()]).1, Err(SseError::TooLong { limit }));
        // A comment line counts as well (padding is bytes held all the same).
        assert_eq!(
            events(limit, &[format!(":{}\n", "p".repeat(limit)).as_bytes()]).1,
            Err(SseError::TooLong { limit })
        );
        // Just under the limit, and many events each under it: fine.
        let fits = format!("data: {}\n\n", "x".repeat(limit - 10)).repeat(50);
        let (ev, end) = events(limit, &[fits.as_bytes()]);
        assert_eq!((ev.len(), end), (50, Ok(())));
        assert_eq!(SseError::TooLong { limit: 4 << 20 }.to_string(), "SSE event longer than 4 MiB");
        assert_eq!(events(limit, &[b"data: \xff\n\n"]).1, Err(SseError::NotUtf8));
    }

    #[test]
    fn each_byte_is_searched_once_however_a_long_line_is_split() {
        // 8 MiB in one line, fed in 1 KiB chunks: a parser that searches its whole buffer on
        // every chunk looks at 8 MiB × 8192 / 2 bytes; this one at 8 MiB.
        let n = 8 << 20;
        let mut d = SseDecoder::new(16 << 20);
        let mut got = 0;
        let line = [b"data: ".as_slice(), &vec![b'x'; n], b"\n\n"].concat();
        for c in line.chunks(1024) {
            let flow = d.feed(c, |e| {
                got = e.len();
                ControlFlow::Continue(())
            });
            assert_eq!(flow, Ok(ControlFlow::Continue(())));
        }
        assert_eq!(got, n);
        assert_eq!(d.scanned, line.len());
        // Breaking stops at that event: the rest of the chunk is not read.
        let mut d = SseDecoder::new(64);
        let mut seen = Vec::new();
        let flow = d
            .feed(b"data: 1\n\ndata: 2\n\ndata: 3\n\n", |e| {
                seen.push(e.to_string());
                if e == "2" {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .unwrap();
        assert_eq!((flow, seen), (ControlFlow::Break(()), vec!["1".to_string(), "2".to_string()]));
    }

    #[test]
    fn sizes_read_in_words() {
        assert_eq!((size(4 << 20), size(64 << 10), size(100)), ("4 MiB".into(), "64 KiB".into(), "100 bytes".into()));
    }
}
