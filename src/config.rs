//! Configuration: `$XDG_CONFIG_HOME/aisp/config.toml`, then environment
//! variables, then command-line flags (each later source wins).
//!
//! | key (file)     | environment                         | meaning                                   |
//! |----------------|-------------------------------------|-------------------------------------------|
//! | `home`         | `AISP_HOME`                         | store, cache and run artifacts            |
//! | `tools`        | `AISP_TOOLS`                        | toolset `tools/list` shows                |
//! | `allow_exec`   | `AISP_ALLOW_EXEC`                   | allow running user-supplied commands      |
//! | `token`        | `AISP_TOKEN`                        | bearer token for HTTP                     |
//! | `llm.base_url` | `AISP_LLM_BASE_URL`                 | OpenAI-compatible endpoint                |
//! | `llm.model`    | `AISP_LLM_MODEL`                    | model name                                |
//! | `llm.api_key`  | `AISP_LLM_API_KEY`, `OPENAI_API_KEY`| API key (never logged or returned)        |
//! | `llm.stream`   | `AISP_LLM_STREAM`                   | stream chat completions (server-sent events) |
//! | `nccl_lib`     | `AISP_NCCL_LIB`                     | path of libnccl.so for NCCL benchmarks    |
//! | `nsys`         | `AISP_NSYS`                         | the `nsys` binary captures use            |
//! | `ncu`          | `AISP_NCU`                          | the `ncu` binary captures use             |
//! | `limits.kineto_trace_mib` | `AISP_MAX_KINETO_TRACE_MIB` | cap on a Kineto trace JSON (decompressed) |
//! | `limits.ncu_csv_mib`      | `AISP_MAX_NCU_CSV_MIB`      | cap on one Nsight Compute CSV page        |
//! | `limits.nsight_export_mib`| `AISP_MAX_NSIGHT_EXPORT_MIB`| cap on an Nsight Systems export           |
//! | `limits.heavy_calls`      | `AISP_HEAVY_CALLS`          | file-reading calls run at once (others queue) |
//! | `limits.profile_tables_mib` | `AISP_PROFILE_TABLES_MIB` | decoded profile tables kept between calls (0: none) |
//! | `limits.progress_after_ms` | `AISP_PROGRESS_AFTER_MS`   | a table scan longer than this sends progress |
//! | `limits.max_jobs`         | `AISP_MAX_JOBS`             | background jobs running or queued at once  |
//! | `limits.nsys_export_timeout_s` | `AISP_NSYS_EXPORT_TIMEOUT_S` | time `nsys export` may take for a `.nsys-rep` |
//! | `limits.uploads_total_mib` | `AISP_UPLOADS_TOTAL_MIB`   | dashboard uploads kept (oldest removed first) |
//! | `outputs.roots`           | `AISP_OUTPUT_ROOTS`         | folders MCP/HTTP callers may write to, besides `$AISP_HOME/exports` |
//! | `http.header_timeout_s`   | `AISP_HTTP_HEADER_TIMEOUT_S`| time a client has to send request headers |
//! | `http.body_timeout_s`     | `AISP_HTTP_BODY_TIMEOUT_S`  | time a client has to send a request body  |
//! | `http.max_connections`    | `AISP_HTTP_MAX_CONNECTIONS` | open connections (idle ones closed for new ones) |
//! | `http.max_body_mib`       | `AISP_HTTP_MAX_BODY_MIB`    | request body of `/api`, `/mcp` and the views |
//! | `http.max_mcp_sessions`   | `AISP_HTTP_MAX_MCP_SESSIONS`| MCP sessions open at once (more are refused) |
//! | `http.mcp_session_idle_s` | `AISP_HTTP_MCP_SESSION_IDLE_S` | an MCP session idle this long is closed |

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::toolset::Toolset;
use aisp_profile::input_file::InputLimits;

