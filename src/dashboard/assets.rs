//! The dashboard's page shells and embedded static files (no build step, no
//! CDN: everything is compiled into the binary and works offline).

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Content-Security-Policy of every page: scripts only from this server (no
/// inline script), no framing, no connections elsewhere.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// (name, content type, bytes).
const FILES: &[(&str, &str, &str)] = &[
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("assets/style.css"),
    ),
    (
        "common.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/common.js"),
    ),
    (
        "profile.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/profile.js"),
    ),
    (
        "timeline.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/timeline.js"),
    ),
    (
        "tools.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/tools.js"),
    ),
    (
        "overview.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/overview.js"),
    ),
    (
        "compare.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/compare.js"),
    ),
    (
        "benchmarks.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/benchmarks.js"),
    ),
    (
        "planner.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/planner.js"),
    ),
    (
        "ask.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/ask.js"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_str!("assets/favicon.svg"),
    ),
];

#[derive(Debug, Clone, Copy)]
pub enum Page {
    Home,
    Profiles,
    Compare,
    Benchmarks,
    Planner,
    Ask,
    Tools,
    Tool,
    Login,
}

impl Page {
    fn title(self) -> &'static str {
        match self {
            Page::Home => "Overview",
            Page::Profiles => "Profiles",
            Page::Compare => "Compare",
            Page::Benchmarks => "Benchmarks",
            Page::Planner => "Planner",
            Page::Ask => "Ask",
            Page::Tools => "Tools",
            Page::Tool => "Tool",
            Page::Login => "Sign in",
        }
    }
    fn id(self) -> &'static str {
        match self {
            Page::Home => "home",
            Page::Profiles => "profiles",
            Page::Compare => "compare",
            Page::Benchmarks => "benchmarks",
            Page::Planner => "planner",
            Page::Ask => "ask",
            Page::Tools => "tools",
            Page::Tool => "tool",
            Page::Login => "login",
        }
    }
    fn scripts(self) -> &'static [&'static str] {
        match self {
            Page::Profiles => &["timeline.js", "profile.js"],
            Page::Tools | Page::Tool => &["tools.js"],
            Page::Home => &["overview.js"],
            Page::Compare => &["tools.js", "compare.js"],
            // tools.js: the forms generated from input schemas.
            Page::Benchmarks => &["tools.js", "benchmarks.js"],
            Page::Planner => &["tools.js", "planner.js"],
            Page::Ask => &["tools.js", "ask.js"],
            Page::Login => &[],
        }
    }
    fn body(self) -> &'static str {
        match self {
            Page::Home => include_str!("assets/home.html"),
            Page::Profiles => include_str!("assets/profiles.html"),
            Page::Compare => include_str!("assets/compare.html"),
            Page::Benchmarks => include_str!("assets/benchmarks.html"),
            Page::Planner => include_str!("assets/planner.html"),
            Page::Ask => include_str!("assets/ask.html"),
            Page::Tools => include_str!("assets/tools.html"),
            Page::Tool => include_str!("assets/tool.html"),
            Page::Login => include_str!("assets/login.html"),
        }
    }
}

fn security_headers(resp: &mut Response) {
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
}

/// A page shell: the layout, the page's static body, its scripts. No data.
pub fn page(page: Page) -> Response {
    let mut scripts = String::from(r#"<script src="/assets/common.js"></script>"#);
    for s in page.scripts() {
        scripts.push_str(&format!(r#"<script src="/assets/{s}"></script>"#));
    }
    let html = format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · aisp</title>
<link rel="icon" href="/assets/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/assets/style.css">
</head>
<body data-page="{id}">
<header class="top">
  <a class="brand" href="/">aisp</a>
  <nav><a href="/" data-nav="home">Overview</a><a href="/profiles" data-nav="profiles">Profiles</a><a href="/compare" data-nav="compare">Compare</a><a href="/benchmarks" data-nav="benchmarks">Benchmarks</a><a href="/planner" data-nav="planner">Planner</a><a href="/ask" data-nav="ask">Ask</a><a href="/tools" data-nav="tools">Tools</a></nav>
  <span class="auth" id="auth"></span>
</header>
<main id="main">
{body}
</main>
{scripts}
</body>
</html>
"#,
        title = page.title(),
        id = page.id(),
        body = page.body(),
    );
    let mut resp = (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        html,
    )
        .into_response();
    security_headers(&mut resp);
    resp
}

/// One embedded file by name.
pub fn asset(name: &str) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, ctype, body)) => {
            let mut resp = (
                StatusCode::OK,
                [
                    (header::CONTENT_TYPE, *ctype),
                    // Same binary, same bytes: a restart with a new build changes the version.
                    (header::CACHE_CONTROL, "no-cache"),
                ],
                *body,
            )
                .into_response();
            security_headers(&mut resp);
            resp
        }
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}
