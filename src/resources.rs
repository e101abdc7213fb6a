//! MCP resources: documents a model can read. Today one, the getting-started
//! guide (`aisp://guide/getting-started`), kept short enough to read whole.

/// A static text resource.
pub struct ResourceDef {
    pub uri: &'static str,
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub mime_type: &'static str,
    pub text: &'static str,
}

/// Every resource the server offers.
pub fn all() -> &'static [ResourceDef] {
    RESOURCES
}

pub fn find(uri: &str) -> Option<&'static ResourceDef> {
    RESOURCES.iter().find(|r| r.uri == uri)
}

/// The URI of the getting-started guide.
pub const GUIDE_URI: &str = "aisp://guide/getting-started";

const RESOURCES: &[ResourceDef] = &[ResourceDef {
    uri: GUIDE_URI,
    name: "getting-started",
    title: "aisp: getting started (for models)",
    description: "Where to start, how to list more tools, async jobs, errors and prompts, in one page.",
    mime_type: "text/markdown",
    text: include_str!("guide/getting-started.md"),
}];

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything the guide names exists: tools, prompts, error kinds.
    #[test]
    fn the_guide_names_only_real_tools_and_prompts() {
        let guide = find(GUIDE_URI).unwrap().text;
        assert!(
            guide.len() < 4_000,
            "the guide stays short: {}",
            guide.len()
        );
        let mut named = 0;
        for word in guide.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("aisp_") {
                assert!(crate::registry::find(word).is_some(), "unknown tool {word}");
                named += 1;
            }
        }
        assert!(named >= 10);
        for p in crate::prompts::all() {
            assert!(guide.contains(p.name), "the guide lists prompt {}", p.name);
        }
        for k in crate::error::ErrorKind::ALL {
            assert!(
                guide.contains(k.as_str()),
                "the guide lists error kind {k:?}"
            );
        }
    }
}
