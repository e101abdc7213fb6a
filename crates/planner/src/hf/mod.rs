//! Hugging Face models: search the Hub and read a model's `config.json` from
//! a folder, the local Hugging Face cache, or the Hub, in that order, so the
//! planners can take `model: "hf:org/name"`.
//!
//! The Hub is reached through its documented HTTP API: `GET
//! {endpoint}/api/models?search=<q>&limit=<n>&sort=downloads&direction=-1`
//! and `GET {endpoint}/{repo}/resolve/{revision}/config.json`, with
//! `Authorization: Bearer <token>` when a token is set. The endpoint, token,
//! cache and offline switch come from the same environment variables the
//! `huggingface_hub` library reads (see [`HfEnv::from_env`]).

pub(crate) mod config;

use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// config.json files are a few KB; anything near this is not one.
const MAX_CONFIG_BYTES: usize = 4 << 20;
const MAX_SEARCH_BYTES: usize = 16 << 20;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HfError {
    #[error("the Hugging Face Hub at {endpoint} could not be reached (offline?): {detail}")]
    Offline { endpoint: String, detail: String },
    #[error("HF_HUB_OFFLINE is set and {repo} is not in the local cache ({cache})")]
    OfflineNotCached { repo: String, cache: String },
    #[error("{repo} needs a Hugging Face token with access (HTTP {status} from {url})")]
    Unauthorized {
        repo: String,
        status: u16,
        url: String,
    },
    #[error("{0}")]
    NotFound(String),
    #[error("the Hub answered HTTP {status} for {url}")]
    Http { status: u16, url: String },
    #[error("{0}")]
    BadConfig(String),
    #[error(
        "`{0}` is not a model id: use org/name (e.g. meta-llama/Llama-3.1-8B), optionally @revision, or a folder path"
    )]
    BadId(String),
}

/// Where to look, from the environment.
#[derive(Debug, Clone)]
pub struct HfEnv {
    pub endpoint: String,
    pub token: Option<String>,
    /// The hub cache folder (holding `models--org--name`).
    pub hub_cache: PathBuf,
    /// Never touch the network (HF_HUB_OFFLINE).
    pub offline: bool,
    pub timeout: Duration,
}

fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

impl HfEnv {
    /// `HF_ENDPOINT`, `HF_TOKEN` (or `HUGGING_FACE_HUB_TOKEN`, or the file at
    /// `HF_TOKEN_PATH` / `$HF_HOME/token`), `HF_HUB_CACHE` (or `$HF_HOME/hub`,
    /// or `~/.cache/huggingface/hub`), `HF_HUB_OFFLINE`.
    pub fn from_env() -> HfEnv {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let home = var("HF_HOME").map(PathBuf::from).unwrap_or_else(|| {
            var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(dirs::cache_dir)
                .unwrap_or_else(|| PathBuf::from(".cache"))
                .join("huggingface")
        });
        let token = var("HF_TOKEN")
            .or_else(|| var("HUGGING_FACE_HUB_TOKEN"))
            .or_else(|| {
                let p = var("HF_TOKEN_PATH")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| home.join("token"));
                std::fs::read_to_string(p)
                    .ok()
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
            });
        HfEnv {
            endpoint: var("HF_ENDPOINT")
                .map(|e| e.trim_end_matches('/').to_string())
                .unwrap_or_else(|| DEFAULT_ENDPOINT.into()),
            token,
            hub_cache: var("HF_HUB_CACHE")
                .or_else(|| var("HUGGINGFACE_HUB_CACHE"))
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join("hub")),
            offline: var("HF_HUB_OFFLINE").is_some_and(|v| truthy(&v)),
            timeout: Duration::from_secs(20),
        }
    }
}

/// What the caller named: a Hub repo (with revision) or a folder.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelRef {
    Repo { repo: String, revision: String },
    Folder(PathBuf),
}

