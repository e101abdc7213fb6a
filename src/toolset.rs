//! Which tools a session lists first (`--tools`, `AISP_TOOLS`, config
//! `tools`): parsed where the configuration is read, applied by the registry
//! ([`Toolset::includes`]).

/// Which tools `tools/list` shows at the start of a session. Hidden tools
/// still answer `tools/call`, and an MCP session can list more with
/// `aisp_list_domains` and `enable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Toolset {
    /// Tiers core and default (the server's default).
    Default,
    All,
    /// Tier core only.
    Core,
    /// Whole domains; `core` and `default` name those tiers.
    Domains(Vec<String>),
}

impl Toolset {
    /// Parse `default`, `all`, `core` or a comma-separated list of domains
    /// (which may include `core` and `default`).
    pub fn parse(text: &str) -> Result<Toolset, String> {
        let text = text.trim();
        match text {
            "" | "default" => Ok(Toolset::Default),
            "all" => Ok(Toolset::All),
            "core" => Ok(Toolset::Core),
            list => {
                let known: Vec<&str> = crate::ops::DOMAINS.iter().map(|d| d.name).collect();
                let mut domains = Vec::new();
                for d in list.split(',').map(str::trim).filter(|d| !d.is_empty()) {
                    if d == "core" || d == "default" {
                        domains.push(d.to_string());
                        continue;
                    }
                    if !known.contains(&d) {
                        return Err(format!(
                            "unknown toolset or domain `{d}`; use default, all, core or a comma-separated list of: {}",
                            known.join(", ")
                        ));
                    }
                    domains.push(d.to_string());
                }
                Ok(Toolset::Domains(domains))
            }
        }
    }
}
