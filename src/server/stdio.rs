//! MCP over stdin/stdout, with each tool listing encoded once.
//!
//! A session's listing changes only when it enables a domain, and each
//! listing is large (every listed tool's input and output schemas), and rmcp
//! serializes each answer from its `serde_json::Value` tree on every
//! `tools/list`: measured at about 5 ms per answer with 85 tools, almost all of
//! it JSON escaping. This transport encodes the `tools` array the first time it
//! is asked for and splices those bytes into every later answer; everything
//! else of the answer (id, `resultType`, `ttlMs`, ...) is serialized as usual,
//! so the bytes on the wire are exactly what rmcp would have written.
//!
//! Reading is ours: lines are bounded ([`MAX_LINE_BYTES`]), and every line
//! that cannot be decoded into a message gets a JSON-RPC error answer, so a
//! client never waits for ever on a request the server could not read:
//! `-32700` (parse error: not UTF-8, not JSON, nesting too deep, a number out
//! of range), `-32600` (invalid request: not an object, no method, a bad id,
//! a line over the limit) and `-32602` (invalid params of a known method,
//! e.g. `arguments` that are not an object), with the request's `id` when it
//! can be read and `null` otherwise. Notifications and responses never get
//! answers (JSON-RPC forbids it); non-MCP notifications are ignored as rmcp
//! does. All writing goes as whole newline-terminated frames through one
//! writer task, so frames never interleave on stdout.

use std::sync::{Arc, OnceLock};

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, JsonRpcMessage, ServerJsonRpcMessage, ServerResult, Tool};
use rmcp::service::RxJsonRpcMessage;
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::mcp::SessionTools;

/// One frame to write, with an optional acknowledgement once it is flushed.
type Frame = (Vec<u8>, Option<oneshot::Sender<std::io::Result<()>>>);

/// The tools a server lists, with their `tools` array encoded on first use.
pub struct EncodedListing {
    tools: Vec<Tool>,
    json: OnceLock<Vec<u8>>,
}

impl EncodedListing {
    pub fn new(tools: Vec<Tool>) -> EncodedListing {
        EncodedListing {
            tools,
            json: OnceLock::new(),
        }
    }

    /// The listed tools, in `tools/list` order.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The listed tools' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name.as_ref()).collect()
    }

    /// Whether `tools` is this listing: the same tools (the same schema
    /// `Arc`s, so no deep comparison) in the same order.
    fn is(&self, tools: &[Tool]) -> bool {
        tools.len() == self.tools.len()
            && tools.iter().zip(&self.tools).all(|(t, mine)| {
                Arc::ptr_eq(&t.input_schema, &mine.input_schema) && t.name == mine.name
            })
    }

    fn json(&self) -> std::io::Result<&[u8]> {
        if let Some(j) = self.json.get() {
            return Ok(j);
        }
        let encoded = serde_json::to_vec(&self.tools)?;
        Ok(self.json.get_or_init(|| encoded))
    }
}

/// Encode one outgoing message as a newline-terminated frame.
pub fn encode(item: ServerJsonRpcMessage, listing: &EncodedListing) -> std::io::Result<Vec<u8>> {
    let mut item = item;
    if let JsonRpcMessage::Response(resp) = &mut item
        && let ServerResult::ListToolsResult(result) = &mut resp.result
        && listing.is(&result.tools)
    {
        let tools = std::mem::take(&mut result.tools);
        let head = serde_json::to_vec(&item)?;
        const EMPTY: &[u8] = br#""tools":[]"#;
        let mut at = head
            .windows(EMPTY.len())
            .enumerate()
            .filter(|(_, w)| *w == EMPTY);
        if let (Some((i, _)), None) = (at.next(), at.next()) {
            let json = listing.json()?;
            let mut out = Vec::with_capacity(head.len() + json.len() + 1);
            out.extend_from_slice(&head[..i + EMPTY.len() - 2]);
            out.extend_from_slice(json);
            out.extend_from_slice(&head[i + EMPTY.len()..]);
            out.push(b'\n');
            return Ok(out);
        }
        // Not where we expected it: give the tools back and encode it all.
        if let JsonRpcMessage::Response(resp) = &mut item
            && let ServerResult::ListToolsResult(result) = &mut resp.result
        {
            result.tools = tools;
        }
    }
    let mut out = serde_json::to_vec(&item)?;
    out.push(b'\n');
    Ok(out)
}

