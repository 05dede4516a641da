//! Reading the user's input files within bounds, so a wrong path (a 1 GB log given as a
//! trace, a disk image given as a scenario) ends in an error naming the file and the bound
//! at once, not in gigabytes read and parsed first.
//!
//! - [`read_to_string`]: small files read whole (scenarios, catalogs, profiles): refused by
//!   size before a byte is read;
//! - [`for_each_line`]: line-oriented files (JSONL traces and datasets, a run's records and
//!   steps) read one bounded line at a time, so a parse error on line 1 is reported after
//!   reading line 1, and a file with no line end (`/dev/zero` given as a records file) is
//!   refused at its bound;
//! - [`LineBounded`]: any other reader of lines (CSV) refused once a line passes its bound.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

/// Files read whole: scenarios, catalogs, hardware tables, profiles, configs.
pub const MAX_WHOLE_FILE: u64 = 64 << 20;
/// One line of a JSONL file (a ShareGPT turn can be long; no real one is near this).
pub const MAX_LINE: usize = 16 << 20;

fn too_big(what: &str, len: u64, max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the file is {} bytes; a {what} may be at most {} MiB", len, max >> 20),
    )
}

/// Reads `path` whole as UTF-8 text when it is at most `max` bytes; `what` names the kind of
/// file in the error ("scenario file").
pub fn read_to_string(path: &Path, what: &str, max: u64) -> io::Result<String> {
    String::from_utf8(read_within(path, what, max)?).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Reads `path` whole as bytes when it is at most `max` bytes: refused by its size before a
/// byte is read, and (a file that grows while read, a device that reports no length) once
/// more than `max` came.
pub fn read_within(path: &Path, what: &str, max: u64) -> io::Result<Vec<u8>> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    if len > max {
        return Err(too_big(what, len, max));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    let read = file.take(max + 1).read_to_end(&mut bytes)?;
    if read as u64 > max {
        return Err(too_big(what, read as u64, max));
    }
    Ok(bytes)
}

/// A small file of a model or tokenizer (`config.json`, `tokenizer_config.json`, a chat
/// template) read whole within [`MAX_WHOLE_FILE`]: a path linked to a device or a huge file
/// is refused at the bound.
pub fn read_text(path: impl AsRef<Path>) -> io::Result<String> {
    read_to_string(path.as_ref(), "model or tokenizer file", MAX_WHOLE_FILE)
}

/// [`read_text`] as bytes (a `tokenizer.json`, which its parser takes as bytes; a PEM file).
pub fn read_bytes(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    read_within(path.as_ref(), "file", MAX_WHOLE_FILE)
}

/// Why a line-by-line read stopped: the file could not be read, or `f` refused a line.
#[derive(Debug)]
pub enum LineError<E> {
    Io(io::Error),
    /// Line `line` (1-based) is longer than [`MAX_LINE`].
    TooLong {
        line: usize,
    },
    /// A line that is not UTF-8.
    NotUtf8 {
        line: usize,
    },
    Parse(E),
}

impl<E: std::fmt::Display> std::fmt::Display for LineError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::Io(e) => write!(f, "{e}"),
            LineError::TooLong { line } => write!(f, "line {line} is longer than {} MiB", MAX_LINE >> 20),
            LineError::NotUtf8 { line } => write!(f, "line {line} is not UTF-8"),
            LineError::Parse(e) => write!(f, "{e}"),
        }
    }
}

/// Calls `f(line_number, line)` for every line of `reader` that is not blank, one bounded
/// line in memory at a time; stops at the first error.
pub fn for_each_line<E>(
    reader: impl Read,
    mut f: impl FnMut(usize, &str) -> Result<(), E>,
) -> Result<(), LineError<E>> {
    for_each_line_ended(reader, |i, line, _| f(i, line))
}

