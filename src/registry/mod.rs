//! The one list of operations.
//!
//! Every capability of aisp is an [`Operation`]: a unit struct with a static
//! [`OpSpec`] (domain, name, description, annotations, flags), a typed input
//! and a typed output. The per-domain lists in [`crate::ops`] are concatenated
//! here into [`all`]; the MCP server, the CLI, the HTTP API and the generated
//! schemas are all derived from it. Nothing else lists operations.

pub mod documents;
pub mod python;
pub mod schema;
pub mod validate;

use std::sync::{Arc, OnceLock};

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::context::OpContext;
use crate::error::OpError;
use crate::toolset::Toolset;

/// A JSON object (what MCP calls `JsonObject`).
pub type JsonObject = Map<String, Value>;

/// MCP tool annotations, set truthfully per operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    /// Does not change anything outside aisp's own store and cache.
    pub read_only: bool,
    /// May delete or overwrite something the user cares about.
    pub destructive: bool,
    /// Calling twice with the same input has no further effect.
    pub idempotent: bool,
    /// Talks to an open world: runs user commands or reaches the network.
    pub open_world: bool,
}

impl Hints {
    /// A read-only query with no side effects (probes, file analysis, catalogs).
    pub const READ_ONLY: Hints = Hints {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    /// Runs work on the GPU and records results in the store, changing nothing else.
    pub const MEASURES: Hints = Hints {
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: false,
    };
    /// Runs a command the user supplies.
    pub const RUNS_COMMAND: Hints = Hints {
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: true,
    };
}

/// Where a tool appears in `tools/list` by default (every tool answers
/// `tools/call` whatever its tier).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// The `core` toolset: orient, triage, route, and the first look at a profile.
    Core,
    /// Listed by default besides core: the everyday questions of each domain.
    Default,
    /// Listed once its domain is enabled (`aisp_list_domains` with `enable`,
    /// `--tools <domain>` or `--tools all`). New operations start here.
    Domain,
}

/// At most this many characters (Python `json.dumps`) for one tool's whole MCP definition.
pub const TOOL_DEFINITION_BUDGET: usize = 8_192;
/// At most this many characters for the default listing's names, descriptions and input schemas.
pub const DEFAULT_LISTING_BUDGET: usize = 20_000;
/// At most this many characters for the `core` listing, counted the same way.
pub const CORE_LISTING_BUDGET: usize = 12_000;

/// Everything about an operation except its types and its code.
#[derive(Debug, Clone, Copy)]
pub struct OpSpec {
    /// Domain, e.g. `gpu`, `profile`, `benchmark` (snake_case).
    pub domain: &'static str,
    /// Operation name within the domain (snake_case).
    pub name: &'static str,
    /// True for the operations on the short-name list: the tool is `aisp_<name>`.
    pub short: bool,
    /// A human title (MCP `title`).
    pub title: &'static str,
    /// One line: what it does.
    pub summary: &'static str,
    /// The full description: what it does, when to use it, what it returns and
    /// how long it takes.
    pub description: &'static str,
    pub hints: Hints,
    /// Where the tool is listed by default; see [`Tier`].
    pub tier: Tier,
    /// Needs a usable NVIDIA GPU; without one the call fails with `gpu_unavailable`.
    pub needs_gpu: bool,
    /// Takes `timeout_s` and `async`, reports progress and honours cancellation.
    pub long_running: bool,
    /// Runs a command the user supplies; refused unless execution is allowed.
    pub executes_commands: bool,
    /// Its answer names what it leaves out (a top-level `left_out` list of sentences): it takes `max_chars` and is
    /// held to a size over MCP ([`crate::answer_cap`]). Set beside the output type, not read from its schema, so
    /// start-up builds no output schema; `answer_caps_are_the_output_schemas` holds the two together.
    pub leaves_out: bool,
    /// Parts of its answer that go first, in order, when the answer is over its size ([`crate::answer_cap::Shed`]).
    pub sheds: &'static [crate::answer_cap::Shed],
    /// The argument that brings one shed part back whole, named first in the note of a held answer (the rules'
    /// `finding`): cheaper than the whole answer.
    pub one_whole: Option<&'static str>,
    /// Input fields that the CLI also accepts as positional arguments, in order.
    pub positional: &'static [&'static str],
    /// Phrases a user might type for this tool (`aisp_suggest_tools` uses them).
    pub intents: &'static [&'static str],
    /// Example arguments as a JSON object literal (shown by `aisp_suggest_tools`).
    pub example: &'static str,
    /// Other CLI spellings, each `"<group> <command>"` (e.g. the seed's `bench report`).
    /// The CLI adds them as commands of `<group>`; MCP and HTTP names do not change.
    pub cli_aliases: &'static [&'static str],
}

