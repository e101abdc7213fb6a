//! Writing files without surprises: no link followed at the final name or at
//! the temporary one, no existing file replaced unless asked, nothing half
//! written left under the final name, no debris left on failure.
//!
//! Every file is first written to a temporary file created *in the target
//! folder* with `O_CREAT | O_EXCL | O_NOFOLLOW` and an unpredictable name
//! (a planted link or file at a guessable name cannot be written through),
//! synced, and then renamed into place: with `renameat2(RENAME_NOREPLACE)`
//! when the caller did not ask to replace (`link` + `unlink` where the file
//! system lacks it), so an existing file, a dangling link included, is never
//! replaced by accident; with a plain rename when replacing, after checking
//! that the final name is not a link or something other than a regular file
//! (a rename replaces a link itself, it never writes through it). The
//! temporary file is removed on any failure, and when a [`PendingFile`] is
//! dropped without [`PendingFile::commit`].
//!
//! Folders are handles ([`Dir`], an `O_DIRECTORY` descriptor), so a file is
//! created in the folder that was checked, whatever happens to its path
//! afterwards. [`Dir::open_beneath`] walks a relative path below a folder one
//! component at a time with `O_NOFOLLOW` (creating missing folders), refusing
//! `..`, absolute parts and links: the way to keep writes inside a root.
//!
//! Self-contained: std, libc and thiserror, and [`crate::random_u64`] for
//! the temporary names.

use std::borrow::Cow;
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Why a write was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum SafeWriteError {
    #[error("{0} exists")]
    Exists(PathBuf),
    #[error("{0} is a symbolic link; aisp does not write through or replace links")]
    Symlink(PathBuf),
    #[error("{path} is {what}, not a regular file")]
    NotRegular { path: PathBuf, what: &'static str },
    #[error("{path} is not a plain path below {root}: {why}")]
    Escapes {
        path: PathBuf,
        root: PathBuf,
        why: &'static str,
    },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl SafeWriteError {
    fn io(what: &'static str, path: &Path, source: std::io::Error) -> SafeWriteError {
        SafeWriteError::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }

    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            SafeWriteError::Exists(p) | SafeWriteError::Symlink(p) => p,
            SafeWriteError::NotRegular { path, .. }
            | SafeWriteError::Escapes { path, .. }
            | SafeWriteError::Io { path, .. } => path,
        }
    }
}

pub type Result<T> = std::result::Result<T, SafeWriteError>;

fn cstr(name: &OsStr) -> std::io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

fn last_err() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// A folder, held open: files are created in it by descriptor.
#[derive(Debug, Clone)]
pub struct Dir {
    fd: Arc<OwnedFd>,
    path: PathBuf,
}