/// The longest line read (one JSON-RPC message); longer ones are answered
/// with an error and skipped. rmcp's own limit, and its HTTP client's.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The stdio transport: a bounded line reader that answers what it cannot
/// decode, one writer task, the session's encoded listing.
pub struct StdioTransport<R: tokio::io::AsyncRead> {
    read: tokio::io::BufReader<R>,
    line: Vec<u8>,
    /// Dropping the rest of an over-long line, up to its newline.
    discarding: bool,
    frames: mpsc::UnboundedSender<Frame>,
    session: Arc<SessionTools>,
}

/// Outcome of reading one line.
enum LineRead {
    Line,
    Oversized,
    Eof,
}

/// What a line decodes to.
enum Decoded {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Nothing to do (an empty line, a non-MCP notification, a malformed
    /// notification or response, which get no answer).
    Skip,
    /// Answer with this error.
    Error {
        id: Value,
        code: i64,
        message: String,
    },
}

/// Client requests the MCP specification defines: parameters that do not
/// fit one of these are invalid params, not an unknown method.
const KNOWN_REQUESTS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
];

/// A request id as JSON-RPC allows it here: a string or an integer.
fn valid_id(id: &Value) -> bool {
    id.is_string() || id.as_i64().is_some()
}

fn parse_error(message: String) -> Decoded {
    Decoded::Error {
        id: Value::Null,
        code: -32700,
        message: format!("Parse error: {message}"),
    }
}

/// Decode one line (without its line end).
fn decode(line: &[u8]) -> Decoded {
    let line = line
        .strip_prefix(b"\xEF\xBB\xBF".as_slice())
        .unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Decoded::Skip;
    }
    let text = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(e) => {
            return parse_error(format!(
                "the line is not UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ));
        }
    };
    if let Ok(msg) = serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(text) {
        // A known method whose params did not fit lands in CustomRequest.
        if let JsonRpcMessage::Request(req) = &msg
            && let ClientRequest::CustomRequest(custom) = &req.request
            && KNOWN_REQUESTS.contains(&custom.method.as_str())
        {
            return Decoded::Error {
                id: serde_json::to_value(&req.id).unwrap_or(Value::Null),
                code: -32602,
                message: invalid_params(&custom.method, custom.params.as_ref()),
            };
        }
        return Decoded::Message(Box::new(msg));
    }
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return parse_error(e.to_string()),
    };
    let Value::Object(obj) = value else {
        return Decoded::Error {
            id: Value::Null,
            code: -32600,
            message: "Invalid Request: a message is a JSON object (batches are not supported)"
                .into(),
        };
    };
    let id = obj.get("id").cloned();
    let method = obj.get("method");
    let is_response = obj.contains_key("result") || obj.contains_key("error");
    if id.is_none() || (is_response && method.is_none()) {
        // A notification or a response: never answered.
        tracing::debug!(
            "ignoring an undecodable notification or response: {:.200}",
            text
        );
        return Decoded::Skip;
    }
    let id = id.unwrap_or(Value::Null);
    let echo = if valid_id(&id) {
        id.clone()
    } else {
        Value::Null
    };
    let invalid = |why: String| Decoded::Error {
        id: echo.clone(),
        code: -32600,
        message: format!("Invalid Request: {why}"),
    };
    if !valid_id(&id) {
        return invalid(format!("the id must be a string or an integer, not {id}"));
    }
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("\"jsonrpc\" must be \"2.0\"".into());
    }
    match method {
        None => invalid("no \"method\"".into()),
        Some(Value::String(m)) if KNOWN_REQUESTS.contains(&m.as_str()) => Decoded::Error {
            id: echo,
            code: -32602,
            message: invalid_params(m, obj.get("params")),
        },
        Some(Value::String(m)) => invalid(format!("the request for `{m}` is malformed")),
        Some(other) => invalid(format!("\"method\" must be a string, not {other}")),
    }
}

