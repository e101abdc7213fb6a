//! Errors of the profile library. Converted to `OpError` at the operation
//! boundary (`crate::ops::profile`), each with a hint that says what to do.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The path does not exist (or is not a regular file).
    #[error("no profile at {path}")]
    NotFound { path: PathBuf },
    /// The file exists but is not something we can read: not SQLite, truncated,
    /// corrupt, empty, or an SQLite database that is not an Nsight Systems export.
    #[error("{path} is not a readable Nsight Systems export: {reason}")]
    Invalid { path: PathBuf, reason: String },
    /// SQLite failed while reading an export that opened fine (usually corruption).
    #[error("reading {path} failed: {source}")]
    Read {
        path: PathBuf,
        source: rusqlite::Error,
    },
    /// An I/O error outside SQLite (reading the header, writing an export).
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A `.nsys-rep` was given and no `nsys` binary could be found.
    #[error(
        "{path} is an Nsight Systems report (.nsys-rep) and no `nsys` binary was found to export it"
    )]
    NsysNotFound {
        path: PathBuf,
        searched: Vec<String>,
    },
    /// `nsys export` ran past its time limit and was stopped.
    #[error("`nsys export` of {path} ran past {seconds} s and was stopped")]
    ExportTimeout { path: PathBuf, seconds: f64 },
    /// `nsys export` ran and failed.
    #[error("`nsys export` failed on {path}: {message}")]
    ExportFailed { path: PathBuf, message: String },
    /// The arguments do not make sense for this profile (an unknown device, an
    /// empty window, a range name that does not occur).
    #[error("{0}")]
    BadArgument(String),
    /// A folder or glob that names no exports, or a glob in a folder name.
    #[error("{0}")]
    BadSet(String),
    /// An export's output path names something that is not a file to write (a FIFO, a device, a folder).
    #[error("{0}")]
    BadOutput(String),
    /// An export's output file exists and overwriting was not asked for.
    #[error("{path} exists")]
    OutputExists { path: PathBuf },
    /// The profile lacks what the question needs (e.g. no NVTX table).
    #[error("{0}")]
    Missing(String),
    /// Not a regular file, over the size cap, a link loop...
    #[error(transparent)]
    Input(#[from] crate::input_file::InputFileError),
    /// The caller cancelled or the deadline passed.
    #[error("cancelled")]
    Cancelled,
}

pub type Result<T> = std::result::Result<T, ProfileError>;

impl ProfileError {
    pub(crate) fn read(path: &std::path::Path, source: rusqlite::Error) -> ProfileError {
        ProfileError::Read {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn invalid(path: &std::path::Path, reason: impl Into<String>) -> ProfileError {
        ProfileError::Invalid {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
}