impl OpSpec {
    /// A read-only, fast, GPU-free operation; fill in the rest with struct update syntax.
    pub const fn new(domain: &'static str, name: &'static str) -> OpSpec {
        OpSpec {
            domain,
            name,
            short: false,
            title: "",
            summary: "",
            description: "",
            hints: Hints::READ_ONLY,
            tier: Tier::Domain,
            needs_gpu: false,
            long_running: false,
            executes_commands: false,
            leaves_out: false,
            sheds: &[],
            one_whole: None,
            positional: &[],
            intents: &[],
            example: "{}",
            cli_aliases: &[],
        }
    }

    /// The MCP tool name: `aisp_<domain>_<name>` or, on the short list, `aisp_<name>`.
    pub fn tool_name(&self) -> String {
        if self.short {
            format!("aisp_{}", self.name)
        } else {
            format!("aisp_{}_{}", self.domain, self.name)
        }
    }

    /// The flags set on this operation, each named by `words` = (needs a GPU, runs long, runs a command).
    pub fn flags<'a>(&self, words: [&'a str; 3]) -> Vec<&'a str> {
        [self.needs_gpu, self.long_running, self.executes_commands]
            .into_iter()
            .zip(words)
            .filter_map(|(set, word)| set.then_some(word))
            .collect()
    }

    /// The HTTP route: `/api/<domain>/<op>` or, on the short list, `/api/<op>`.
    pub fn http_path(&self) -> String {
        if self.short {
            format!("/api/{}", self.name)
        } else {
            format!("/api/{}/{}", self.domain, self.name)
        }
    }
}

/// One operation. Implement this on a unit struct and add `&YourOp` to the
/// domain's `OPERATIONS` list in `crate::ops`.
///
/// `run` is synchronous and always executes on a blocking thread, so library
/// code can use SQLite, NVML and CUDA directly. Long-running operations poll
/// [`OpContext::check_cancelled`] and report [`OpContext::progress`].
pub trait Operation: Send + Sync + 'static {
    type Input: DeserializeOwned + JsonSchema + 'static;
    type Output: Serialize + JsonSchema + 'static;
    const SPEC: &'static OpSpec;

    fn run(&self, ctx: &OpContext, input: Self::Input) -> Result<Self::Output, OpError>;
}

/// The type-erased view of an [`Operation`] that the front ends use.
pub trait DynOperation: Send + Sync {
    fn spec(&self) -> &'static OpSpec;
    fn input_schema(&self) -> JsonObject;
    fn output_schema(&self) -> JsonObject;
    /// Parse `args` without running anything.
    fn check_args(&self, args: Value) -> Result<(), OpError>;
    /// Parse `args`, run, and serialize the output.
    fn call_json(&self, ctx: &OpContext, args: Value) -> Result<Value, OpError>;
}

impl<T: Operation> DynOperation for T {
    fn spec(&self) -> &'static OpSpec {
        T::SPEC
    }

    fn input_schema(&self) -> JsonObject {
        schema::input_schema::<T::Input>()
    }

    fn output_schema(&self) -> JsonObject {
        schema::output_schema::<T::Output>()
    }

    fn check_args(&self, args: Value) -> Result<(), OpError> {
        parse_input::<T::Input>(T::SPEC, args).map(drop)
    }

    fn call_json(&self, ctx: &OpContext, args: Value) -> Result<Value, OpError> {
        let input: T::Input = parse_input(T::SPEC, args)?;
        let output = self.run(ctx, input)?;
        serde_json::to_value(output)
            .map_err(|e| OpError::internal(format!("could not serialize the result: {e}")))
    }
}