/// What is at a name in a folder, without following a link.
enum Entry {
    Missing,
    Regular,
    Symlink,
    Other(&'static str),
}

impl Dir {
    /// Open the folder at `path` (links in the path are followed: the caller
    /// named it), creating it and its parents when `create`.
    pub fn open(path: &Path, create: bool) -> Result<Dir> {
        if create {
            std::fs::create_dir_all(path)
                .map_err(|e| SafeWriteError::io("cannot create the folder", path, e))?;
        }
        let c = cstr(path.as_os_str())
            .map_err(|e| SafeWriteError::io("cannot open the folder", path, e))?;
        // SAFETY: a valid NUL-terminated path; the descriptor is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(SafeWriteError::io(
                "cannot open the folder",
                path,
                last_err(),
            ));
        }
        Ok(Dir {
            // SAFETY: `fd` is a fresh descriptor we own.
            fd: Arc::new(unsafe { OwnedFd::from_raw_fd(fd) }),
            path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        })
    }

    /// The folder `rel` below this one: every component a plain name (no
    /// `..`, no root, no link), each opened with `O_NOFOLLOW`; missing ones
    /// are created when `create`.
    pub fn open_beneath(&self, rel: &Path, create: bool) -> Result<Dir> {
        let mut dir = self.clone();
        for c in rel.components() {
            match c {
                Component::CurDir => {}
                Component::Normal(name) => dir = dir.subdir(name, create)?,
                Component::ParentDir => {
                    return Err(SafeWriteError::Escapes {
                        path: self.path.join(rel),
                        root: self.path.clone(),
                        why: "it contains `..`",
                    });
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(SafeWriteError::Escapes {
                        path: rel.to_path_buf(),
                        root: self.path.clone(),
                        why: "it is absolute",
                    });
                }
            }
        }
        Ok(dir)
    }

    /// The folder `name` in this one, never through a link; created when missing and `create`.
    pub fn subdir(&self, name: &OsStr, create: bool) -> Result<Dir> {
        let path = self.path.join(name);
        let c = cstr(name).map_err(|e| SafeWriteError::io("cannot open the folder", &path, e))?;
        let open = || {
            // SAFETY: a valid NUL-terminated name relative to a descriptor we hold.
            unsafe {
                libc::openat(
                    self.raw(),
                    c.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                )
            }
        };
        let mut fd = open();
        if fd < 0 && create && last_err().raw_os_error() == Some(libc::ENOENT) {
            // SAFETY: as above.
            let rc = unsafe { libc::mkdirat(self.raw(), c.as_ptr(), 0o777) };
            if rc != 0 && last_err().raw_os_error() != Some(libc::EEXIST) {
                return Err(SafeWriteError::io(
                    "cannot create the folder",
                    &path,
                    last_err(),
                ));
            }
            fd = open();
        }
        if fd < 0 {
            let e = last_err();
            return Err(match self.entry(name) {
                Ok(Entry::Symlink) => SafeWriteError::Escapes {
                    path: path.clone(),
                    root: self.path.clone(),
                    why: "a folder on the way is a symbolic link",
                },
                Ok(Entry::Regular) => SafeWriteError::NotRegular {
                    path,
                    what: "a file where a folder is needed",
                },
                _ => SafeWriteError::io("cannot open the folder", &path, e),
            });
        }
        Ok(Dir {
            // SAFETY: a fresh descriptor we own.
            fd: Arc::new(unsafe { OwnedFd::from_raw_fd(fd) }),
            path,
        })
    }

    /// The folder's path (absolute, as opened).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn entry(&self, name: &OsStr) -> std::io::Result<Entry> {
        let c = cstr(name)?;
        // SAFETY: `st` is plain data filled by the call.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid name and out-pointer; the descriptor is ours.
        let rc =
            unsafe { libc::fstatat(self.raw(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        if rc != 0 {
            let e = last_err();
            return if e.raw_os_error() == Some(libc::ENOENT) {
                Ok(Entry::Missing)
            } else {
                Err(e)
            };
        }
        Ok(match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => Entry::Regular,
            libc::S_IFLNK => Entry::Symlink,
            libc::S_IFDIR => Entry::Other("a directory"),
            libc::S_IFIFO => Entry::Other("a FIFO (named pipe)"),
            libc::S_IFCHR => Entry::Other("a character device"),
            libc::S_IFBLK => Entry::Other("a block device"),
            libc::S_IFSOCK => Entry::Other("a socket"),
            _ => Entry::Other("not a regular file"),
        })
    }

    /// Whether `name` may be written: free, or (with `overwrite`) a regular
    /// file. Refuses links (dangling ones too) and anything else. Checked
    /// again when the file is put in place; this is for refusing early.
    pub fn check_free(&self, name: &OsStr, overwrite: bool) -> Result<()> {
        let path = self.path.join(name);
        match self
            .entry(name)
            .map_err(|e| SafeWriteError::io("cannot check", &path, e))?
        {
            Entry::Missing => Ok(()),
            Entry::Symlink => Err(SafeWriteError::Symlink(path)),
            Entry::Other(what) => Err(SafeWriteError::NotRegular { path, what }),
            Entry::Regular if overwrite => Ok(()),
            Entry::Regular => Err(SafeWriteError::Exists(path)),
        }
    }

    /// Start writing `name` in this folder: a temporary file, put in place
    /// by [`PendingFile::commit`].
    pub fn create(&self, name: &OsStr, overwrite: bool) -> Result<PendingFile> {
        let path = self.path.join(name);
        if name.is_empty() || name.as_bytes().contains(&b'/') || name == ".." || name == "." {
            return Err(SafeWriteError::NotRegular {
                path,
                what: "not a file name",
            });
        }
        self.check_free(name, overwrite)?;
        let final_name = cstr(name).map_err(|e| SafeWriteError::io("cannot create", &path, e))?;
        for _ in 0..16 {
            let tmp = CString::new(format!(".aisp-{:016x}.tmp", crate::random_u64()))
                .map_err(|_| SafeWriteError::io("cannot create", &path, last_err()))?;
            // SAFETY: valid name relative to a descriptor we hold; the result is owned below.
            let fd = unsafe {
                libc::openat(
                    self.raw(),
                    tmp.as_ptr(),
                    libc::O_WRONLY
                        | libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    0o666 as libc::c_uint,
                )
            };
            if fd < 0 {
                let e = last_err();
                if e.raw_os_error() == Some(libc::EEXIST) {
                    continue;
                }
                return Err(SafeWriteError::io("cannot create a file in", &self.path, e));
            }
            return Ok(PendingFile {
                // SAFETY: a fresh descriptor we own.
                file: unsafe { File::from_raw_fd(fd) },
                dir: self.clone(),
                tmp,
                name: final_name,
                path,
                overwrite,
                done: false,
            });
        }
        Err(SafeWriteError::io(
            "cannot create a temporary file in",
            &self.path,
            std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        ))
    }

    /// Write `bytes` as `name` in one go. Returns the size written.
    pub fn write(&self, name: &OsStr, bytes: &[u8], overwrite: bool) -> Result<u64> {
        let mut f = self.create(name, overwrite)?;
        f.write_all(bytes)
            .map_err(|e| SafeWriteError::io("cannot write", &f.path, e))?;
        f.commit()
    }
}

