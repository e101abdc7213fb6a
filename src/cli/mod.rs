//! The command line: `aisp <domain> <op> [--flags]`, `aisp <op>` for short
//! names, `aisp serve`, `aisp tools`, `aisp schemas`. Commands are generated
//! from the registry; flags from each operation's input schema.
//!
//! Exit codes: 0 success, 1 the operation returned an error, 2 usage error.

pub mod args;
pub mod hints;
pub mod readme;
pub mod table;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Arg, ArgAction, ArgMatches, Command, value_parser};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::app::AppState;
use crate::config::{Config, Overrides};
use crate::context::ProgressSink;
use crate::dispatch::{self, CallOptions};
use crate::error::OpError;
use crate::registry::{self, ToolDef, documents};
use crate::server;

const ABOUT: &str = "The toolkit of a GPU performance engineer, for AI assistants and people: \
probe GPUs, read Nsight Systems profiles, capture profiles, run CUDA microbenchmarks, plan training and \
inference deployments. Serve it to an MCP client with `aisp serve`.";

const AFTER_HELP: &str = "Examples:
  aisp status                                  what this machine has
  aisp profile summary train.sqlite            nsys stats-style report of a profile
  aisp tools                                   every operation
  aisp serve                                   MCP over stdio (for Claude, Cursor, ...)
  aisp serve --transport http --bind 127.0.0.1:8765";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Table,
}

/// Build the whole command tree.
pub fn command() -> Command {
    let mut cmd = Command::new("aisp")
        .version(env!("CARGO_PKG_VERSION"))
        .about(ABOUT)
        .after_help(AFTER_HELP)
        .subcommand_required(true)
        .arg_required_else_help(true)
        .arg(
            Arg::new("log-level")
                .long("log-level")
                .global(true)
                .value_name("LEVEL")
                .help("Log level for stderr: error, warn, info, debug, trace (or a RUST_LOG filter)"),
        )
        .arg(
            Arg::new("home")
                .long("home")
                .global(true)
                .value_name("DIR")
                .value_parser(value_parser!(PathBuf))
                .help("Store, cache and run artifacts directory [env: AISP_HOME]"),
        )
        .arg(
            Arg::new("allow-exec")
                .long("allow-exec")
                .global(true)
                .action(ArgAction::SetTrue)
                .overrides_with("no-allow-exec")
                .help("Allow operations that run a command you supply (profiler captures) [env: AISP_ALLOW_EXEC=1]"),
        )
        .arg(
            Arg::new("no-allow-exec")
                .long("no-allow-exec")
                .global(true)
                .action(ArgAction::SetTrue)
                .overrides_with("allow-exec")
                .help("Refuse operations that run a command you supply, whatever the config file or AISP_ALLOW_EXEC say"),
        )
        .arg(
            Arg::new("format")
                .long("format")
                .global(true)
                .value_parser(["json", "table"])
                .help("Output format [default: table on a terminal, json otherwise]"),
        );

    // The kernel lab's worker process (aisp_hw::bench::lab::runner starts it); not for people.
    cmd = cmd.subcommand(Command::new(aisp_hw::bench::lab::runner::WORKER_SUBCOMMAND).hide(true));
    cmd = cmd.subcommand(serve_command());
    cmd = cmd.subcommand(dashboard_command());
    cmd = cmd.subcommand(
        Command::new("tools").about("List every operation: MCP tool, CLI command, flags"),
    );
    cmd = cmd.subcommand(
        Command::new("schemas")
            .about("Write or check tool-schemas/ (one JSON file per tool)")
            .arg(
                Arg::new("write")
                    .long("write")
                    .value_name("DIR")
                    .value_parser(value_parser!(PathBuf))
                    .conflicts_with("check"),
            )
            .arg(
                Arg::new("check")
                    .long("check")
                    .value_name("DIR")
                    .value_parser(value_parser!(PathBuf)),
            )
            .arg(
                Arg::new("readme")
                    .long("readme")
                    .value_name("FILE")
                    .value_parser(value_parser!(PathBuf))
                    .help("Also regenerate the tool table between the markers in this README"),
            )
            .arg(
                Arg::new("python-stubs")
                    .long("python-stubs")
                    .value_name("FILE")
                    .value_parser(value_parser!(PathBuf))
                    .help("Also write the Python API's type stubs (python/aisp/__init__.pyi)"),
            ),
    );

    for domain in crate::ops::DOMAINS
        .iter()
        .filter(|d| !d.operations.is_empty())
    {
        let mut dc = Command::new(domain.name)
            .about(domain.description)
            .subcommand_required(true)
            .arg_required_else_help(true);
        for op in domain.operations {
            let tool = registry::find(&op.spec().tool_name()).expect("listed operation");
            dc = dc.subcommand(op_command(tool));
        }
        cmd = cmd.subcommand(dc);
    }
    for tool in registry::tools().iter().filter(|t| t.spec().short) {
        cmd = cmd.subcommand(op_command(tool));
    }
    alias_commands(cmd)
}

