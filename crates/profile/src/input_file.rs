//! Reading files a user names: refuse what is not a regular file before
//! reading a byte, and cap what is read at a size the kind of input can
//! plausibly have.
//!
//! A FIFO blocks `open(2)` and `read(2)` forever and `/dev/zero` never ends, so
//! every reader of a user path goes through [`open_regular`]: it opens with
//! `O_NONBLOCK` (a FIFO then opens at once instead of waiting for a writer),
//! checks the *opened* file with `fstat` (no window between check and use), and
//! only then hands the file out. [`read_capped`] adds the size cap, checked
//! against the size `fstat` reports and again while reading (files under /proc
//! report size 0, and files grow).

use std::fs::{File, Metadata};
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

const MIB: u64 = 1 << 20;

/// What kind of input a file is, for its size cap and for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// A PyTorch profiler (Kineto) trace JSON, after xz decompression.
    KinetoTrace,
    /// An Nsight Compute CSV page.
    NcuCsv,
    /// An Nsight Systems SQLite export or `.nsys-rep` report.
    NsightExport,
    /// The aisp config file.
    ConfigFile,
    /// A saved `aisp_benchmark_run` answer (`run.json`).
    SavedRun,
}

impl InputKind {
    /// Words for messages.
    pub fn what(self) -> &'static str {
        match self {
            InputKind::KinetoTrace => "a Kineto trace JSON",
            InputKind::NcuCsv => "an Nsight Compute CSV page",
            InputKind::NsightExport => "an Nsight Systems export",
            InputKind::ConfigFile => "the config file",
            InputKind::SavedRun => "a saved benchmark run (run.json)",
        }
    }

    /// The config key (under `[limits]`) and environment variable that set the cap.
    pub fn setting(self) -> (&'static str, &'static str) {
        match self {
            InputKind::KinetoTrace => ("limits.kineto_trace_mib", "AISP_MAX_KINETO_TRACE_MIB"),
            InputKind::NcuCsv => ("limits.ncu_csv_mib", "AISP_MAX_NCU_CSV_MIB"),
            InputKind::NsightExport => ("limits.nsight_export_mib", "AISP_MAX_NSIGHT_EXPORT_MIB"),
            InputKind::ConfigFile | InputKind::SavedRun => ("(fixed)", "(fixed)"),
        }
    }
}

/// Size caps per input kind, in bytes (config `[limits]`, in MiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputLimits {
    /// Kineto trace JSON, decompressed (parsed in memory: about 1.5x its size).
    pub kineto_trace_bytes: u64,
    /// One Nsight Compute CSV page (held in memory as text).
    pub ncu_csv_bytes: u64,
    /// An Nsight Systems export (read page by page, never whole).
    pub nsight_export_bytes: u64,
}

impl Default for InputLimits {
    fn default() -> Self {
        InputLimits {
            kineto_trace_bytes: 2048 * MIB,
            ncu_csv_bytes: 512 * MIB,
            nsight_export_bytes: 256 * 1024 * MIB,
        }
    }
}