/// A file being written under a temporary name in its folder.
#[derive(Debug)]
pub struct PendingFile {
    file: File,
    dir: Dir,
    tmp: CString,
    name: CString,
    path: PathBuf,
    overwrite: bool,
    done: bool,
}

impl PendingFile {
    /// The path the file will have once committed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open temporary file (for writers that want a `File`).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Sync the data and put the file in place under its final name.
    /// Returns its size.
    pub fn commit(mut self) -> Result<u64> {
        let path = self.path.clone();
        self.file
            .flush()
            .and_then(|_| self.file.sync_all())
            .map_err(|e| SafeWriteError::io("cannot write", &path, e))?;
        let size = self
            .file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| SafeWriteError::io("cannot write", &path, e))?;
        let d = self.dir.raw();
        if self.overwrite {
            // A link or a non-file at the name is refused, not replaced.
            self.dir
                .check_free(OsStr::from_bytes(self.name.as_bytes()), true)?;
            // SAFETY: valid names relative to a descriptor we hold.
            let rc = unsafe { libc::renameat(d, self.tmp.as_ptr(), d, self.name.as_ptr()) };
            if rc != 0 {
                return Err(SafeWriteError::io("cannot write", &path, last_err()));
            }
        } else {
            // SAFETY: as above.
            let rc = unsafe {
                libc::renameat2(
                    d,
                    self.tmp.as_ptr(),
                    d,
                    self.name.as_ptr(),
                    libc::RENAME_NOREPLACE,
                )
            };
            if rc != 0 {
                let e = last_err();
                match e.raw_os_error() {
                    Some(libc::EEXIST) => return Err(self.exists_error()),
                    // No RENAME_NOREPLACE here: a hard link fails on an existing name just the same.
                    Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {
                        // SAFETY: as above.
                        let rc =
                            unsafe { libc::linkat(d, self.tmp.as_ptr(), d, self.name.as_ptr(), 0) };
                        if rc != 0 {
                            let e = last_err();
                            return Err(if e.raw_os_error() == Some(libc::EEXIST) {
                                self.exists_error()
                            } else {
                                SafeWriteError::io("cannot write", &path, e)
                            });
                        }
                        // SAFETY: as above.
                        unsafe { libc::unlinkat(d, self.tmp.as_ptr(), 0) };
                    }
                    _ => return Err(SafeWriteError::io("cannot write", &path, e)),
                }
            }
        }
        self.done = true;
        // The rename itself reaches the disk with the folder (best effort).
        let _ = fsync_fd(d);
        Ok(size)
    }

    fn exists_error(&self) -> SafeWriteError {
        match self.dir.entry(OsStr::from_bytes(self.name.as_bytes())) {
            Ok(Entry::Symlink) => SafeWriteError::Symlink(self.path.clone()),
            _ => SafeWriteError::Exists(self.path.clone()),
        }
    }
}