/// Deserialize arguments, turning serde's message into an actionable error.
pub fn parse_input<I: DeserializeOwned>(spec: &OpSpec, args: Value) -> Result<I, OpError> {
    let args = match args {
        Value::Null => Value::Object(Map::new()),
        other => other,
    };
    if !args.is_object() {
        return Err(OpError::invalid_input(
            format!("arguments for {} must be a JSON object", spec.tool_name()),
            "Pass the arguments as an object, e.g. {}.",
        ));
    }
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        let what = json_words(&e.into_inner().to_string());
        let at = if path == "." || path.is_empty() {
            String::new()
        } else {
            format!("`{path}`: ")
        };
        OpError::invalid_input(
            format!("invalid arguments for {}: {at}{what}", spec.tool_name()),
            format!(
                "Check the argument names and types against the input schema \
                 (`aisp schemas` or tools/list). Example: {}",
                spec.example
            ),
        )
    })
}

/// serde's message in JSON words: `expected u32` → `expected an integer from 0
/// to 4294967295`, `expected struct Architecture` → `expected an object`.
pub fn json_words(serde_message: &str) -> String {
    use regex::Regex;
    static RULES: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    let rules = RULES.get_or_init(|| {
        [
            (r"\bu8\b", "an integer from 0 to 255"),
            (r"\bu16\b", "an integer from 0 to 65535"),
            (r"\bu32\b", "an integer from 0 to 4294967295"),
            (r"\b(u64|u128|usize)\b", "a non-negative integer"),
            (r"\bi8\b", "an integer from -128 to 127"),
            (r"\bi16\b", "an integer from -32768 to 32767"),
            (r"\bi32\b", "an integer from -2147483648 to 2147483647"),
            (r"\b(i64|i128|isize)\b", "an integer"),
            (r"\b(f32|f64)\b", "a number"),
            (r"\b(struct|tuple struct) \w+", "an object"),
            (r"\bstruct variant \w+::\w+", "an object"),
            (r"\benum \w+", "one of the allowed values"),
            (r"\ba map\b", "an object"),
            (r"\bmap\b", "an object"),
            (r"\ba sequence\b", "an array"),
            (r"\bsequence\b", "an array"),
            (r"\ba borrowed string\b", "a string"),
            (r"\bunit value\b", "null"),
            (r"\bfloating point `([^`]*)`", "number $1"),
            (r"\binteger `([^`]*)`", "integer $1"),
            (r"\bboolean `([^`]*)`", "$1"),
            (r"\bOption value\b", "a value or null"),
        ]
        .into_iter()
        .filter_map(|(re, to)| Regex::new(re).ok().map(|r| (r, to)))
        .collect()
    });
    let mut text = serde_message.to_string();
    for (re, to) in rules {
        text = re.replace_all(&text, *to).into_owned();
    }
    text
}

/// Every operation, in the order the domains and their lists give.
pub fn all() -> &'static [&'static dyn DynOperation] {
    static ALL: OnceLock<Vec<&'static dyn DynOperation>> = OnceLock::new();
    ALL.get_or_init(|| {
        crate::ops::DOMAINS
            .iter()
            .flat_map(|d| d.operations.iter().copied())
            .collect()
    })
}

/// A tool as the front ends present it, computed once.
#[derive(Clone)]
pub struct ToolDef {
    pub name: String,
    pub op: &'static dyn DynOperation,
    pub input_schema: Arc<JsonObject>,
    /// Made on first use: only `tools/list` and `aisp schemas` need output
    /// schemas, and generating all of them is most of a CLI call's start-up.
    pub(crate) output_schema: OnceLock<Arc<JsonObject>>,
}

impl std::fmt::Debug for ToolDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDef").field("name", &self.name).finish()
    }
}

