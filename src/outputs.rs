//! Where operations may write: the one place that turns a user's `output`,
//! `output_dir` or `write_digests` argument into a folder handle and a name.
//!
//! A person at the CLI (or a Python program, in process like the CLI) writes
//! wherever they say. Over MCP and HTTP the caller may be a model following
//! instructions planted in a file, so there files are written only under the
//! output roots: `$AISP_HOME/exports`, plus the folders listed in the config
//! (`[outputs] roots = [...]`) or `AISP_OUTPUT_ROOTS`. A relative path resolves
//! under `$AISP_HOME/exports`; an absolute one must lie under a root; the
//! folders below the root are walked without following links and without
//! `..`. Whatever the caller, the file itself is written by
//! [`aisp_base::safe_write`]: never through a link, never replacing a file
//! unless `overwrite` was asked, never left half written.

use std::path::{Component, Path, PathBuf};

use crate::context::OpContext;
use crate::error::OpError;
use aisp_base::safe_write::{Dir, SafeWriteError, Target};

/// Where a call may write files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteScope {
    /// Only under the output roots (MCP, HTTP, the dashboard): the default.
    #[default]
    Roots,
    /// Wherever the caller says (the CLI and the Python API: a local user's own words).
    Anywhere,
}

/// How to add a root, for hints.
const ADD_ROOT: &str = "add a folder with `[outputs] roots = [\"/abs/path\"]` in the config file or \
AISP_OUTPUT_ROOTS=/abs/path (several separated by ':'); the CLI writes wherever it is told";

fn roots_text(roots: &[PathBuf]) -> String {
    roots
        .iter()
        .map(|r| r.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The root `path` falls under and the rest of it, for a confined caller.
fn split_under_root(
    ctx: &OpContext,
    arg: &str,
    value: &str,
) -> Result<(PathBuf, PathBuf), OpError> {
    let roots = ctx.app().config.output_roots();
    let path = Path::new(value);
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(OpError::invalid_input(
            format!(
                "`{arg}` = `{value}` contains `..`; over MCP and HTTP files are written only under the output roots ({})",
                roots_text(&roots)
            ),
            format!(
                "Pass a path inside a root (relative paths resolve under {}), or {ADD_ROOT}.",
                roots[0].display()
            ),
        ));
    }
    if path.is_relative() {
        return Ok((roots[0].clone(), path.to_path_buf()));
    }
    for root in &roots {
        let mut forms = vec![root.clone()];
        if let Ok(c) = root.canonicalize()
            && c != *root
        {
            forms.push(c);
        }
        for form in forms {
            if let Ok(rest) = path.strip_prefix(&form) {
                return Ok((root.clone(), rest.to_path_buf()));
            }
        }
    }
    Err(OpError::invalid_input(
        format!(
            "`{arg}` = `{value}` is outside the folders aisp writes to over MCP and HTTP: {}",
            roots_text(&roots)
        ),
        format!(
            "Pass a path inside one of them (a relative path lands in {}), or {ADD_ROOT}.",
            roots[0].display()
        ),
    ))
}

/// The file a user's `arg` names, ready to write (its folder created).
pub fn file(ctx: &OpContext, arg: &str, value: &str) -> Result<Target, OpError> {
    let value = value.trim();
    if value.is_empty() || value.ends_with('/') {
        return Err(OpError::invalid_input(
            format!("`{arg}` must name a file, not `{value}`"),
            format!("Pass e.g. \"{arg}\": \"report.html\"."),
        ));
    }
    match ctx.write_scope() {
        WriteScope::Anywhere => {
            Target::new(Path::new(value), true).map_err(|e| write_error(arg, e))
        }
        WriteScope::Roots => {
            let (root, rest) = split_under_root(ctx, arg, value)?;
            let name = rest.file_name().map(|n| n.to_os_string()).ok_or_else(|| {
                OpError::invalid_input(
                    format!("`{arg}` must name a file, not `{value}`"),
                    format!("Pass e.g. \"{arg}\": \"report.html\"."),
                )
            })?;
            let parent = rest.parent().unwrap_or(Path::new(""));
            let dir = Dir::open(&root, true)
                .and_then(|r| r.open_beneath(parent, true))
                .map_err(|e| write_error(arg, e))?;
            Ok(Target::in_dir(dir, name))
        }
    }
}

/// The folder a user's `arg` names, opened (and created).
pub fn folder(ctx: &OpContext, arg: &str, value: &str) -> Result<Dir, OpError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(OpError::invalid_input(
            format!("`{arg}` must name a folder"),
            format!("Pass e.g. \"{arg}\": \"flame\"."),
        ));
    }
    match ctx.write_scope() {
        WriteScope::Anywhere => Dir::open(Path::new(value), true).map_err(|e| write_error(arg, e)),
        WriteScope::Roots => {
            let (root, rest) = split_under_root(ctx, arg, value)?;
            Dir::open(&root, true)
                .and_then(|r| r.open_beneath(&rest, true))
                .map_err(|e| write_error(arg, e))
        }
    }
}