/// The CLI aliases the registry declares (`OpSpec::cli_aliases`, `"<group> <command>"`):
/// each becomes `<command>` under `<group>`, a domain's command or a new group.
fn alias_commands(mut cmd: Command) -> Command {
    let mut groups: Vec<(String, Vec<(String, &'static ToolDef)>)> = Vec::new();
    for tool in registry::tools() {
        for alias in tool.spec().cli_aliases {
            let Some((group, name)) = alias.split_once(' ') else {
                continue;
            };
            match groups.iter_mut().find(|(g, _)| g == group) {
                Some((_, list)) => list.push((name.to_string(), tool)),
                None => groups.push((group.to_string(), vec![(name.to_string(), tool)])),
            }
        }
    }
    for (group, list) in groups {
        let existing = cmd.find_subcommand(&group).cloned();
        let mut g = existing.clone().unwrap_or_else(|| {
            Command::new(group.clone())
                .about("Other spellings of export commands (the seed's `aisp bench export|report`)")
                .subcommand_required(true)
                .arg_required_else_help(true)
        });
        for (name, tool) in list {
            g = g.subcommand(
                op_command(tool)
                    .name(name.clone())
                    .about(format!("Same as `{}`", documents::cli_usage(tool))),
            );
        }
        cmd = if existing.is_some() {
            cmd.mut_subcommand(&group, |_| g)
        } else {
            cmd.subcommand(g)
        };
    }
    cmd
}

fn serve_command() -> Command {
    http_args(
        Command::new("serve")
            .about("Serve the tools over MCP: stdio (default) or streamable HTTP with the HTTP API and the dashboard")
            .arg(
                Arg::new("transport")
                    .long("transport")
                    .value_parser(["stdio", "http"])
                    .default_value("stdio"),
            ),
    )
}

fn dashboard_command() -> Command {
    http_args(
        Command::new("dashboard")
            .about("Serve over HTTP (MCP, API and the web dashboard) and open the dashboard in a browser")
            .arg(
                Arg::new("no-open")
                    .long("no-open")
                    .action(ArgAction::SetTrue)
                    .help("Print the dashboard's URL without opening a browser"),
            ),
    )
}

/// The options of the HTTP server, shared by `serve` and `dashboard`.
fn http_args(cmd: Command) -> Command {
    cmd.arg(
            Arg::new("bind")
                .long("bind")
                .value_name("ADDR")
                .default_value("127.0.0.1:8765")
                .value_parser(value_parser!(SocketAddr))
                .help("Address for --transport http (loopback by default; other addresses need a token)"),
        )
        .arg(
            Arg::new("token")
                .long("token")
                .value_name("TOKEN")
                .help("Bearer token HTTP clients must send [env: AISP_TOKEN]"),
        )
        .arg(
            Arg::new("tools")
                .long("tools")
                .value_name("SET")
                .help("Toolset tools/list starts with: default, all, core, or domains like gpu,profile [env: AISP_TOOLS] (aisp_list_domains with enable lists more; hidden tools still answer tools/call)"),
        )
        .arg(
            Arg::new("allowed-host")
                .long("allowed-host")
                .action(ArgAction::Append)
                .value_name("HOST")
                .help("Extra Host header value to accept (DNS-rebinding guard)"),
        )
        .arg(
            Arg::new("allowed-origin")
                .long("allowed-origin")
                .action(ArgAction::Append)
                .value_name("ORIGIN")
                .help("Extra browser Origin to accept, e.g. https://app.example.com:443"),
        )
}

fn op_command(tool: &ToolDef) -> Command {
    let spec = tool.spec();
    let name = spec.name.replace('_', "-");
    let mut c = Command::new(name.clone())
        .about(spec.summary)
        .long_about(format!(
            "{}\n\nMCP tool: {}    HTTP: POST {}",
            spec.description,
            tool.name,
            spec.http_path()
        ))
        .arg(
            Arg::new("json")
                .long("json")
                .value_name("JSON")
                .help("All arguments as one JSON object (flags given as well override it)"),
        );
    if name != spec.name {
        c = c.alias(spec.name);
    }
    args::add_input_args(c, tool)
}

/// Entry point of the `aisp` binary.
pub fn main() -> ExitCode {
    let matches = match command().try_get_matches() {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let (name, sub) = match matches.subcommand() {
        Some(pair) => pair,
        None => return ExitCode::from(2),
    };
    if name == aisp_hw::bench::lab::runner::WORKER_SUBCOMMAND {
        return aisp_hw::bench::lab::worker::main();
    }
    let serving = name == "serve" || name == "dashboard";
    if !serving {
        // A one-shot command piped into `head` should end quietly when the reader goes away, as any Unix
        // tool does, instead of panicking in println! on EPIPE. Servers keep Rust's ignored SIGPIPE: a
        // client closing its socket must not end the server.
        // SAFETY: setting a signal disposition to its default before any thread is started.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    init_logging(&matches, serving);
    let format = match matches.get_one::<String>("format").map(String::as_str) {
        Some("json") => Format::Json,
        Some(_) => Format::Table,
        None if std::io::stdout().is_terminal() => Format::Table,
        None => Format::Json,
    };
    let overrides = Overrides {
        home: matches.get_one::<PathBuf>("home").cloned(),
        tools: sub.try_get_one::<String>("tools").ok().flatten().cloned(),
        allow_exec: if matches.get_flag("allow-exec") {
            Some(true)
        } else if matches.get_flag("no-allow-exec") {
            Some(false)
        } else {
            None
        },
        token: sub.try_get_one::<String>("token").ok().flatten().cloned(),
    };
    match name {
        "serve" => serve(sub, &overrides, false),
        "dashboard" => serve(sub, &overrides, true),
        "tools" => list_tools(format),
        "schemas" => schemas_cmd(sub),
        _ => {
            let (tool, op_matches) = match resolve_op(name, sub) {
                Some(found) => found,
                None => return ExitCode::from(2),
            };
            run_op(tool, op_matches, &overrides, format)
        }
    }
}

fn resolve_op<'m>(name: &str, sub: &'m ArgMatches) -> Option<(&'static ToolDef, &'m ArgMatches)> {
    if let Some(tool) = registry::tools()
        .iter()
        .find(|t| t.spec().short && t.spec().name.replace('_', "-") == name)
    {
        return Some((tool, sub));
    }
    let (op, m) = sub.subcommand()?;
    registry::find_op(name, &op.replace('-', "_"))
        .or_else(|| registry::find_alias(name, op))
        .map(|t| (t, m))
}

fn init_logging(matches: &ArgMatches, serving: bool) {
    let default = if serving { "info" } else { "warn" };
    let filter = matches
        .get_one::<String>("log-level")
        .cloned()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| default.to_string());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .with_env_filter(filter)
        .try_init();
}

fn load_config(overrides: &Overrides) -> Result<Config, ExitCode> {
    Config::load(overrides).map_err(|e| {
        eprintln!("aisp: {e}");
        ExitCode::from(2)
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("aisp: cannot start the async runtime: {e}");
            ExitCode::from(1)
        })
}

/// The dashboard's address for a browser (an unspecified bind address is reached through loopback).
fn dashboard_url(bind: SocketAddr) -> String {
    let host = match bind.ip() {
        ip if ip.is_unspecified() || ip.is_loopback() => "127.0.0.1".to_string(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        ip => ip.to_string(),
    };
    format!("http://{host}:{}/", bind.port())
}

/// Open `url` in the user's browser, best effort: `$BROWSER`, then the platform's opener.
fn open_browser(url: &str) -> bool {
    let mut candidates: Vec<(String, Vec<String>)> = Vec::new();
    if let Ok(b) = std::env::var("BROWSER")
        && !b.trim().is_empty()
    {
        candidates.push((b, vec![url.to_string()]));
    }
    if cfg!(target_os = "macos") {
        candidates.push(("open".into(), vec![url.to_string()]));
    } else if cfg!(target_os = "windows") {
        candidates.push((
            "cmd".into(),
            vec!["/C".into(), "start".into(), String::new(), url.to_string()],
        ));
    } else {
        candidates.push(("xdg-open".into(), vec![url.to_string()]));
    }
    candidates.into_iter().any(|(prog, args)| {
        std::process::Command::new(prog)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .is_ok()
    })
}

fn serve(m: &ArgMatches, overrides: &Overrides, dashboard: bool) -> ExitCode {
    let config = match load_config(overrides) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let app = AppState::new(config);
    app.build_ahead
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let transport = if dashboard {
        Some("http")
    } else {
        m.get_one::<String>("transport").map(String::as_str)
    };
    let mut bind = *m.get_one::<SocketAddr>("bind").expect("has default");
    if dashboard && bind.port() == 0 {
        // The URL is printed before serving: pick the free port here.
        if let Ok(l) = std::net::TcpListener::bind(bind)
            && let Ok(a) = l.local_addr()
        {
            bind = a;
        }
    }
    if std::io::stderr().is_terminal() {
        eprint!(
            "{}",
            serve_banner(transport, Some(bind), app.config.token.is_some())
        );
    }
    let result = rt.block_on(async {
        match transport {
            Some("http") => {
                if dashboard {
                    let url = dashboard_url(bind);
                    let open = !m.get_flag("no-open");
                    tokio::spawn(async move {
                        // Open once the port answers (best effort: at most 5 s).
                        for _ in 0..50 {
                            if tokio::net::TcpStream::connect(bind).await.is_ok() {
                                break;
                            }
                            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        }
                        eprintln!("aisp: dashboard at {url}");
                        if open && !open_browser(&url) {
                            eprintln!("aisp: could not start a browser; open {url} yourself");
                        }
                    });
                }
                let opts = server::http::HttpOptions {
                    bind,
                    allowed_hosts: m
                        .get_many::<String>("allowed-host")
                        .map(|v| v.cloned().collect())
                        .unwrap_or_default(),
                    allowed_origins: m
                        .get_many::<String>("allowed-origin")
                        .map(|v| v.cloned().collect())
                        .unwrap_or_default(),
                };
                let shutdown = CancellationToken::new();
                let s2 = shutdown.clone();
                tokio::spawn(async move {
                    wait_for_stop_signal().await;
                    s2.cancel();
                });
                server::http::serve(app, opts, shutdown).await
            }
            _ => server::serve_stdio(app).await,
        }
    });
    // Blocking threads may still be winding down cancelled work (or probing the
    // GPU); do not wait on them: the process is exiting.
    rt.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(server::ServeError::Config(msg)) => {
            eprintln!("aisp: {msg}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("aisp: {e}");
            ExitCode::from(1)
        }
    }
}

/// Ctrl-C (SIGINT) or SIGTERM, whichever comes first.
async fn wait_for_stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

/// What `aisp serve` tells a person at a terminal (on stderr: on stdio, stdout is the JSON-RPC channel).
fn serve_banner(transport: Option<&str>, bind: Option<SocketAddr>, token: bool) -> String {
    let exe = std::env::current_exe()
        .ok()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "aisp".into());
    let tools = registry::tools().len();
    match (transport, bind) {
        (Some("http"), Some(addr)) => {
            let url = format!("http://{addr}/mcp");
            let auth = if token {
                " --header \"Authorization: Bearer $AISP_TOKEN\""
            } else {
                ""
            };
            format!(
                "aisp {}: serving {tools} tools over MCP (streamable HTTP) at {url},\n\
                 the HTTP API at http://{addr}/api/<domain>/<op> and the dashboard at http://{addr}/.\n\
                 Connect Claude Code:  claude mcp add --transport http aisp {url}{auth}\n\
                 Other MCP clients: add a streamable-HTTP server with that URL. Ctrl-C stops.\n",
                env!("CARGO_PKG_VERSION")
            )
        }
        _ => format!(
            "aisp {}: serving {tools} tools over MCP on stdio. An MCP client starts this itself;\n\
             connect one instead of typing here:\n\
             \x20 Claude Code:  claude mcp add aisp -- {exe} serve\n\
             \x20 Cursor and others: command \"{exe}\", args [\"serve\"]\n\
             Waiting for JSON-RPC on stdin (Ctrl-D or Ctrl-C stops).\n",
            env!("CARGO_PKG_VERSION")
        ),
    }
}

fn run_op(
    tool: &'static ToolDef,
    m: &ArgMatches,
    overrides: &Overrides,
    format: Format,
) -> ExitCode {
    let usage = |msg: String| {
        eprintln!(
            "aisp: {}\n\nSee `{} --help`.",
            hints::for_cli(&msg, Some(tool)),
            documents::cli_usage(tool)
        );
        ExitCode::from(2)
    };
    let args = match args::matches_to_json(tool, m, m.get_one::<String>("json").map(String::as_str))
    {
        Ok(a) => a,
        Err(msg) => return usage(msg),
    };
    if args.get("async").and_then(Value::as_bool) == Some(true) {
        return usage(
            "async jobs need a running server (`aisp serve`); at the command line the call runs in the foreground"
                .into(),
        );
    }
    match dispatch::split_run_control(tool, args.clone()) {
        Ok((rest, _)) => {
            if let Err(e) = tool.op.check_args(rest) {
                return usage(e.message);
            }
        }
        Err(e) => return usage(e.message),
    }
    let config = match load_config(overrides) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let app = AppState::new(config);
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let show_progress = tool.spec().long_running && std::io::stderr().is_terminal();
    let outcome = rt.block_on(async {
        let opts = CallOptions {
            cancel: CancellationToken::new(),
            progress: show_progress.then(progress_printer),
            // A person at a terminal writes where they say.
            writes: crate::outputs::WriteScope::Anywhere,
            answer_cap: None,
        };
        let cancel = opts.cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("aisp: cancelling...");
                cancel.cancel();
            }
        });
        dispatch::invoke(&app, tool, args, opts).await
    });
    rt.shutdown_timeout(std::time::Duration::from_millis(500));
    if show_progress {
        eprintln!();
    }
    print_outcome(outcome, format, Some(tool))
}