impl InputLimits {
    pub fn for_kind(&self, kind: InputKind) -> u64 {
        match kind {
            InputKind::KinetoTrace => self.kineto_trace_bytes,
            InputKind::NcuCsv => self.ncu_csv_bytes,
            InputKind::NsightExport => self.nsight_export_bytes,
            InputKind::ConfigFile => MIB,
            InputKind::SavedRun => 64 * MIB,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InputFileError {
    #[error("{path} does not exist")]
    NotFound { path: PathBuf },
    #[error("{path} is {what}, not a regular file")]
    NotRegular { path: PathBuf, what: &'static str },
    #[error("{path} is a symbolic link that loops (too many levels of symbolic links)")]
    SymlinkLoop { path: PathBuf },
    #[error("permission denied reading {path}")]
    PermissionDenied { path: PathBuf },
    #[error("the path is too long ({len} bytes)")]
    NameTooLong { len: usize },
    #[error(
        "{path} is larger than the {limit_mib} MiB allowed for {what}{}",
        size.map(|s| format!(" ({} MiB)", s.div_ceil(MIB))).unwrap_or_default()
    )]
    TooLarge {
        path: PathBuf,
        kind: InputKind,
        size: Option<u64>,
        limit_mib: u64,
        what: &'static str,
    },
    #[error("{path} is not {what}: it starts with {start}")]
    WrongContent {
        path: PathBuf,
        what: &'static str,
        start: String,
    },
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl InputFileError {
    fn from_open(path: &Path, e: std::io::Error) -> InputFileError {
        let path = path.to_path_buf();
        match e.raw_os_error() {
            Some(libc::ENOENT) => InputFileError::NotFound { path },
            Some(libc::ELOOP) => InputFileError::SymlinkLoop { path },
            Some(libc::EACCES) | Some(libc::EPERM) => InputFileError::PermissionDenied { path },
            Some(libc::ENAMETOOLONG) => InputFileError::NameTooLong {
                len: path.as_os_str().len(),
            },
            Some(libc::ENOTDIR) => InputFileError::NotFound { path },
            _ => InputFileError::Io { path, source: e },
        }
    }

    fn too_large(path: &Path, kind: InputKind, limit: u64, size: Option<u64>) -> InputFileError {
        InputFileError::TooLarge {
            path: path.to_path_buf(),
            kind,
            size,
            limit_mib: limit / MIB,
            what: kind.what(),
        }
    }
}

/// Name what a non-regular file is.
fn kind_of(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// Open `path` for reading if, and only if, it is a regular file. Never
/// blocks on a FIFO. The returned file is in blocking mode.
pub fn open_regular(path: &Path) -> Result<(File, Metadata), InputFileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| InputFileError::from_open(path, e))?;
    let meta = file.metadata().map_err(|source| InputFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if let Some(what) = kind_of(&meta) {
        return Err(InputFileError::NotRegular {
            path: path.to_path_buf(),
            what,
        });
    }
    // O_NONBLOCK means nothing for regular files, but clear it so that the
    // file behaves as any other if it is handed on.
    {
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        // SAFETY: fcntl on a descriptor we own; failure leaves the flag set, which is harmless here.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
            }
        }
    }
    Ok((file, meta))
}

/// Check that `path` is a regular file of at most the cap for `kind`,
/// without reading it (for files handed to SQLite or to another program).
pub fn check_regular(
    path: &Path,
    kind: InputKind,
    limits: &InputLimits,
) -> Result<Metadata, InputFileError> {
    let (_, meta) = open_regular(path)?;
    let limit = limits.for_kind(kind);
    if meta.len() > limit {
        return Err(InputFileError::too_large(
            path,
            kind,
            limit,
            Some(meta.len()),
        ));
    }
    Ok(meta)
}

/// Read all of a regular file of at most the cap for `kind`.
pub fn read_capped(
    path: &Path,
    kind: InputKind,
    limits: &InputLimits,
) -> Result<Vec<u8>, InputFileError> {
    read_capped_inner(path, kind, limits, None)
}

/// What a file must look like before it is read whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniff {
    /// JSON (a Kineto trace): the first byte after a UTF-8 BOM and white
    /// space is `{` or `[`; xz and gzip are recognised by their magic numbers
    /// (xz is checked again once decompressed, see [`CappedBuffer::json`]).
    Json,
    /// Text (a log, a CSV page): no NUL byte in the first 4 KiB (xz by magic number).
    Text,
}

const XZ_MAGIC: [u8; 6] = [0xFD, b'7', b'z', b'X', b'Z', 0x00];
const GZIP_MAGIC: [u8; 2] = [0x1F, 0x8B];

/// The first bytes of `head` as a short, printable description.
fn describe_start(head: &[u8]) -> String {
    let shown: String = String::from_utf8_lossy(&head[..head.len().min(16)])
        .chars()
        .map(|c| if c.is_control() { '·' } else { c })
        .collect();
    if head.is_empty() {
        "nothing (it is empty)".into()
    } else {
        format!("`{shown}` (byte 0 is 0x{:02x})", head[0])
    }
}