/// Why a known method's params do not fit, in words a client can act on.
fn invalid_params(method: &str, params: Option<&Value>) -> String {
    let why = match (method, params) {
        ("tools/call", Some(p)) => {
            match serde_json::from_value::<rmcp::model::CallToolRequestParams>(p.clone()) {
                Err(e)
                    if p.get("arguments")
                        .is_some_and(|a| !a.is_object() && !a.is_null()) =>
                {
                    format!("`arguments` must be an object ({e})")
                }
                Err(e) => e.to_string(),
                Ok(_) => "the params do not match".into(),
            }
        }
        (_, None) => "params are missing".into(),
        (_, Some(_)) => "the params do not match the method".into(),
    };
    format!("Invalid params for {method}: {why}")
}

impl<R> StdioTransport<R>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
{
    /// Read from `read`, write whole frames to `write` (one task owns it).
    pub fn new<W>(read: R, write: W, session: Arc<SessionTools>) -> StdioTransport<R>
    where
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (frames, mut rx) = mpsc::unbounded_channel::<Frame>();
        tokio::spawn(async move {
            let mut write = write;
            while let Some((bytes, ack)) = rx.recv().await {
                let result = match write.write_all(&bytes).await {
                    Ok(()) => write.flush().await,
                    Err(e) => Err(e),
                };
                let failed = result.is_err();
                if let Some(ack) = ack {
                    let _ = ack.send(result);
                }
                if failed {
                    break;
                }
            }
        });
        StdioTransport {
            read: tokio::io::BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            frames,
            session,
        }
    }

    /// Read one newline-terminated line into `self.line`, never past
    /// [`MAX_LINE_BYTES`]. Cancellation-safe: a partial line stays in
    /// `self.line` (and a discard in progress in `self.discarding`) for the
    /// next call, since `receive` is polled inside a `select!`.
    async fn read_line(&mut self) -> LineRead {
        use tokio::io::AsyncBufReadExt;
        loop {
            let (consumed, done) = {
                let available = match self.read.fill_buf().await {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::error!("error reading stdin: {e}");
                        return LineRead::Eof;
                    }
                };
                if available.is_empty() {
                    return LineRead::Eof;
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let take = newline.map_or(available.len(), |i| i + 1);
                if self.discarding {
                    if newline.is_some() {
                        self.discarding = false;
                    }
                    (take, None)
                } else if self.line.len() + take > MAX_LINE_BYTES {
                    self.line.clear();
                    self.discarding = newline.is_none();
                    (take, Some(LineRead::Oversized))
                } else {
                    self.line.extend_from_slice(&available[..take]);
                    (take, newline.map(|_| LineRead::Line))
                }
            };
            self.read.consume(consumed);
            if let Some(done) = done {
                return done;
            }
        }
    }

    /// Answer an undecodable line.
    fn reply_error(&self, id: Value, code: i64, message: String) {
        let frame = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message},
        });
        let mut bytes = frame.to_string().into_bytes();
        bytes.push(b'\n');
        let _ = self.frames.send((bytes, None));
    }

    async fn next_message(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.read_line().await {
                LineRead::Line => {}
                LineRead::Oversized => {
                    tracing::warn!(
                        max = MAX_LINE_BYTES,
                        "a line longer than the limit was skipped"
                    );
                    self.reply_error(
                        Value::Null,
                        -32600,
                        format!(
                            "Invalid Request: the line is longer than {} MiB; send smaller messages (files go by path)",
                            MAX_LINE_BYTES >> 20
                        ),
                    );
                    continue;
                }
                LineRead::Eof => return None,
            }
            let decoded = {
                let mut l: &[u8] = &self.line;
                l = l.strip_suffix(b"\n").unwrap_or(l);
                l = l.strip_suffix(b"\r").unwrap_or(l);
                decode(l)
            };
            self.line.clear();
            match decoded {
                Decoded::Message(m) => return Some(*m),
                Decoded::Skip => {}
                Decoded::Error { id, code, message } => {
                    tracing::debug!(code, "answering an undecodable line: {message}");
                    self.reply_error(id, code, message);
                }
            }
        }
    }
}