fn progress_printer() -> ProgressSink {
    Arc::new(|p| {
        let frac = match p.total {
            Some(t) if t > 0.0 => format!("{:>3.0}% ", 100.0 * p.progress / t),
            _ => String::new(),
        };
        eprint!(
            "\r\x1b[2K{frac}{}",
            p.message.as_deref().unwrap_or("working")
        );
    })
}

fn print_outcome(
    outcome: Result<Value, OpError>,
    format: Format,
    tool: Option<&ToolDef>,
) -> ExitCode {
    match outcome {
        Ok(value) => {
            match format {
                Format::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&value).unwrap_or_default()
                ),
                // Findings name tools as MCP does; a person types commands and flags.
                Format::Table => {
                    let mut value = value;
                    if let Some(Value::Array(notes)) = value.get_mut("left_out") {
                        for note in notes.iter_mut() {
                            if let Value::String(text) = note {
                                *text = hints::for_cli(text, tool);
                            }
                        }
                    }
                    print!("{}", hints::commands(&table::render(&value)))
                }
            }
            ExitCode::SUCCESS
        }
        Err(mut err) => {
            err.hint = hints::for_cli(&err.hint, tool);
            if format == Format::Json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&err.to_json()).unwrap_or_default()
                );
            }
            eprintln!("aisp: {} ({})\nhint: {}", err.message, err.kind, err.hint);
            ExitCode::from(1)
        }
    }
}