/// Whether `head` (a file's first bytes) can start `sniff`'s kind of content.
fn sniff_ok(head: &[u8], sniff: Sniff) -> bool {
    if head.starts_with(&XZ_MAGIC) {
        return true;
    }
    match sniff {
        Sniff::Json => {
            if head.starts_with(&GZIP_MAGIC) {
                return true; // refused with its own message by the trace reader
            }
            let body = head
                .strip_prefix(b"\xEF\xBB\xBF".as_slice())
                .unwrap_or(head);
            // Only white space so far (or nothing): the parser says what is wrong.
            body.iter()
                .find(|b| !b.is_ascii_whitespace())
                .is_none_or(|b| *b == b'{' || *b == b'[')
        }
        Sniff::Text => !head.contains(&0),
    }
}

/// Read all of a regular file of at most the cap for `kind`, after checking
/// from its first 4 KiB that it can be `sniff`'s kind of content: a
/// gigabyte that is not JSON is refused without reading it.
pub fn read_capped_sniffed(
    path: &Path,
    kind: InputKind,
    limits: &InputLimits,
    sniff: Sniff,
) -> Result<Vec<u8>, InputFileError> {
    read_capped_inner(path, kind, limits, Some(sniff))
}

fn read_capped_inner(
    path: &Path,
    kind: InputKind,
    limits: &InputLimits,
    sniff: Option<Sniff>,
) -> Result<Vec<u8>, InputFileError> {
    let limit = limits.for_kind(kind);
    let (file, meta) = open_regular(path)?;
    if meta.len() > limit {
        return Err(InputFileError::too_large(
            path,
            kind,
            limit,
            Some(meta.len()),
        ));
    }
    if let Some(sniff) = sniff {
        check_start(&file, path, sniff)?;
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|source| InputFileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if buf.len() as u64 > limit {
        return Err(InputFileError::too_large(path, kind, limit, None));
    }
    Ok(buf)
}

/// Refuse `file` unless its first 4 KiB can start `sniff`'s kind of content.
fn check_start(file: &File, path: &Path, sniff: Sniff) -> Result<(), InputFileError> {
    use std::os::unix::fs::FileExt;
    let mut head = vec![0u8; 4096];
    let mut got = 0;
    while got < head.len() {
        match file.read_at(&mut head[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(InputFileError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
    }
    head.truncate(got);
    if sniff_ok(&head, sniff) {
        return Ok(());
    }
    Err(InputFileError::WrongContent {
        path: path.to_path_buf(),
        what: match sniff {
            Sniff::Json => "JSON (nor xz-compressed JSON)",
            Sniff::Text => "text",
        },
        start: describe_start(&head),
    })
}

/// Read a capped file as UTF-8 text.
pub fn read_text_capped(
    path: &Path,
    kind: InputKind,
    limits: &InputLimits,
) -> Result<String, InputFileError> {
    let bytes = read_capped(path, kind, limits)?;
    String::from_utf8(bytes).map_err(|e| InputFileError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("it is not UTF-8 text ({e})"),
        ),
    })
}

/// A `Write` sink that refuses to grow past a cap (decompressing into it
/// stops a small .xz from expanding without bound).
#[derive(Debug)]
pub struct CappedBuffer {
    pub buf: Vec<u8>,
    limit: u64,
    pub exceeded: bool,
    /// Check that the content starts like `sniff` says (decompressing stops at once if not).
    sniff: Option<Sniff>,
    /// Set when the content does not start as expected.
    pub wrong_start: Option<String>,
}

impl CappedBuffer {
    pub fn new(limit: u64) -> CappedBuffer {
        CappedBuffer {
            buf: Vec::new(),
            limit,
            exceeded: false,
            sniff: None,
            wrong_start: None,
        }
    }

    /// A buffer that refuses content not starting like JSON (decompressed xz).
    pub fn json(limit: u64) -> CappedBuffer {
        CappedBuffer {
            sniff: Some(Sniff::Json),
            ..CappedBuffer::new(limit)
        }
    }

    /// The error to report when the content did not start as expected.
    pub fn wrong_start_error(&self, path: &Path) -> Option<InputFileError> {
        self.wrong_start
            .as_ref()
            .map(|start| InputFileError::WrongContent {
                path: path.to_path_buf(),
                what: "JSON (after xz decompression)",
                start: start.clone(),
            })
    }

    /// The error to report when the cap was hit.
    pub fn error(&self, path: &Path, kind: InputKind) -> InputFileError {
        InputFileError::too_large(path, kind, self.limit, None)
    }
}

impl Write for CappedBuffer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if let Some(sniff) = self.sniff {
            // Undecided while only white space arrived: the buffer is small here.
            let mut head = self.buf.clone();
            head.extend_from_slice(&data[..data.len().min(4096)]);
            let body = head
                .strip_prefix(b"\xEF\xBB\xBF".as_slice())
                .unwrap_or(&head);
            if body.iter().any(|b| !b.is_ascii_whitespace()) || head.len() >= 4096 {
                self.sniff = None;
                // xz inside xz is not a trace either.
                if !sniff_ok(&head, sniff) || head.starts_with(&XZ_MAGIC) {
                    self.wrong_start = Some(describe_start(&head));
                    return Err(std::io::Error::other("not the expected content"));
                }
            }
        }
        if self.buf.len() as u64 + data.len() as u64 > self.limit {
            self.exceeded = true;
            return Err(std::io::Error::other("size cap exceeded"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Read a capped file as UTF-8 text, decompressing it first when it is xz
/// (by magic number); the decompressed text is capped at the same limit.
pub fn read_text_capped_xz(
    path: &Path,
    kind: InputKind,
    limits: &InputLimits,
) -> Result<String, InputFileError> {
    let bytes = read_capped_sniffed(path, kind, limits, Sniff::Text)?;
    let bytes = if bytes.starts_with(&XZ_MAGIC) {
        let mut out = CappedBuffer::new(limits.for_kind(kind));
        if let Err(e) = lzma_rs::xz_decompress(&mut bytes.as_slice(), &mut out) {
            if out.exceeded {
                return Err(out.error(path, kind));
            }
            return Err(InputFileError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::other(format!("not valid xz: {e}")),
            });
        }
        out.buf
    } else {
        bytes
    };
    String::from_utf8(bytes).map_err(|e| InputFileError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

/// Whether anything is at `path`, a dangling or looping link included
/// (`Path::exists` says false for a link loop, which then reads as "missing").
pub fn something_at(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_sniffed_before_being_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let limits = InputLimits::default();
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        for ok in [
            &b"{\"traceEvents\": []}"[..],
            b"  \n[1]",
            b"\xEF\xBB\xBF{}",
            b"",
            b"\xFD7zXZ\x00rest",
        ] {
            let p = write("ok.json", ok);
            assert!(
                read_capped_sniffed(&p, InputKind::KinetoTrace, &limits, Sniff::Json).is_ok(),
                "{ok:?}"
            );
        }
        for bad in [&b"x{}"[..], b"\x00\x00", b"<html>", b"PK\x03\x04"] {
            let p = write("bad.json", bad);
            let err =
                read_capped_sniffed(&p, InputKind::KinetoTrace, &limits, Sniff::Json).unwrap_err();
            assert!(
                matches!(err, InputFileError::WrongContent { .. }),
                "{bad:?}: {err:?}"
            );
            assert!(err.to_string().contains("is not JSON"), "{err}");
        }
        let p = write("log.txt", b"binary\x00junk");
        assert!(read_text_capped_xz(&p, InputKind::NcuCsv, &limits).is_err());
        let p = write("log.txt", b"[__graph_breaks] text");
        assert!(read_text_capped_xz(&p, InputKind::NcuCsv, &limits).is_ok());
        // Decompressed content is checked as it arrives.
        let mut b = CappedBuffer::json(1 << 20);
        assert!(b.write_all(b"   ").is_ok());
        assert!(b.write_all(b"nope").is_err());
        assert!(b.wrong_start_error(Path::new("t.json.xz")).is_some());
        let mut b = CappedBuffer::json(1 << 20);
        assert!(b.write_all(b"{\"a\": 1}").is_ok() && b.wrong_start.is_none());
    }

    #[test]
    fn a_capped_buffer_stops_growing() {
        let mut b = CappedBuffer::new(10);
        assert!(b.write_all(b"0123456789").is_ok());
        assert!(b.write_all(b"x").is_err());
        assert!(b.exceeded);
        assert_eq!(b.buf.len(), 10);
    }
}