impl Write for PendingFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.file.write_all(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        if !self.done {
            // SAFETY: a valid name relative to a descriptor we hold.
            unsafe { libc::unlinkat(self.dir.raw(), self.tmp.as_ptr(), 0) };
        }
    }
}

fn fsync_fd(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: fsync on a descriptor we hold.
    if unsafe { libc::fsync(fd) } == 0 {
        Ok(())
    } else {
        Err(last_err())
    }
}

/// A file to write: its folder (open) and its name there.
#[derive(Debug, Clone)]
pub struct Target {
    dir: Dir,
    name: OsString,
}

impl Target {
    /// `path` as the caller names it: its folder opened (links on the way
    /// followed, the folder created when `create_parent`), the last
    /// component the name (never followed).
    pub fn new(path: &Path, create_parent: bool) -> Result<Target> {
        let name = match path.file_name() {
            Some(n) if !path.as_os_str().as_bytes().ends_with(b"/") => n.to_os_string(),
            _ => {
                return Err(SafeWriteError::NotRegular {
                    path: path.to_path_buf(),
                    what: "not a file name",
                });
            }
        };
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Ok(Target {
            dir: Dir::open(&parent, create_parent)?,
            name,
        })
    }

    /// `name` in an open folder.
    pub fn in_dir(dir: Dir, name: impl Into<OsString>) -> Target {
        Target {
            dir,
            name: name.into(),
        }
    }

    /// The full path (absolute).
    pub fn path(&self) -> PathBuf {
        self.dir.path.join(&self.name)
    }

    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    pub fn name(&self) -> &OsStr {
        &self.name
    }

    /// See [`Dir::check_free`].
    pub fn check_free(&self, overwrite: bool) -> Result<()> {
        self.dir.check_free(&self.name, overwrite)
    }

    /// See [`Dir::create`].
    pub fn create(&self, overwrite: bool) -> Result<PendingFile> {
        self.dir.create(&self.name, overwrite)
    }

    /// See [`Dir::write`].
    pub fn write(&self, bytes: &[u8], overwrite: bool) -> Result<u64> {
        self.dir.write(&self.name, bytes, overwrite)
    }
}