/// A file at a path aisp chose itself (a default under `$AISP_HOME`).
pub fn own_file(path: &Path) -> Result<Target, OpError> {
    Target::new(path, true).map_err(|e| write_error("output", e))
}

/// A folder aisp chose itself (a default under `$AISP_HOME`).
pub fn own_folder(path: &Path) -> Result<Dir, OpError> {
    Dir::open(path, true).map_err(|e| write_error("output_dir", e))
}

/// A refused or failed write as an error a caller can act on.
pub fn write_error(arg: &str, e: SafeWriteError) -> OpError {
    let message = e.to_string();
    match e {
        SafeWriteError::Exists(_) => OpError::invalid_input(
            format!("{message}; pass overwrite: true to replace it"),
            format!("Pass overwrite: true to replace it, or another `{arg}`."),
        ),
        SafeWriteError::Symlink(_) => OpError::invalid_input(
            message,
            format!("Pass another `{arg}`: aisp writes regular files only, never through a link."),
        ),
        SafeWriteError::NotRegular { .. } => OpError::invalid_input(
            message,
            format!("Pass a `{arg}` that is a new file or a regular file (with overwrite: true)."),
        ),
        SafeWriteError::Escapes { .. } => OpError::invalid_input(
            message,
            format!(
                "Pass a `{arg}` whose folders are plain folders inside an output root, or {ADD_ROOT}."
            ),
        ),
        SafeWriteError::Io { .. } => OpError::invalid_input(
            message,
            format!("Check that the folder is writable and has space, or pass another `{arg}`."),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::AppState;
    use crate::config::Config;

    fn ctx(home: &Path, extra: Option<&Path>, writes: WriteScope) -> OpContext {
        let mut config = Config::with_home(home.to_path_buf());
        config.output_roots = extra.map(|p| vec![p.to_path_buf()]).unwrap_or_default();
        OpContext::detached(AppState::new(config)).with_write_scope(writes)
    }

    #[test]
    fn confined_callers_write_under_the_roots_only() {
        let home = tempfile::tempdir().unwrap();
        let extra = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let c = ctx(home.path(), Some(extra.path()), WriteScope::Roots);
        let t = file(&c, "output", "a/b/r.html").unwrap();
        assert_eq!(t.path(), home.path().join("exports/a/b/r.html"));
        let t = file(&c, "output", extra.path().join("r.csv").to_str().unwrap()).unwrap();
        assert_eq!(t.path(), extra.path().join("r.csv"));
        for bad in [
            elsewhere.path().join("x").display().to_string(),
            "../x".into(),
            format!("{}/../x", extra.path().display()),
            "/etc/cron.d/x".into(),
        ] {
            let e = file(&c, "output", &bad).unwrap_err();
            assert_eq!(e.kind, crate::error::ErrorKind::InvalidInput, "{bad}");
            assert!(e.hint.contains("AISP_OUTPUT_ROOTS"), "{bad}: {}", e.hint);
            assert!(e.message.contains("exports"), "{bad}: {}", e.message);
        }
        std::os::unix::fs::symlink(elsewhere.path(), home.path().join("exports/out")).unwrap();
        assert!(file(&c, "output", "out/x.csv").is_err());
        assert!(folder(&c, "output_dir", "out").is_err());
        assert!(folder(&c, "output_dir", "flame/1").is_ok());
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_cli_writes_where_it_is_told() {
        let home = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let c = ctx(home.path(), None, WriteScope::Anywhere);
        let p = elsewhere.path().join("new/r.html");
        let t = file(&c, "output", p.to_str().unwrap()).unwrap();
        assert_eq!(t.path(), p);
        t.write(b"x", false).unwrap();
        let e = write_error("output", t.write(b"y", false).unwrap_err());
        assert!(e.hint.contains("overwrite: true"), "{}", e.hint);
    }
}