fn list_tools(format: Format) -> ExitCode {
    let rows: Vec<Value> = registry::tools()
        .iter()
        .map(|t| {
            let s = t.spec();
            serde_json::json!({
                "tool": t.name,
                "cli": documents::cli_usage(t),
                "gpu": s.needs_gpu,
                "long": s.long_running,
                "exec": s.executes_commands,
                "tier": match s.tier {
                    registry::Tier::Core => "core",
                    registry::Tier::Default => "default",
                    registry::Tier::Domain => "domain",
                },
                "example": s.example,
                "summary": s.summary,
            })
        })
        .collect();
    let count = rows.len();
    if format == Format::Table {
        // Every tool, one line each (the generic renderer stops at 50 rows).
        let width = rows
            .iter()
            .filter_map(|r| r["cli"].as_str())
            .map(str::len)
            .max()
            .unwrap_or(0);
        println!(
            "{count} tools (MCP name: aisp_<domain>_<op>; `aisp <domain> <op> --help` for flags)\n"
        );
        for r in &rows {
            let marks: String = [("gpu", "G"), ("long", "L"), ("exec", "X")]
                .iter()
                .map(|(k, m)| if r[*k] == true { *m } else { "·" })
                .collect();
            println!(
                "{:<width$}  {marks}  {}",
                r["cli"].as_str().unwrap_or(""),
                r["summary"].as_str().unwrap_or("")
            );
        }
        println!(
            "\nG needs a GPU · L long-running (progress, cancel, async) · X runs a command you supply (--allow-exec)"
        );
        return ExitCode::SUCCESS;
    }
    print_outcome(
        Ok(serde_json::json!({ "count": count, "tools": rows })),
        format,
        None,
    )
}