/// [`for_each_line`], also telling `f` whether the line ended with a line feed (the last line
/// of a file cut short by a killed writer does not).
pub fn for_each_line_ended<E>(
    reader: impl Read,
    mut f: impl FnMut(usize, &str, bool) -> Result<(), E>,
) -> Result<(), LineError<E>> {
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    for line in 1.. {
        buf.clear();
        let n = (&mut reader).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut buf).map_err(LineError::Io)?;
        if n == 0 {
            return Ok(());
        }
        if buf.len() > MAX_LINE {
            return Err(LineError::TooLong { line });
        }
        let ended = buf.last() == Some(&b'\n');
        let text = std::str::from_utf8(&buf).map_err(|_| LineError::NotUtf8 { line })?;
        if !text.trim().is_empty() {
            f(line, text.trim_end_matches(['\n', '\r']), ended).map_err(LineError::Parse)?;
        }
    }
    Ok(())
}

/// A reader that fails (`InvalidData`) once a line runs past [`MAX_LINE`] bytes without a
/// line feed, for parsers that read lines themselves (the CSV reader), so an endless line
/// cannot grow their buffer without bound.
pub struct LineBounded<R> {
    inner: R,
    /// Bytes since the last line feed.
    run: usize,
}

impl<R: Read> LineBounded<R> {
    pub fn new(inner: R) -> Self {
        LineBounded { inner, run: 0 }
    }
}

impl<R: Read> Read for LineBounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in &buf[..n] {
            self.run = if b == b'\n' { 0 } else { self.run + 1 };
            if self.run > MAX_LINE {
                let why = format!("a line longer than {} MiB", MAX_LINE >> 20);
                return Err(io::Error::new(io::ErrorKind::InvalidData, why));
            }
        }
        Ok(n)
    }
}

/// The first bytes of `path` (at most `n`), to choose a format by.
pub fn head(path: &Path, n: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(n);
    File::open(path)?.take(n as u64).read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("goodput-input-{}-{name}", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn a_file_over_the_bound_is_refused_by_its_size() {
        let p = file("big", &[b'a'; 2048]);
        let err = read_to_string(&p, "scenario file", 1024).unwrap_err().to_string();
        assert!(err.contains("2048 bytes") && err.contains("scenario file"), "{err}");
        assert_eq!(read_to_string(&p, "x", 4096).unwrap().len(), 2048);
    }

    #[test]
    fn lines_stop_at_the_first_refused_one() {
        let mut seen = Vec::new();
        let err = for_each_line(&b"a\n\n  \nb\r\nc\n"[..], |i, l| {
            seen.push((i, l.to_string()));
            if l == "b" {
                Err("no b")
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert_eq!(seen, [(1, "a".to_string()), (4, "b".to_string())]);
        assert_eq!(err.to_string(), "no b");
    }

    #[test]
    fn lines_say_whether_they_ended() {
        let mut seen = Vec::new();
        for_each_line_ended(&b"a\nb"[..], |i, l, ended| {
            seen.push((i, l.to_string(), ended));
            Ok::<(), String>(())
        })
        .unwrap();
        assert_eq!(seen, [(1, "a".into(), true), (2, "b".into(), false)]);
    }

    #[test]
    fn a_line_bounded_reader_refuses_an_endless_line() {
        let mut ok = Vec::new();
        LineBounded::new(&b"x,y\n1,2\n"[..]).read_to_end(&mut ok).unwrap();
        assert_eq!(ok, b"x,y\n1,2\n");
        let endless = std::io::repeat(0).take(MAX_LINE as u64 + 4096);
        let err = LineBounded::new(endless).read_to_end(&mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("longer than 16 MiB"), "{err}");
    }

    #[test]
    fn an_endless_line_is_refused_after_its_bound() {
        let long = vec![b'x'; MAX_LINE + 10];
        let err = for_each_line(&long[..], |_, _| Ok::<(), String>(())).unwrap_err();
        assert!(matches!(err, LineError::TooLong { line: 1 }), "{err}");
        let bad = for_each_line(&b"ok\n\xff\xfe\n"[..], |_, _| Ok::<(), String>(())).unwrap_err();
        assert!(matches!(bad, LineError::NotUtf8 { line: 2 }));
    }
}