impl ToolDef {
    pub fn spec(&self) -> &'static OpSpec {
        self.op.spec()
    }

    /// The output schema: the operation's output, the error envelope and, for
    /// long-running operations, the job ticket.
    ///
    /// Fitted so that the tool's whole definition stays within
    /// [`TOOL_DEFINITION_BUDGET`] (see [`schema::fit_output_schema`]).
    pub fn output_schema(&self) -> &Arc<JsonObject> {
        self.output_schema.get_or_init(|| {
            let spec = self.spec();
            let mut out = schema::with_alternatives(self.op.output_schema(), spec.long_running);
            let rest = self.definition_len_without_output();
            schema::fit_output_schema(&mut out, TOOL_DEFINITION_BUDGET.saturating_sub(rest));
            Arc::new(out)
        })
    }

    /// What the definition besides the output schema takes, counted generously:
    /// name, title (twice: the tool's and the annotations'), description,
    /// input schema, and the fixed keys of annotations and `_meta` (about 450
    /// characters, plus the domain name).
    fn definition_len_without_output(&self) -> usize {
        let spec = self.spec();
        let text = |s: &str| schema::python_json_len(&Value::String(s.to_string()));
        text(&self.name)
            + 2 * text(spec.title)
            + text(spec.description)
            + schema::python_json_len(&Value::Object((*self.input_schema).clone()))
            + text(spec.domain)
            + 600
    }

    /// The characters this tool adds to a listing as the budgets count them:
    /// `len(json.dumps({"name", "description", "input_schema"}))` in Python.
    pub fn listed_len(&self) -> usize {
        let mut m = Map::new();
        m.insert("name".into(), Value::String(self.name.clone()));
        m.insert(
            "description".into(),
            Value::String(self.spec().description.to_string()),
        );
        m.insert(
            "input_schema".into(),
            Value::Object((*self.input_schema).clone()),
        );
        schema::python_json_len(&Value::Object(m))
    }
}

/// All tools sorted by name (the deterministic `tools/list` order).
pub fn tools() -> &'static [ToolDef] {
    static TOOLS: OnceLock<Vec<ToolDef>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let mut tools: Vec<ToolDef> = all()
            .iter()
            .map(|op| {
                let spec = op.spec();
                let mut input = op.input_schema();
                if spec.long_running {
                    schema::add_long_running_inputs(&mut input);
                }
                ToolDef {
                    name: spec.tool_name(),
                    op: *op,
                    input_schema: Arc::new(input),
                    output_schema: OnceLock::new(),
                }
            })
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    })
}

/// Look a tool up by its MCP name.
pub fn find(tool_name: &str) -> Option<&'static ToolDef> {
    tools().iter().find(|t| t.name == tool_name)
}

/// Look an operation up by domain and name (the CLI and HTTP spelling).
pub fn find_op(domain: &str, name: &str) -> Option<&'static ToolDef> {
    tools()
        .iter()
        .find(|t| t.spec().domain == domain && t.spec().name == name)
}

/// Look an operation up by one of its CLI aliases (`group`, `command`).
pub fn find_alias(group: &str, command: &str) -> Option<&'static ToolDef> {
    let wanted = format!("{group} {}", command.replace('-', "_"));
    tools().iter().find(|t| {
        t.spec()
            .cli_aliases
            .iter()
            .any(|a| a.replace('-', "_") == wanted)
    })
}

/// Whether a tool is in the toolset's listing.
impl Toolset {
    pub fn includes(&self, tool: &ToolDef) -> bool {
        let tier = tool.spec().tier;
        match self {
            Toolset::Default => tier != Tier::Domain,
            Toolset::All => true,
            Toolset::Core => tier == Tier::Core,
            Toolset::Domains(domains) => domains.iter().any(|d| match d.as_str() {
                "core" => tier == Tier::Core,
                "default" => tier != Tier::Domain,
                d => d == tool.spec().domain,
            }),
        }
    }
}