/// Where the configuration came from, for `aisp_status` and error messages.
#[derive(Debug, Clone)]
pub struct Config {
    pub home: PathBuf,
    pub tools: Toolset,
    pub allow_exec: bool,
    pub token: Option<String>,
    pub llm: LlmConfig,
    pub nccl_lib: Option<PathBuf>,
    /// The Nsight Systems CLI to use instead of searching PATH and the usual folders.
    pub nsys: Option<PathBuf>,
    /// The Nsight Compute CLI to use instead of searching PATH and the usual folders.
    pub ncu: Option<PathBuf>,
    /// Size caps per kind of input file.
    pub limits: InputLimits,
    /// How many calls that read user files (profiles, traces, CSV pages) run
    /// at once; the rest wait their turn, so memory stays bounded under load.
    pub heavy_calls: usize,
    /// Bytes of decoded profile tables kept between calls (`profile::loaded`; 0 keeps none).
    pub profile_tables_bytes: u64,
    /// A table scan that runs longer than this sends progress notifications.
    pub progress_after: std::time::Duration,
    pub http: HttpLimits,
    /// Background jobs (`async: true`) running or queued at once; more are refused.
    pub max_jobs: usize,
    /// How long `nsys export` may take to turn a `.nsys-rep` into SQLite.
    pub nsys_export_timeout: std::time::Duration,
    /// Bytes of dashboard uploads kept under `$AISP_HOME/uploads` (oldest removed first).
    pub uploads_total_bytes: u64,
    /// Folders MCP and HTTP callers may write to besides `$AISP_HOME/exports`
    /// (absolute; see [`Config::output_roots`]).
    pub output_roots: Vec<PathBuf>,
    /// The config file that was read, if any.
    pub file: Option<PathBuf>,
}

/// What a slow or idle HTTP client may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// A connection that has not sent a request's headers in this time is closed.
    pub header_timeout: std::time::Duration,
    /// A request body not received in full in this time is answered 408
    /// (responses, streamed or not, have no such limit).
    pub body_timeout: std::time::Duration,
    /// Connections served at once; at the limit the longest-idle connection
    /// is closed for a new one, and with none idle new ones wait in the backlog.
    pub max_connections: usize,
    /// The largest request body of `/api`, `/mcp` and the dashboard's views
    /// (arguments are JSON; files go by path). Uploads have their own cap.
    pub max_body_bytes: usize,
    /// MCP sessions (streamable HTTP, protocols before 2026-07-28) open at once.
    pub max_mcp_sessions: usize,
    /// An MCP session with no request for this long is closed.
    pub mcp_session_idle: std::time::Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: std::time::Duration::from_secs(10),
            body_timeout: std::time::Duration::from_secs(30),
            max_connections: 1024,
            max_body_bytes: 4 << 20,
            max_mcp_sessions: 256,
            mcp_session_idle: std::time::Duration::from_secs(300),
        }
    }
}

/// Default for `limits.max_jobs`.
pub const DEFAULT_MAX_JOBS: usize = 32;
/// Default for `limits.nsys_export_timeout_s`.
pub const DEFAULT_NSYS_EXPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);
/// Default for `limits.uploads_total_mib`.
pub const DEFAULT_UPLOADS_TOTAL_BYTES: u64 = 1 << 30;

/// Default for `limits.heavy_calls`: the cores, between 2 and 8.
pub fn default_heavy_calls() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(2, 8)
}

#[derive(Clone, Default)]
pub struct LlmConfig {
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key: Option<String>,
    /// Ask for streamed answers (`stream: true`, server-sent events): a slow
    /// model's long answer then arrives piece by piece instead of as one body.
    pub stream: bool,
}

impl std::fmt::Debug for LlmConfig {
    // The key must never reach logs, even at trace level.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("stream", &self.stream)
            .finish()
    }
}

