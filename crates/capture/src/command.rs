//! The user's command, checked before a run is created: a program first (not
//! an option), no NUL byte, an existing working folder, valid variable names.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// A command a capture runs (argv, never through a shell).
#[derive(Debug, Clone)]
pub struct UserCommand {
    pub argv: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// Variables added to the inherited environment.
    pub env: Vec<(String, String)>,
}

/// What is wrong with a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    #[error("`command` is empty")]
    Empty,
    #[error("`command` must start with a program, not `{0}`")]
    NotAProgram(String),
    #[error("an argument of `command` contains a NUL byte")]
    NulByte,
    #[error("`cwd` {0} is not an existing directory")]
    NoSuchCwd(String),
    #[error("environment variable name `{0}` is not valid")]
    BadEnvName(String),
}

impl UserCommand {
    /// Check `command`, `cwd` and `env` as a caller gave them.
    pub fn check(
        command: &[String],
        cwd: Option<&str>,
        env: Option<&BTreeMap<String, String>>,
    ) -> Result<UserCommand, CommandError> {
        let Some(first) = command.first() else {
            return Err(CommandError::Empty);
        };
        if first.trim().is_empty() || first.starts_with('-') {
            return Err(CommandError::NotAProgram(first.clone()));
        }
        if command.iter().any(|a| a.contains('\0')) {
            return Err(CommandError::NulByte);
        }
        let cwd = match cwd {
            None => None,
            Some(c) => {
                let p = PathBuf::from(c);
                if !p.is_dir() {
                    return Err(CommandError::NoSuchCwd(c.to_string()));
                }
                Some(p)
            }
        };
        let mut vars = Vec::new();
        for (k, v) in env.into_iter().flatten() {
            if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
                return Err(CommandError::BadEnvName(k.clone()));
            }
            vars.push((k.clone(), v.clone()));
        }
        Ok(UserCommand {
            argv: command.to_vec(),
            cwd,
            env: vars,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_checked() {
        let ok = UserCommand::check(&["python3".into(), "t.py".into()], None, None).unwrap();
        assert_eq!(ok.argv, vec!["python3", "t.py"]);
        assert_eq!(
            UserCommand::check(&[], None, None).unwrap_err(),
            CommandError::Empty
        );
        assert!(
            UserCommand::check(&["--help".into()], None, None)
                .unwrap_err()
                .to_string()
                .contains("must start with a program")
        );
        assert!(
            UserCommand::check(&["x".into()], Some("/nonexistent/dir"), None)
                .unwrap_err()
                .to_string()
                .contains("not an existing directory")
        );
        let mut env = BTreeMap::new();
        env.insert("A=B".to_string(), "1".to_string());
        assert!(UserCommand::check(&["x".into()], None, Some(&env)).is_err());
        env.clear();
        env.insert("CUDA_VISIBLE_DEVICES".to_string(), "0".to_string());
        assert_eq!(
            UserCommand::check(&["x".into()], None, Some(&env))
                .unwrap()
                .env,
            vec![("CUDA_VISIBLE_DEVICES".to_string(), "0".to_string())]
        );
    }
}