impl ModelRef {
    /// `org/name`, `org/name@rev`, `hf:` prefixes allowed; a path (`/`, `./`, `~/`, or an existing folder) is a folder.
    pub fn parse(text: &str) -> Result<ModelRef, HfError> {
        let t = text.trim();
        let t = t.strip_prefix("hf:").unwrap_or(t).trim();
        let t = t.strip_prefix("https://huggingface.co/").unwrap_or(t);
        if t.starts_with('/') || t.starts_with("./") || t.starts_with("../") || t.starts_with("~/")
        {
            let p = match t.strip_prefix("~/") {
                Some(rest) => dirs::home_dir().unwrap_or_default().join(rest),
                None => PathBuf::from(t),
            };
            return Ok(ModelRef::Folder(p));
        }
        let (repo, revision) = match t.split_once('@') {
            Some((r, v)) => (r, v.to_string()),
            None => (t, "main".to_string()),
        };
        let ok_part = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                && !s.starts_with('.')
        };
        let parts: Vec<&str> = repo.split('/').collect();
        let valid = match parts.as_slice() {
            [name] => ok_part(name),
            [org, name] => ok_part(org) && ok_part(name),
            _ => false,
        };
        let rev_ok = !revision.is_empty()
            && !revision.contains("..")
            && revision
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
        if !valid || !rev_ok {
            if Path::new(t).is_dir() {
                return Ok(ModelRef::Folder(PathBuf::from(t)));
            }
            return Err(HfError::BadId(text.to_string()));
        }
        Ok(ModelRef::Repo {
            repo: repo.to_string(),
            revision,
        })
    }
}

/// A config.json and where it came from.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FetchedConfig {
    /// `org/name`, or the folder.
    pub model: String,
    /// `folder`, `cache` or `hub`.
    pub source: String,
    /// File path or URL read.
    pub location: String,
    /// Commit (cache snapshot or the Hub's X-Repo-Commit), when known.
    pub revision: Option<String>,
    pub config: Value,
}

fn parse_json(bytes: &[u8], what: &str) -> Result<Value, HfError> {
    serde_json::from_slice(bytes)
        .map_err(|e| HfError::BadConfig(format!("{what} is not valid JSON: {e}")))
}

fn read_config_file(p: &Path) -> Result<Value, HfError> {
    let meta =
        std::fs::metadata(p).map_err(|e| HfError::NotFound(format!("{}: {e}", p.display())))?;
    if meta.len() as usize > MAX_CONFIG_BYTES {
        return Err(HfError::BadConfig(format!(
            "{} is {} bytes, too large for a config.json",
            p.display(),
            meta.len()
        )));
    }
    let bytes = std::fs::read(p).map_err(|e| HfError::NotFound(format!("{}: {e}", p.display())))?;
    parse_json(&bytes, &p.display().to_string())
}

/// `models--org--name` for `org/name`.
pub fn cache_folder(hub_cache: &Path, repo: &str) -> PathBuf {
    hub_cache.join(format!("models--{}", repo.replace('/', "--")))
}

/// The cached config.json of `repo` at `revision` (a branch/tag in refs/, or a commit).
pub fn from_cache(hub_cache: &Path, repo: &str, revision: &str) -> Option<(PathBuf, String)> {
    let base = cache_folder(hub_cache, repo);
    let commit = std::fs::read_to_string(base.join("refs").join(revision))
        .ok()
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| revision.to_string());
    if commit.contains('/') || commit.contains("..") {
        return None;
    }
    let p = base.join("snapshots").join(&commit).join("config.json");
    p.is_file().then_some((p, commit))
}