impl LlmConfig {
    /// An endpoint is configured when a base URL or an API key is known.
    pub fn configured(&self) -> bool {
        self.base_url.is_some() || self.api_key.is_some()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is not valid TOML: {source}")]
    Parse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("{0}")]
    Invalid(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    home: Option<PathBuf>,
    tools: Option<String>,
    allow_exec: Option<bool>,
    token: Option<String>,
    nccl_lib: Option<PathBuf>,
    nsys: Option<PathBuf>,
    ncu: Option<PathBuf>,
    #[serde(default)]
    llm: FileLlm,
    #[serde(default)]
    limits: FileLimits,
    #[serde(default)]
    http: FileHttp,
    #[serde(default)]
    outputs: FileOutputs,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileOutputs {
    roots: Option<Vec<PathBuf>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLimits {
    kineto_trace_mib: Option<u64>,
    ncu_csv_mib: Option<u64>,
    nsight_export_mib: Option<u64>,
    heavy_calls: Option<u64>,
    profile_tables_mib: Option<u64>,
    progress_after_ms: Option<u64>,
    max_jobs: Option<u64>,
    nsys_export_timeout_s: Option<f64>,
    uploads_total_mib: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHttp {
    header_timeout_s: Option<f64>,
    body_timeout_s: Option<f64>,
    max_connections: Option<u64>,
    max_body_mib: Option<u64>,
    max_mcp_sessions: Option<u64>,
    mcp_session_idle_s: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLlm {
    base_url: Option<String>,
    model: Option<String>,
    api_key: Option<String>,
    stream: Option<bool>,
}

/// Command-line overrides (already parsed by clap).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub home: Option<PathBuf>,
    pub tools: Option<String>,
    /// `--allow-exec` (Some(true)) or `--no-allow-exec` (Some(false)).
    pub allow_exec: Option<bool>,
    pub token: Option<String>,
}

impl Config {
    /// Load from the default file location and the process environment.
    pub fn load(overrides: &Overrides) -> Result<Config, ConfigError> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Self::load_with(overrides, &env, default_config_file().as_deref())
    }

    /// Load with an explicit environment lookup and config path (testable).
    pub fn load_with(
        overrides: &Overrides,
        env: &dyn Fn(&str) -> Option<String>,
        default_file: Option<&Path>,
    ) -> Result<Config, ConfigError> {
        let file_path = env("AISP_CONFIG")
            .map(PathBuf::from)
            .or_else(|| default_file.map(Path::to_path_buf));
        let (file, used) = match &file_path {
            Some(path) if path.exists() => {
                let text = aisp_profile::input_file::read_text_capped(
                    path,
                    aisp_profile::input_file::InputKind::ConfigFile,
                    &InputLimits::default(),
                )
                .map_err(|e| ConfigError::Read {
                    path: path.clone(),
                    source: std::io::Error::other(e.to_string()),
                })?;
                let parsed: FileConfig =
                    toml::from_str(&text).map_err(|source| ConfigError::Parse {
                        path: path.clone(),
                        source: Box::new(source),
                    })?;
                (parsed, Some(path.clone()))
            }
            _ => (FileConfig::default(), None),
        };

        let home = overrides
            .home
            .clone()
            .or_else(|| env("AISP_HOME").map(PathBuf::from))
            .or(file.home)
            .unwrap_or_else(aisp_base::default_home);

        let tools_text = overrides
            .tools
            .clone()
            .or_else(|| env("AISP_TOOLS"))
            .or(file.tools)
            .unwrap_or_else(|| "default".into());
        let tools = Toolset::parse(&tools_text).map_err(ConfigError::Invalid)?;

        // Later sources win, in both directions: AISP_ALLOW_EXEC=0 or
        // --no-allow-exec turn off `allow_exec = true` from the file.
        let allow_exec = overrides
            .allow_exec
            .or_else(|| env("AISP_ALLOW_EXEC").map(|v| truthy(&v)))
            .or(file.allow_exec)
            .unwrap_or(false);

        let mib = |key: &str, var: &str, from_file: Option<u64>, default: u64| {
            let value = match env(var) {
                Some(v) => Some(v.trim().parse::<u64>().map_err(|_| {
                    ConfigError::Invalid(format!("{var}={v} is not a whole number of MiB"))
                })?),
                None => from_file,
            };
            match value {
                Some(0) => Err(ConfigError::Invalid(format!(
                    "{key} must be at least 1 (MiB)"
                ))),
                Some(v) => Ok(v.saturating_mul(1 << 20)),
                None => Ok(default),
            }
        };
        let defaults = InputLimits::default();
        let limits = InputLimits {
            kineto_trace_bytes: mib(
                "limits.kineto_trace_mib",
                "AISP_MAX_KINETO_TRACE_MIB",
                file.limits.kineto_trace_mib,
                defaults.kineto_trace_bytes,
            )?,
            ncu_csv_bytes: mib(
                "limits.ncu_csv_mib",
                "AISP_MAX_NCU_CSV_MIB",
                file.limits.ncu_csv_mib,
                defaults.ncu_csv_bytes,
            )?,
            nsight_export_bytes: mib(
                "limits.nsight_export_mib",
                "AISP_MAX_NSIGHT_EXPORT_MIB",
                file.limits.nsight_export_mib,
                defaults.nsight_export_bytes,
            )?,
        };
        let count =
            |key: &str, var: &str, from_file: Option<u64>| -> Result<Option<usize>, ConfigError> {
                let value = match env(var) {
                    Some(v) => Some(v.trim().parse::<u64>().map_err(|_| {
                        ConfigError::Invalid(format!("{var}={v} is not a whole number"))
                    })?),
                    None => from_file,
                };
                match value {
                    Some(0) => Err(ConfigError::Invalid(format!("{key} must be at least 1"))),
                    Some(v) => Ok(Some(v.min(1 << 20) as usize)),
                    None => Ok(None),
                }
            };
        let seconds =
            |key: &str, var: &str, from_file: Option<f64>, default: std::time::Duration| {
                let value = match env(var) {
                    Some(v) => Some(v.trim().parse::<f64>().map_err(|_| {
                        ConfigError::Invalid(format!("{var}={v} is not a number of seconds"))
                    })?),
                    None => from_file,
                };
                match value {
                    Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => {
                        Ok(std::time::Duration::from_secs_f64(s))
                    }
                    Some(s) => Err(ConfigError::Invalid(format!(
                        "{key} must be a number of seconds between 0 and 86400, not {s}"
                    ))),
                    None => Ok(default),
                }
            };
        let heavy_calls = count(
            "limits.heavy_calls",
            "AISP_HEAVY_CALLS",
            file.limits.heavy_calls,
        )?
        .unwrap_or_else(default_heavy_calls);
        // 0 is allowed for both: keep no tables; report progress at once.
        let whole =
            |var: &str, from_file: Option<u64>| -> Result<Option<u64>, ConfigError> {
                match env(var) {
                    Some(v) => v.trim().parse::<u64>().map(Some).map_err(|_| {
                        ConfigError::Invalid(format!("{var}={v} is not a whole number"))
                    }),
                    None => Ok(from_file),
                }
            };
        let profile_tables_bytes =
            whole("AISP_PROFILE_TABLES_MIB", file.limits.profile_tables_mib)?
                .map(|m| m.saturating_mul(1 << 20))
                .unwrap_or(aisp_profile::loaded::DEFAULT_BUDGET_BYTES);
        let progress_after = std::time::Duration::from_millis(
            whole("AISP_PROGRESS_AFTER_MS", file.limits.progress_after_ms)?
                .unwrap_or(1000)
                .min(86_400_000),
        );
        let http_defaults = HttpLimits::default();
        let http = HttpLimits {
            header_timeout: seconds(
                "http.header_timeout_s",
                "AISP_HTTP_HEADER_TIMEOUT_S",
                file.http.header_timeout_s,
                http_defaults.header_timeout,
            )?,
            body_timeout: seconds(
                "http.body_timeout_s",
                "AISP_HTTP_BODY_TIMEOUT_S",
                file.http.body_timeout_s,
                http_defaults.body_timeout,
            )?,
            max_connections: count(
                "http.max_connections",
                "AISP_HTTP_MAX_CONNECTIONS",
                file.http.max_connections,
            )?
            .unwrap_or(http_defaults.max_connections),
            max_body_bytes: mib(
                "http.max_body_mib",
                "AISP_HTTP_MAX_BODY_MIB",
                file.http.max_body_mib,
                http_defaults.max_body_bytes as u64,
            )?
            .min(1 << 30) as usize,
            max_mcp_sessions: count(
                "http.max_mcp_sessions",
                "AISP_HTTP_MAX_MCP_SESSIONS",
                file.http.max_mcp_sessions,
            )?
            .unwrap_or(http_defaults.max_mcp_sessions),
            mcp_session_idle: seconds(
                "http.mcp_session_idle_s",
                "AISP_HTTP_MCP_SESSION_IDLE_S",
                file.http.mcp_session_idle_s,
                http_defaults.mcp_session_idle,
            )?,
        };
        let max_jobs = count("limits.max_jobs", "AISP_MAX_JOBS", file.limits.max_jobs)?
            .unwrap_or(DEFAULT_MAX_JOBS);
        let nsys_export_timeout = seconds(
            "limits.nsys_export_timeout_s",
            "AISP_NSYS_EXPORT_TIMEOUT_S",
            file.limits.nsys_export_timeout_s,
            DEFAULT_NSYS_EXPORT_TIMEOUT,
        )?;
        let uploads_total_bytes = mib(
            "limits.uploads_total_mib",
            "AISP_UPLOADS_TOTAL_MIB",
            file.limits.uploads_total_mib,
            DEFAULT_UPLOADS_TOTAL_BYTES,
        )?;
        // AISP_OUTPUT_ROOTS (separated like PATH) replaces the file's list.
        let output_roots: Vec<PathBuf> = match env("AISP_OUTPUT_ROOTS") {
            Some(v) => std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect(),
            None => file.outputs.roots.unwrap_or_default(),
        };
        if let Some(bad) = output_roots.iter().find(|p| !p.is_absolute()) {
            return Err(ConfigError::Invalid(format!(
                "outputs.roots / AISP_OUTPUT_ROOTS entries must be absolute paths, not `{}`",
                bad.display()
            )));
        }

        let token = overrides
            .token
            .clone()
            .or_else(|| env("AISP_TOKEN"))
            .or(file.token);

        let llm = LlmConfig {
            base_url: env("AISP_LLM_BASE_URL").or(file.llm.base_url),
            model: env("AISP_LLM_MODEL").or(file.llm.model),
            api_key: env("AISP_LLM_API_KEY")
                .or(file.llm.api_key)
                .or_else(|| env("OPENAI_API_KEY")),
            stream: env("AISP_LLM_STREAM")
                .map(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"))
                .or(file.llm.stream)
                .unwrap_or(false),
        };

        let nccl_lib = env("AISP_NCCL_LIB").map(PathBuf::from).or(file.nccl_lib);
        let nsys = env("AISP_NSYS").map(PathBuf::from).or(file.nsys);
        let ncu = env("AISP_NCU").map(PathBuf::from).or(file.ncu);

        Ok(Config {
            home,
            tools,
            allow_exec,
            token,
            llm,
            nccl_lib,
            nsys,
            ncu,
            limits,
            heavy_calls,
            profile_tables_bytes,
            progress_after,
            http,
            max_jobs,
            nsys_export_timeout,
            uploads_total_bytes,
            output_roots,
            file: used,
        })
    }

    /// A configuration rooted in `home`, with everything else at defaults
    /// (tests and embedding).
    pub fn with_home(home: PathBuf) -> Config {
        Config {
            home,
            tools: Toolset::Default,
            allow_exec: false,
            token: None,
            llm: LlmConfig::default(),
            nccl_lib: None,
            nsys: None,
            ncu: None,
            limits: InputLimits::default(),
            heavy_calls: default_heavy_calls(),
            profile_tables_bytes: aisp_profile::loaded::DEFAULT_BUDGET_BYTES,
            progress_after: std::time::Duration::from_secs(1),
            http: HttpLimits::default(),
            max_jobs: DEFAULT_MAX_JOBS,
            nsys_export_timeout: DEFAULT_NSYS_EXPORT_TIMEOUT,
            uploads_total_bytes: DEFAULT_UPLOADS_TOTAL_BYTES,
            output_roots: Vec::new(),
            file: None,
        }
    }

    /// Where MCP and HTTP callers may write files: `$AISP_HOME/exports` first
    /// (relative paths resolve there), then the configured roots. The CLI and
    /// the Python API write wherever their user says.
    pub fn output_roots(&self) -> Vec<PathBuf> {
        let home = std::path::absolute(&self.home).unwrap_or_else(|_| self.home.clone());
        let mut roots = vec![home.join("exports")];
        for r in &self.output_roots {
            if !roots.contains(r) {
                roots.push(r.clone());
            }
        }
        roots
    }

    pub fn store_path(&self) -> PathBuf {
        self.home.join("aisp.sqlite")
    }

    pub fn cache_dir(&self) -> PathBuf {
        self.home.join("cache")
    }

    pub fn runs_dir(&self) -> PathBuf {
        self.home.join("runs")
    }
}

fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// `$XDG_CONFIG_HOME/aisp/config.toml` (`~/.config/aisp/config.toml`).
pub fn default_config_file() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("aisp").join("config.toml"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn environment_overrides_file_and_flags_override_environment() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "home = \"/from/file\"\ntools = \"core\"\nallow_exec = false\n[llm]\nmodel = \"file-model\"\napi_key = \"sk-file\"\nstream = true\n",
        )
        .unwrap();
        let env = env_of(&[("AISP_HOME", "/from/env"), ("AISP_LLM_MODEL", "env-model")]);
        let cfg = Config::load_with(&Overrides::default(), &env, Some(&file)).unwrap();
        assert_eq!(cfg.home, PathBuf::from("/from/env"));
        assert_eq!(cfg.tools, Toolset::Core);
        assert_eq!(cfg.llm.model.as_deref(), Some("env-model"));
        assert_eq!(cfg.llm.api_key.as_deref(), Some("sk-file"));
        assert!(cfg.llm.stream, "llm.stream from the file");
        let no_stream = env_of(&[("AISP_LLM_STREAM", "0")]);
        let off = Config::load_with(&Overrides::default(), &no_stream, Some(&file)).unwrap();
        assert!(!off.llm.stream, "AISP_LLM_STREAM=0 overrides the file");
        assert!(!cfg.allow_exec);
        assert_eq!(cfg.file.as_deref(), Some(file.as_path()));

        let flags = Overrides {
            home: Some("/from/flag".into()),
            allow_exec: Some(true),
            ..Overrides::default()
        };
        let cfg = Config::load_with(&flags, &env, Some(&file)).unwrap();
        assert_eq!(cfg.home, PathBuf::from("/from/flag"));
        assert!(cfg.allow_exec);
    }

    #[test]
    fn environment_and_flags_can_turn_off_allow_exec_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "allow_exec = true\n").unwrap();
        let load = |o: &Overrides, e: &[(&str, &str)]| {
            Config::load_with(o, &env_of(e), Some(&file))
                .unwrap()
                .allow_exec
        };
        let none = Overrides::default();
        assert!(load(&none, &[]), "the file alone allows");
        assert!(
            !load(&none, &[("AISP_ALLOW_EXEC", "0")]),
            "the environment wins over the file"
        );
        assert!(!load(&none, &[("AISP_ALLOW_EXEC", "false")]));
        let off = Overrides {
            allow_exec: Some(false),
            ..Overrides::default()
        };
        assert!(
            !load(&off, &[("AISP_ALLOW_EXEC", "1")]),
            "--no-allow-exec wins over both"
        );
        let on = Overrides {
            allow_exec: Some(true),
            ..Overrides::default()
        };
        std::fs::write(&file, "allow_exec = false\n").unwrap();
        assert!(
            load(&on, &[("AISP_ALLOW_EXEC", "0")]),
            "--allow-exec wins over both"
        );
    }