impl<R> Transport<RoleServer> for StdioTransport<R>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let frames = self.frames.clone();
        // The listing as it is now: a session that enabled a domain since
        // this answer was made is simply not spliced (the check is by identity).
        let listing = self.session.current();
        async move {
            let bytes = encode(item, &listing)?;
            let (ack, done) = oneshot::channel();
            frames
                .send((bytes, Some(ack)))
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
            done.await
                .unwrap_or_else(|_| Err(std::io::ErrorKind::BrokenPipe.into()))
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.next_message()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{JsonRpcResponse, JsonRpcVersion2_0, ListToolsResult, NumberOrString};
    use serde_json::json;

    fn tools() -> Vec<Tool> {
        crate::registry::tools()
            .iter()
            .take(5)
            .map(crate::server::mcp::mcp_tool)
            .collect()
    }

    fn answer(tools: Vec<Tool>, id: i64) -> ServerJsonRpcMessage {
        let mut result = ListToolsResult::with_all_items(tools);
        result.result_type = Some(rmcp::model::ResultType::COMPLETE);
        JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: JsonRpcVersion2_0,
            id: NumberOrString::Number(id),
            result: ServerResult::ListToolsResult(result.with_ttl_ms(60_000)),
        })
    }

    fn error_of(line: &[u8]) -> (Value, i64) {
        match decode(line) {
            Decoded::Error { id, code, .. } => (id, code),
            Decoded::Message(_) => panic!("decoded: {}", String::from_utf8_lossy(line)),
            Decoded::Skip => panic!("skipped: {}", String::from_utf8_lossy(line)),
        }
    }

    #[test]
    fn undecodable_lines_get_the_right_error() {
        assert_eq!(error_of(b"not json"), (Value::Null, -32700));
        assert_eq!(
            error_of(b"{\"id\":1,\"method\":\"p\xff\"}"),
            (Value::Null, -32700)
        );
        assert_eq!(
            error_of(br#"{"jsonrpc":"2.0","id":1e999,"method":"ping"}"#),
            (Value::Null, -32700)
        );
        assert_eq!(error_of("[".repeat(400).as_bytes()), (Value::Null, -32700));
        assert_eq!(error_of(b"[1]"), (Value::Null, -32600));
        assert_eq!(
            error_of(br#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#),
            (Value::Null, -32600)
        );
        assert_eq!(
            error_of(br#"{"jsonrpc":"2.0","id":"a","method":7}"#),
            (json!("a"), -32600)
        );
        assert_eq!(
            error_of(br#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#),
            (json!(3), -32600)
        );
        assert_eq!(
            error_of(br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#),
            (json!(4), -32602)
        );
        // Notifications and responses get no answer; good messages decode.
        for quiet in [
            &br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":7}"#[..],
            br#"{"jsonrpc":"2.0","id":3,"error":"not an error object"}"#,
            b"   ",
        ] {
            assert!(
                matches!(decode(quiet), Decoded::Skip),
                "{}",
                String::from_utf8_lossy(quiet)
            );
        }
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#),
            Decoded::Message(_)
        ));
    }

    /// The spliced answer is byte for byte what serde would have written.
    #[test]
    fn the_encoded_listing_is_exactly_the_serialized_answer() {
        let listed = tools();
        let listing = EncodedListing::new(listed.clone());
        for id in [2, 7_000_000_123] {
            let expected = {
                let mut v = serde_json::to_vec(&answer(listed.clone(), id)).unwrap();
                v.push(b'\n');
                v
            };
            let fast = encode(answer(listed.clone(), id), &listing).unwrap();
            assert_eq!(
                String::from_utf8(fast).unwrap(),
                String::from_utf8(expected).unwrap()
            );
        }
        assert!(listing.json.get().is_some(), "the fast path was taken");
    }

    /// Another list (a different toolset, other schemas) is encoded in full.
    #[test]
    fn other_lists_and_messages_are_encoded_as_usual() {
        let listed = tools();
        let listing = EncodedListing::new(listed.clone());
        let other: Vec<Tool> = listed.iter().rev().cloned().collect();
        let out = encode(answer(other.clone(), 3), &listing).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["result"]["tools"][0]["name"], json!(other[0].name));
        assert!(
            listing.json.get().is_none(),
            "no fast path for another list"
        );
        // Equal tools in new allocations are not known to be this listing.
        let fresh: Vec<Tool> = listed
            .iter()
            .map(|t| {
                let mut t = t.clone();
                t.input_schema = Arc::new((*t.input_schema).clone());
                t
            })
            .collect();
        let out = encode(answer(fresh, 4), &listing).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["result"]["tools"].as_array().unwrap().len(), listed.len());
    }
}
