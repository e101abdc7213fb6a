//! Test harness: the real `aisp` binary, a private AISP_HOME, and servers
//! started on free ports.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn aisp_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_aisp"))
}

/// A command for the real binary with a private home and no host config.
pub fn aisp(home: &Path) -> Command {
    let mut cmd = Command::new(aisp_bin());
    isolate(&mut cmd, home);
    cmd
}

/// Keep the test away from the developer's config, keys and tool settings.
pub fn isolate(cmd: &mut Command, home: &Path) {
    cmd.env("AISP_HOME", home)
        .env("AISP_CONFIG", home.join("no-config.toml"))
        .env_remove("AISP_TOOLS")
        .env_remove("AISP_ALLOW_EXEC")
        .env_remove("AISP_TOKEN")
        .env_remove("AISP_LLM_BASE_URL")
        .env_remove("AISP_LLM_MODEL")
        .env_remove("AISP_LLM_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env("RUST_LOG", "warn");
}

/// An `aisp serve --transport http` process, killed on drop.
pub struct HttpServer {
    pub child: Child,
    pub addr: SocketAddr,
    pub home: tempfile::TempDir,
}

impl HttpServer {
    pub fn start(extra: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let home = tempfile::tempdir().unwrap();
        let mut cmd = aisp(home.path());
        cmd.args(["serve", "--transport", "http", "--bind", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn aisp serve");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let addr = rest.split_whitespace().next().unwrap_or("").to_string();
                    let _ = tx.send(addr);
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("server printed its address");
        HttpServer {
            child,
            addr: addr.parse().unwrap(),
            home,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Poll `f` until it returns Some or `timeout` passes.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if Instant::now() > end {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// [`isolate`] for a tokio command (rmcp's child-process transport).
pub fn isolate_tokio(cmd: &mut tokio::process::Command, home: &Path) {
    cmd.env("AISP_HOME", home)
        .env("AISP_CONFIG", home.join("no-config.toml"))
        .env_remove("AISP_TOOLS")
        .env_remove("AISP_ALLOW_EXEC")
        .env_remove("AISP_TOKEN")
        .env_remove("AISP_LLM_BASE_URL")
        .env_remove("AISP_LLM_MODEL")
        .env_remove("AISP_LLM_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env("RUST_LOG", "warn");
}