/// How this library reaches the Hub: one GET. The application supplies it
/// (with its HTTP client, [`set_client`]); the library keeps the cache
/// lookup, the parsing and the mapping, and pulls in no HTTP or async runtime.
pub trait HubClient: Send + Sync {
    /// GET `url` with `env.token` as a bearer token (when set), within
    /// `env.timeout`: the HTTP status, the `x-repo-commit` header and the body.
    /// A body larger than `limit` bytes is a [`HfError::BadConfig`]; a request
    /// that does not get an answer is a [`HfError::Offline`].
    fn get(
        &self,
        env: &HfEnv,
        url: &str,
        limit: usize,
    ) -> Result<(u16, Option<String>, Vec<u8>), HfError>;
}

static CLIENT: std::sync::OnceLock<Box<dyn HubClient>> = std::sync::OnceLock::new();

/// Install the process's Hub client (the first one installed stays).
pub fn set_client(client: Box<dyn HubClient>) {
    let _ = CLIENT.set(client);
}

fn get(env: &HfEnv, url: &str, limit: usize) -> Result<(u16, Option<String>, Vec<u8>), HfError> {
    match CLIENT.get() {
        Some(client) => client.get(env, url, limit),
        None => Err(HfError::Offline {
            endpoint: env.endpoint.clone(),
            detail: "no HTTP client is installed in this process".into(),
        }),
    }
}

/// Read config.json from the folder, the cache, then the Hub.
pub fn fetch_config(env: &HfEnv, model: &ModelRef) -> Result<FetchedConfig, HfError> {
    let (repo, revision) = match model {
        ModelRef::Folder(dir) => {
            let p = if dir.is_file() {
                dir.clone()
            } else {
                dir.join("config.json")
            };
            if !p.is_file() {
                return Err(HfError::NotFound(format!(
                    "no config.json in {}",
                    dir.display()
                )));
            }
            return Ok(FetchedConfig {
                model: dir.display().to_string(),
                source: "folder".into(),
                location: p.display().to_string(),
                revision: None,
                config: read_config_file(&p)?,
            });
        }
        ModelRef::Repo { repo, revision } => (repo, revision),
    };
    if let Some((p, commit)) = from_cache(&env.hub_cache, repo, revision) {
        return Ok(FetchedConfig {
            model: repo.clone(),
            source: "cache".into(),
            location: p.display().to_string(),
            revision: Some(commit),
            config: read_config_file(&p)?,
        });
    }
    if env.offline {
        return Err(HfError::OfflineNotCached {
            repo: repo.clone(),
            cache: env.hub_cache.display().to_string(),
        });
    }
    let url = format!("{}/{repo}/resolve/{revision}/config.json", env.endpoint);
    let (status, commit, body) = get(env, &url, MAX_CONFIG_BYTES)?;
    match status {
        200 => Ok(FetchedConfig {
            model: repo.clone(),
            source: "hub".into(),
            location: url,
            revision: commit,
            config: parse_json(&body, "the Hub's config.json")?,
        }),
        401 | 403 => Err(HfError::Unauthorized {
            repo: repo.clone(),
            status,
            url,
        }),
        404 => Err(HfError::NotFound(format!(
            "{repo} (revision {revision}) has no config.json on {} (HTTP 404)",
            env.endpoint
        ))),
        s => Err(HfError::Http { status: s, url }),
    }
}

/// One search hit.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HubModel {
    pub id: String,
    pub downloads: Option<u64>,
    pub likes: Option<u64>,
    pub pipeline_tag: Option<String>,
    pub library: Option<String>,
    pub last_modified: Option<String>,
    pub gated: bool,
}

