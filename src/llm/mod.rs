//! Questions answered with evidence: an OpenAI-compatible chat client, aisp's
//! read-only operations as function tools, an agent loop with step and token
//! budgets, an intent router and answer composer for when no LLM is
//! available, citations, and conversations kept in the store.
//!
//! Nothing here knows about MCP; `crate::ops::ai` is the thin layer on top.

pub mod agent;
pub mod ask;
pub mod client;
pub mod conversation;
pub mod evidence;
pub mod offline;
pub mod router;
pub mod tools;

pub use ask::{AskAnswer, AskOptions, AskRequest, ask};
pub use client::{ClientOptions, LlmClient, LlmError};

/// The client's settings from the application's `[llm]` configuration.
impl From<&crate::config::LlmConfig> for client::ClientSettings {
    fn from(c: &crate::config::LlmConfig) -> client::ClientSettings {
        client::ClientSettings {
            base_url: c.base_url.clone(),
            model: c.model.clone(),
            api_key: c.api_key.clone(),
            stream: c.stream,
        }
    }
}