/// A text field for a CSV file that neither a line-based reader (sshd's
/// `authorized_keys`, cron) nor a spreadsheet takes as its own: CR and LF
/// become `⏎`, so no field can start a line, quoted or not; a field starting
/// with `=`, `+`, `-`, `@`, tab or CR gets a leading `'` (OWASP's rule against
/// formula injection). For text fields only: numbers are written as they are.
/// Quoting (RFC 4180) is the CSV writer's.
pub fn csv_text(s: &str) -> Cow<'_, str> {
    let formula = s.starts_with(['=', '+', '-', '@', '\t', '\r']);
    if !formula && !s.contains(['\n', '\r']) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 4);
    if formula {
        out.push('\'');
    }
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push('⏎');
            }
            '\n' => out.push('⏎'),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn writes_once_and_refuses_to_replace_unless_asked() {
        let d = tempfile::tempdir().unwrap();
        let t = Target::new(&d.path().join("out.txt"), false).unwrap();
        assert_eq!(t.write(b"one", false).unwrap(), 3);
        assert!(matches!(
            t.write(b"two", false),
            Err(SafeWriteError::Exists(_))
        ));
        assert_eq!(std::fs::read(d.path().join("out.txt")).unwrap(), b"one");
        assert_eq!(t.write(b"three", true).unwrap(), 5);
        assert_eq!(std::fs::read(d.path().join("out.txt")).unwrap(), b"three");
        assert_eq!(names(d.path()), vec!["out.txt"], "no temporary file left");
    }

    #[test]
    fn links_are_never_written_through_or_replaced() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let link = d.path().join("out.csv");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let dangling = d.path().join("dangling.csv");
        std::os::unix::fs::symlink(d.path().join("elsewhere"), &dangling).unwrap();
        for overwrite in [false, true] {
            let err = Target::new(&link, false)
                .unwrap()
                .write(b"evil", overwrite)
                .unwrap_err();
            assert!(matches!(err, SafeWriteError::Symlink(_)), "{err:?}");
            let err = Target::new(&dangling, false)
                .unwrap()
                .write(b"evil", overwrite)
                .unwrap_err();
            assert!(matches!(err, SafeWriteError::Symlink(_)), "{err:?}");
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(!d.path().join("elsewhere").exists());
        let left = names(d.path());
        assert!(left.iter().all(|n| !n.ends_with(".tmp")), "{left:?}");
    }

    #[test]
    fn a_failed_write_leaves_nothing_behind() {
        let d = tempfile::tempdir().unwrap();
        let t = Target::new(&d.path().join("big.json"), false).unwrap();
        let mut f = t.create(false).unwrap();
        f.write_all(b"partial").unwrap();
        drop(f); // a failure before commit
        assert!(names(d.path()).is_empty());
    }

    #[test]
    fn csv_text_cannot_start_a_line_or_a_formula() {
        assert_eq!(csv_text("sgemm_128x64"), "sgemm_128x64");
        assert!(matches!(csv_text("plain"), Cow::Borrowed(_)));
        assert_eq!(csv_text("a\nssh-ed25519 K\r\nb\rc"), "a⏎ssh-ed25519 K⏎b⏎c");
        assert_eq!(csv_text("=1+1"), "'=1+1");
        assert_eq!(csv_text("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_text("+cmd"), "'+cmd");
        assert_eq!(csv_text("-2+3"), "'-2+3");
        assert_eq!(csv_text("\tx"), "'\tx");
        assert_eq!(csv_text("\r\n=x"), "'⏎=x");
        assert_eq!(csv_text("a=b"), "a=b");
    }

    #[test]
    fn paths_beneath_a_root_stay_beneath_it() {
        let d = tempfile::tempdir().unwrap();
        let root = Dir::open(&d.path().join("root"), true).unwrap();
        let sub = root.open_beneath(Path::new("a/b"), true).unwrap();
        sub.write(OsStr::new("x"), b"1", false).unwrap();
        assert!(d.path().join("root/a/b/x").is_file());
        assert!(matches!(
            root.open_beneath(Path::new("a/../../x"), true),
            Err(SafeWriteError::Escapes { .. })
        ));
        std::os::unix::fs::symlink("/tmp", d.path().join("root/out")).unwrap();
        assert!(matches!(
            root.open_beneath(Path::new("out/y"), true),
            Err(SafeWriteError::Escapes { .. })
        ));
    }
}