/// Search the Hub's models, most downloaded first.
pub fn search(env: &HfEnv, query: &str, limit: u32) -> Result<Vec<HubModel>, HfError> {
    if env.offline {
        return Err(HfError::Offline {
            endpoint: env.endpoint.clone(),
            detail: "HF_HUB_OFFLINE is set, and searching needs the Hub".into(),
        });
    }
    let q: String = query
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let url = format!(
        "{}/api/models?search={q}&limit={}&sort=downloads&direction=-1",
        env.endpoint,
        limit.clamp(1, 100)
    );
    let (status, _, body) = get(env, &url, MAX_SEARCH_BYTES)?;
    if status != 200 {
        return Err(HfError::Http { status, url });
    }
    let v = parse_json(&body, "the Hub's search answer")?;
    let Some(items) = v.as_array() else {
        return Err(HfError::BadConfig(
            "the Hub's search answer is not a list".into(),
        ));
    };
    Ok(items
        .iter()
        .filter_map(|m| {
            let id = m
                .get("id")
                .or_else(|| m.get("modelId"))?
                .as_str()?
                .to_string();
            let s = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
            Some(HubModel {
                id,
                downloads: m.get("downloads").and_then(Value::as_u64),
                likes: m.get("likes").and_then(Value::as_u64),
                pipeline_tag: s("pipeline_tag"),
                library: s("library_name"),
                last_modified: s("lastModified").or_else(|| s("createdAt")),
                gated: m
                    .get("gated")
                    .is_some_and(|g| g.as_bool().unwrap_or(g.is_string())),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_refs_parse() {
        assert_eq!(
            ModelRef::parse("hf:meta-llama/Llama-3.1-8B").unwrap(),
            ModelRef::Repo {
                repo: "meta-llama/Llama-3.1-8B".into(),
                revision: "main".into()
            }
        );
        assert_eq!(
            ModelRef::parse("Qwen/Qwen2.5-7B@v1.0").unwrap(),
            ModelRef::Repo {
                repo: "Qwen/Qwen2.5-7B".into(),
                revision: "v1.0".into()
            }
        );
        assert_eq!(
            ModelRef::parse("hf:/models/x").unwrap(),
            ModelRef::Folder("/models/x".into())
        );
        for bad in ["a/b/c", "hf:", "org/../x", "org/na me", "org/x@../../etc"] {
            assert!(ModelRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cache_layout_resolves_refs_and_commits() {
        let d = tempfile::tempdir().unwrap();
        let base = cache_folder(d.path(), "meta-llama/Llama-3.1-8B");
        let snap = base.join("snapshots/0e9e39f249a16976918f6564b8830bc894c89659");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::create_dir_all(base.join("refs")).unwrap();
        std::fs::write(
            base.join("refs/main"),
            "0e9e39f249a16976918f6564b8830bc894c89659\n",
        )
        .unwrap();
        std::fs::write(snap.join("config.json"), "{}").unwrap();
        let (p, c) = from_cache(d.path(), "meta-llama/Llama-3.1-8B", "main").unwrap();
        assert_eq!(p, snap.join("config.json"));
        assert_eq!(c, "0e9e39f249a16976918f6564b8830bc894c89659");
        assert!(
            from_cache(
                d.path(),
                "meta-llama/Llama-3.1-8B",
                "0e9e39f249a16976918f6564b8830bc894c89659"
            )
            .is_some()
        );
        assert!(from_cache(d.path(), "meta-llama/Llama-3.1-8B", "dev").is_none());
        assert!(from_cache(d.path(), "other/model", "main").is_none());
    }

    #[test]
    fn offline_without_a_cache_says_so() {
        let d = tempfile::tempdir().unwrap();
        let env = HfEnv {
            endpoint: DEFAULT_ENDPOINT.into(),
            token: None,
            hub_cache: d.path().into(),
            offline: true,
            timeout: Duration::from_secs(1),
        };
        let m = ModelRef::parse("meta-llama/Llama-3.1-8B").unwrap();
        let e = fetch_config(&env, &m).unwrap_err();
        assert!(matches!(e, HfError::OfflineNotCached { .. }));
        // A closed port: the Hub cannot be reached.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let env = HfEnv {
            endpoint: format!("http://127.0.0.1:{port}"),
            offline: false,
            ..env
        };
        let e = fetch_config(&env, &m).unwrap_err();
        assert!(matches!(e, HfError::Offline { .. }), "{e}");
        assert!(e.to_string().contains("could not be reached"), "{e}");
    }
}
