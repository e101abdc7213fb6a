//! The server front ends: MCP over stdio, and MCP plus the HTTP API over
//! streamable HTTP on one port.

pub mod http;
pub mod mcp;
pub mod stdio;

use std::sync::Arc;

use rmcp::ServiceExt;

use crate::app::AppState;

pub use mcp::AispServer;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the MCP session failed: {0}")]
    Mcp(String),
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Config(String),
    #[error("the HTTP server failed: {0}")]
    Http(std::io::Error),
}

/// Serve MCP on stdin/stdout until the client closes stdin.
pub async fn serve_stdio(app: Arc<AppState>) -> Result<(), ServeError> {
    app.spawn_gpu_probe();
    let server = AispServer::new(app);
    let (read, write) = rmcp::transport::stdio_pipes();
    let transport = stdio::StdioTransport::new(read, write, server.session_tools());
    let running = server
        .serve(transport)
        .await
        .map_err(|e| ServeError::Mcp(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| ServeError::Mcp(e.to_string()))?;
    Ok(())
}