    #[test]
    fn limits_and_http_settings_come_from_file_and_environment() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "[limits]\nkineto_trace_mib = 10\nheavy_calls = 3\n[http]\nheader_timeout_s = 2.5\nmax_connections = 600\n",
        )
        .unwrap();
        let env = env_of(&[
            ("AISP_MAX_KINETO_TRACE_MIB", "20"),
            ("AISP_HTTP_BODY_TIMEOUT_S", "7"),
        ]);
        let cfg = Config::load_with(&Overrides::default(), &env, Some(&file)).unwrap();
        assert_eq!(cfg.limits.kineto_trace_bytes, 20 << 20);
        assert_eq!(
            cfg.limits.ncu_csv_bytes,
            InputLimits::default().ncu_csv_bytes
        );
        assert_eq!(cfg.heavy_calls, 3);
        assert_eq!(
            cfg.http.header_timeout,
            std::time::Duration::from_millis(2500)
        );
        assert_eq!(cfg.http.body_timeout, std::time::Duration::from_secs(7));
        assert_eq!(cfg.http.max_connections, 600);
        assert_eq!(cfg.max_jobs, DEFAULT_MAX_JOBS);
        assert_eq!(cfg.output_roots(), vec![cfg.home.join("exports")]);
        std::fs::write(
            &file,
            "[limits]\nmax_jobs = 5\nnsys_export_timeout_s = 60\nuploads_total_mib = 100\n\
             [http]\nmax_body_mib = 2\nmax_mcp_sessions = 10\nmcp_session_idle_s = 30\n\
             [outputs]\nroots = [\"/data/reports\"]\n",
        )
        .unwrap();
        let cfg = Config::load_with(
            &Overrides {
                home: Some("/h".into()),
                ..Overrides::default()
            },
            &env_of(&[]),
            Some(&file),
        )
        .unwrap();
        assert_eq!(cfg.max_jobs, 5);
        assert_eq!(cfg.nsys_export_timeout, std::time::Duration::from_secs(60));
        assert_eq!(cfg.uploads_total_bytes, 100 << 20);
        assert_eq!(cfg.http.max_body_bytes, 2 << 20);
        assert_eq!(cfg.http.max_mcp_sessions, 10);
        assert_eq!(
            cfg.http.mcp_session_idle,
            std::time::Duration::from_secs(30)
        );
        assert_eq!(
            cfg.output_roots(),
            vec![PathBuf::from("/h/exports"), PathBuf::from("/data/reports")]
        );
        let env = env_of(&[("AISP_OUTPUT_ROOTS", "/a:/b"), ("AISP_MAX_JOBS", "7")]);
        let cfg = Config::load_with(&Overrides::default(), &env, Some(&file)).unwrap();
        assert_eq!(
            cfg.output_roots[..],
            [PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert_eq!(cfg.max_jobs, 7);
        let env = env_of(&[("AISP_OUTPUT_ROOTS", "relative/dir")]);
        assert!(matches!(
            Config::load_with(&Overrides::default(), &env, None),
            Err(ConfigError::Invalid(_))
        ));
        let defaults = Config::load_with(&Overrides::default(), &env_of(&[]), None).unwrap();
        assert_eq!(defaults.http, HttpLimits::default());
        assert!(defaults.http.max_connections >= 512);
        for bad in [
            ("AISP_HEAVY_CALLS", "0"),
            ("AISP_MAX_NCU_CSV_MIB", "lots"),
            ("AISP_HTTP_HEADER_TIMEOUT_S", "-1"),
        ] {
            assert!(
                matches!(
                    Config::load_with(&Overrides::default(), &env_of(&[bad]), None),
                    Err(ConfigError::Invalid(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn openai_key_is_the_fallback_and_never_printed() {
        let env = env_of(&[("OPENAI_API_KEY", "sk-secret-123")]);
        let cfg = Config::load_with(&Overrides::default(), &env, None).unwrap();
        assert_eq!(cfg.llm.api_key.as_deref(), Some("sk-secret-123"));
        assert!(!format!("{cfg:?}").contains("sk-secret-123"));
    }

    #[test]
    fn bad_files_and_values_are_errors_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "home = [").unwrap();
        let err = Config::load_with(&Overrides::default(), &env_of(&[]), Some(&file)).unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }));
        std::fs::write(&file, "unknown_key = 1").unwrap();
        assert!(Config::load_with(&Overrides::default(), &env_of(&[]), Some(&file)).is_err());
        let env = env_of(&[("AISP_TOOLS", "not-a-domain")]);
        assert!(matches!(
            Config::load_with(&Overrides::default(), &env, None),
            Err(ConfigError::Invalid(_))
        ));
        let env = env_of(&[("AISP_ALLOW_EXEC", "1")]);
        assert!(
            Config::load_with(&Overrides::default(), &env, None)
                .unwrap()
                .allow_exec
        );
    }
}