fn schemas_cmd(m: &ArgMatches) -> ExitCode {
    if let Some(dir) = m.get_one::<PathBuf>("check") {
        let problems = documents::check(dir);
        if problems.is_empty() {
            eprintln!("aisp: {} matches the code", dir.display());
            return ExitCode::SUCCESS;
        }
        for (file, what) in &problems {
            eprintln!("{}: {what}", dir.join(file).display());
        }
        eprintln!(
            "aisp: tool schemas drifted; run `aisp schemas --write {}`",
            dir.display()
        );
        return ExitCode::from(1);
    }
    let dir = m
        .get_one::<PathBuf>("write")
        .cloned()
        .unwrap_or_else(|| PathBuf::from("tool-schemas"));
    if let Some(readme) = m.get_one::<PathBuf>("readme") {
        let updated = std::fs::read_to_string(readme)
            .ok()
            .and_then(|text| readme::with_tool_table(&text));
        match updated.map(|t| std::fs::write(readme, t)) {
            Some(Ok(())) => eprintln!("aisp: updated the tool table in {}", readme.display()),
            Some(Err(e)) => {
                eprintln!("aisp: cannot write {}: {e}", readme.display());
                return ExitCode::from(1);
            }
            None => {
                eprintln!(
                    "aisp: {} has no {} ... {} markers",
                    readme.display(),
                    readme::BEGIN,
                    readme::END
                );
                return ExitCode::from(1);
            }
        }
    }
    if let Some(stubs) = m.get_one::<PathBuf>("python-stubs") {
        match std::fs::write(stubs, crate::registry::python::stubs()) {
            Ok(()) => eprintln!("aisp: wrote the Python stubs to {}", stubs.display()),
            Err(e) => {
                eprintln!("aisp: cannot write {}: {e}", stubs.display());
                return ExitCode::from(1);
            }
        }
    }
    match documents::write(&dir) {
        Ok(n) => {
            eprintln!("aisp: wrote {n} schema files to {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("aisp: cannot write {}: {e}", dir.display());
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_tree_is_valid() {
        command().debug_assert();
    }

    #[test]
    fn serve_says_how_to_connect() {
        let stdio = serve_banner(Some("stdio"), None, false);
        assert!(
            stdio.contains("claude mcp add aisp -- ") && stdio.contains(" serve"),
            "{stdio}"
        );
        let addr: SocketAddr = "127.0.0.1:8765".parse().unwrap();
        let http = serve_banner(Some("http"), Some(addr), true);
        assert!(
            http.contains("claude mcp add --transport http aisp http://127.0.0.1:8765/mcp"),
            "{http}"
        );
        assert!(http.contains("Authorization: Bearer"), "{http}");
    }

    #[test]
    fn every_operation_has_a_cli_path() {
        let cmd = command();
        for tool in registry::tools() {
            let spec = tool.spec();
            let op = spec.name.replace('_', "-");
            if spec.short {
                assert!(cmd.find_subcommand(&op).is_some(), "{}", tool.name);
            } else {
                let d = cmd.find_subcommand(spec.domain).expect("domain command");
                assert!(d.find_subcommand(&op).is_some(), "{}", tool.name);
            }
        }
    }
}
