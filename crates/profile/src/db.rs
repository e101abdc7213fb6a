//! Opening an export: a header check before SQLite sees the file, then a
//! read-only connection (`mode=ro`), and the file identity used by caches.

use std::io::Read;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use sha2::{Digest, Sha256};

use super::error::{ProfileError, Result};

/// How many leading bytes identify a file's content for caching: the SQLite
/// header page(s) change on every write (change counter, page count, schema
/// cookie), so together with size and mtime they pin one version of a file.
const HEADER_BYTES: usize = 64 * 1024;

/// A file's identity: size, modification time and a hash of its first 64 KiB.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    /// Device and inode: two paths to one file share them (the in-memory
    /// table cache keys on them; the answer cache does not need them).
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    /// First 16 hex digits of the SHA-256 of the header pages.
    pub header_hash: String,
}

impl FileIdentity {
    /// `<size>-<mtime_ns>-<header-hash>`: a cache key (also a file name).
    pub fn key(&self) -> String {
        format!("{}-{}-{}", self.size, self.mtime_ns, self.header_hash)
    }

    /// Compute the identity of `path` (reads at most 64 KiB).
    pub fn of(path: &Path) -> Result<FileIdentity> {
        let (identity, _) = identity_and_header(path)?;
        Ok(identity)
    }
}

fn identity_and_header(path: &Path) -> Result<(FileIdentity, Vec<u8>)> {
    // Opened without blocking and checked with fstat: a FIFO or device named
    // as a profile is refused before anything reads it.
    let (file, meta) = crate::input_file::open_regular(path)?;
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0);
    let mut head = Vec::with_capacity(HEADER_BYTES.min(meta.len() as usize));
    file.take(HEADER_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|source| crate::input_file::InputFileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    let digest = Sha256::digest(&head);
    let header_hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    Ok((
        FileIdentity {
            dev: std::os::unix::fs::MetadataExt::dev(&meta),
            ino: std::os::unix::fs::MetadataExt::ino(&meta),
            size: meta.len(),
            mtime_ns,
            header_hash,
        },
        head,
    ))
}

/// Check that `head` starts with a sane SQLite header and that the file is as
/// long as the header says.
pub fn check_header(path: &Path, head: &[u8], file_size: u64) -> Result<()> {
    if file_size == 0 {
        return Err(ProfileError::invalid(path, "the file is empty"));
    }
    if head.len() < 100 || &head[..16] != b"SQLite format 3\0" {
        return Err(ProfileError::invalid(
            path,
            "it is not an SQLite database (no `SQLite format 3` header); \
             a .qdrep/.nsys-rep report must be exported first",
        ));
    }
    let raw_page = u16::from_be_bytes([head[16], head[17]]) as u32;
    let page_size = if raw_page == 1 { 65536 } else { raw_page };
    if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(ProfileError::invalid(
            path,
            format!("the SQLite header is corrupt (page size {page_size})"),
        ));
    }
    let be32 = |o: usize| u32::from_be_bytes([head[o], head[o + 1], head[o + 2], head[o + 3]]);
    let change_counter = be32(24);
    let in_header_pages = be32(28);
    let valid_for = be32(92);
    let page_count =
        (in_header_pages > 0 && valid_for == change_counter).then_some(in_header_pages);
    if let Some(pages) = page_count {
        let expected = pages as u64 * page_size as u64;
        if file_size < expected {
            return Err(ProfileError::invalid(
                path,
                format!(
                    "the file is truncated: the header promises {expected} bytes ({pages} pages of {page_size}), \
                     the file has {file_size}"
                ),
            ));
        }
    }
    if !file_size.is_multiple_of(page_size as u64) {
        return Err(ProfileError::invalid(
            path,
            format!(
                "the file is truncated: {file_size} bytes is not a whole number of {page_size}-byte pages"
            ),
        ));
    }
    Ok(())
}

/// An opened export: the read-only connection and the file's identity.
pub struct OpenedDb {
    pub conn: Connection,
    pub identity: FileIdentity,
}

/// Percent-encode a path for an SQLite `file:` URI.
fn uri_for(path: &Path) -> String {
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_encoded_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(b as char)
            }
            _ => uri.push_str(&format!("%{b:02X}")),
        }
    }
    uri.push_str("?mode=ro");
    uri
}

/// Open `path` read-only after checking its header. Never writes to it.
pub fn open_readonly(path: &Path, max_bytes: u64) -> Result<OpenedDb> {
    let (identity, head) = identity_and_header(path)?;
    if identity.size > max_bytes {
        return Err(crate::input_file::InputFileError::TooLarge {
            path: path.to_path_buf(),
            kind: crate::input_file::InputKind::NsightExport,
            size: Some(identity.size),
            limit_mib: max_bytes >> 20,
            what: crate::input_file::InputKind::NsightExport.what(),
        }
        .into());
    }
    check_header(path, &head, identity.size)?;
    let conn = Connection::open_with_flags(
        uri_for(path),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| ProfileError::invalid(path, format!("SQLite cannot open it: {e}")))?;
    // Exports are read once, front to back: a larger page cache and memory-mapped
    // reads avoid copying pages through the VFS (the mapping is read-only).
    let _ = conn.pragma_update(None, "cache_size", -16384i64);
    let _ = conn.pragma_update(None, "temp_store", "MEMORY");
    // Reading the schema is the first real access: corruption shows up here.
    conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })
    .map_err(|e| ProfileError::invalid(path, format!("SQLite cannot read it: {e}")))?;
    Ok(OpenedDb { conn, identity })
}

/// Whether the export has table `t` (exports differ by what the capture traced).
pub fn has_table(conn: &Connection, t: &str) -> rusqlite::Result<bool> {
    use rusqlite::OptionalExtension;
    conn.query_row(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?1",
        [t],
        |_| Ok(()),
    )
    .optional()
    .map(|r| r.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_escapes_everything_but_safe_characters() {
        assert_eq!(
            uri_for(Path::new("/a b/c?.sqlite")),
            "file:/a%20b/c%3F.sqlite?mode=ro"
        );
    }

    #[test]
    fn header_checks_reject_garbage_and_truncation() {
        let p = Path::new("x");
        assert!(check_header(p, b"", 0).is_err());
        assert!(check_header(p, &[0u8; 100], 4096).is_err());
        let mut h = vec![0u8; 100];
        h[..16].copy_from_slice(b"SQLite format 3\0");
        h[16..18].copy_from_slice(&4096u16.to_be_bytes());
        h[28..32].copy_from_slice(&10u32.to_be_bytes());
        // valid-for (92) == change counter (24) == 0: the page count is trusted.
        let err = check_header(p, &h, 4096 * 5).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{err}");
        assert!(check_header(p, &h, 4096 * 10).is_ok());
        assert!(check_header(p, &h, 4096 * 10 + 7).is_err());
    }
}