/// Domain names in registry order.
pub fn domain_names() -> Vec<&'static str> {
    crate::ops::DOMAINS.iter().map(|d| d.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// The exhaustive list of operations allowed a short tool name.
    const SHORT_NAMES: &[&str] = &[
        "aisp_status",
        "aisp_triage",
        "aisp_ask",
        "aisp_explain",
        "aisp_recommend",
        "aisp_suggest_tools",
        "aisp_list_domains",
        "aisp_job_status",
        "aisp_job_list",
        "aisp_job_cancel",
    ];

    #[test]
    fn names_are_unique_valid_and_follow_the_naming_rule() {
        let mut seen = HashSet::new();
        for tool in tools() {
            let spec = tool.spec();
            assert!(
                seen.insert(tool.name.clone()),
                "duplicate tool {}",
                tool.name
            );
            assert!(tool.name.len() <= 128);
            assert!(
                tool.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{} has characters outside [a-z0-9_]",
                tool.name
            );
            if spec.short {
                assert!(
                    SHORT_NAMES.contains(&tool.name.as_str()),
                    "{} uses a short name but is not on the short-name list",
                    tool.name
                );
            } else {
                assert_eq!(tool.name, format!("aisp_{}_{}", spec.domain, spec.name));
            }
        }
    }

    #[test]
    fn every_operation_is_described() {
        for tool in tools() {
            let spec = tool.spec();
            assert!(!spec.title.is_empty(), "{} has no title", tool.name);
            assert!(!spec.summary.is_empty(), "{} has no summary", tool.name);
            assert!(
                spec.description.len() >= 80,
                "{} needs a description that says what, when, returns and how long",
                tool.name
            );
            let example: Value = serde_json::from_str(spec.example)
                .unwrap_or_else(|e| panic!("{}: example is not JSON: {e}", tool.name));
            assert!(
                example.is_object(),
                "{}: example must be an object",
                tool.name
            );
            for p in spec.positional {
                let props = tool
                    .input_schema
                    .get("properties")
                    .and_then(Value::as_object);
                assert!(
                    props.is_some_and(|p2| p2.contains_key(*p)),
                    "{}: positional `{p}` is not an input field",
                    tool.name
                );
            }
        }
    }

    #[test]
    fn examples_parse_as_inputs() {
        for tool in tools() {
            let args: Value = serde_json::from_str(tool.spec().example).unwrap();
            let (args, _) = crate::dispatch::split_run_control(tool, args).unwrap();
            if let Err(e) = tool.op.check_args(args) {
                panic!("{}: its example does not parse: {}", tool.name, e.message);
            }
        }
    }

    /// Schemas every client can read (the MCP Inspector's `--strict` rules): no
    /// type arrays, no schema that accepts anything (`true` or `{}`).
    #[test]
    fn schemas_are_portable() {
        fn walk(tool: &str, path: &str, v: &Value, problems: &mut Vec<String>) {
            match v {
                Value::Bool(true) => problems.push(format!("{tool} {path}: bare `true` schema")),
                Value::Object(o) => {
                    if o.is_empty() {
                        problems.push(format!(
                            "{tool} {path}: `{{}}` accepts anything; type the field"
                        ));
                    }
                    if matches!(o.get("type"), Some(Value::Array(_))) {
                        problems.push(format!("{tool} {path}: type array; use anyOf"));
                    }
                    for key in ["properties", "$defs"] {
                        if let Some(Value::Object(props)) = o.get(key) {
                            for (k, p) in props {
                                walk(tool, &format!("{path}.{key}.{k}"), p, problems);
                            }
                        }
                    }
                    for key in ["items", "additionalProperties"] {
                        if let Some(p) = o.get(key).filter(|p| !p.is_boolean()) {
                            walk(tool, &format!("{path}.{key}"), p, problems);
                        }
                    }
                    for key in ["anyOf", "oneOf", "allOf"] {
                        if let Some(Value::Array(alts)) = o.get(key) {
                            for (i, p) in alts.iter().enumerate() {
                                walk(tool, &format!("{path}.{key}[{i}]"), p, problems);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        let mut problems = Vec::new();
        for tool in tools() {
            walk(
                &tool.name,
                "input",
                &Value::Object((*tool.input_schema).clone()),
                &mut problems,
            );
            walk(
                &tool.name,
                "output",
                &Value::Object((**tool.output_schema()).clone()),
                &mut problems,
            );
        }
        assert!(
            problems.is_empty(),
            "unportable schemas:\n{}",
            problems.join("\n")
        );
    }

    /// Input fields become CLI flags beside the global ones: `format` would
    /// shadow `--format json|table` (the export kind is `kind`), `json` the
    /// `--json` object, and so on.
    #[test]
    fn no_input_field_collides_with_a_global_cli_flag() {
        const RESERVED: &[&str] = &[
            "format",
            "json",
            "home",
            "log_level",
            "allow_exec",
            "help",
            "version",
        ];
        for tool in tools() {
            let props = tool
                .input_schema
                .get("properties")
                .and_then(Value::as_object);
            for name in props.into_iter().flat_map(|p| p.keys()) {
                assert!(
                    !RESERVED.contains(&name.as_str()),
                    "{}: input field `{name}` collides with the CLI's global --{}; rename it (e.g. `kind`)",
                    tool.name,
                    name.replace('_', "-")
                );
            }
        }
    }

    #[test]
    fn executes_commands_implies_open_world_and_not_read_only() {
        for tool in tools() {
            let spec = tool.spec();
            if spec.executes_commands {
                assert!(
                    spec.hints.open_world && !spec.hints.read_only,
                    "{}",
                    tool.name
                );
            }
        }
    }

    /// `leaves_out` is set beside each operation so that start-up builds no output schema; the output schema is the
    /// truth it must match, tool by tool. Those tools take `max_chars` (from a cut answer's note), which no schema
    /// lists.
    #[test]
    fn answer_caps_are_the_output_schemas() {
        let mut wrong = Vec::new();
        for tool in tools() {
            let says = crate::answer_cap::says_left_out(&tool.op.output_schema());
            if tool.spec().leaves_out != says {
                wrong.push(format!(
                    "{}: leaves_out {} but its output says {says}",
                    tool.name,
                    tool.spec().leaves_out
                ));
            }
            let lists = tool.input_schema["properties"]
                .get(crate::answer_cap::MAX_CHARS)
                .is_some();
            assert!(!lists, "{} lists max_chars", tool.name);
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
        assert!(tools().iter().filter(|t| t.spec().leaves_out).count() >= 20);
    }

    #[test]
    fn toolsets_parse_and_filter() {
        assert_eq!(Toolset::parse("all").unwrap(), Toolset::All);
        assert_eq!(Toolset::parse("").unwrap(), Toolset::Default);
        assert_eq!(Toolset::parse("core").unwrap(), Toolset::Core);
        assert!(Toolset::parse("nonsense").is_err());
        let core: Vec<_> = tools()
            .iter()
            .filter(|t| Toolset::Core.includes(t))
            .map(|t| t.name.clone())
            .collect();
        for name in &core {
            assert_eq!(find(name).unwrap().spec().tier, Tier::Core);
        }
        assert!(core.contains(&"aisp_status".to_string()));
        assert!(core.contains(&"aisp_list_domains".to_string()));
    }

    /// The knowledge base's detections and the troubleshooting table's checks
    /// name only tools the registry has (moved here from the knowledge crate,
    /// which cannot see the registry).
    #[test]
    fn knowledge_names_only_known_tools() {
        let concepts = aisp_knowledge::concepts::all().unwrap_or_else(|e| panic!("{e}"));
        for c in concepts {
            for d in &c.detect {
                assert!(
                    find(&d.tool).is_some(),
                    "{}: detection names unknown tool {}",
                    c.id,
                    d.tool
                );
            }
        }
        let symptoms =
            aisp_knowledge::concepts::troubleshooting::all().unwrap_or_else(|e| panic!("{e}"));
        for s in symptoms {
            for cause in &s.causes {
                for check in &cause.checks {
                    assert!(
                        find(&check.tool).is_some(),
                        "{}: check names unknown tool {}",
                        s.id,
                        check.tool
                    );
                }
            }
        }
    }
}
