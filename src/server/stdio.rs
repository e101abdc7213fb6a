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
//! Reading stays rmcp's own ([`AsyncRwTransport`]: bounded lines, unparsable
//! input ignored, malformed requests answered with "Invalid Request"). All
//! writing, ours and the error answers rmcp writes while reading, goes as whole
//! newline-terminated frames through one writer task, so frames never
//! interleave on stdout.

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use rmcp::RoleServer;
use rmcp::model::{JsonRpcMessage, ServerJsonRpcMessage, ServerResult, Tool};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
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

/// Collects the bytes rmcp's reader writes (its error answers) into frames
/// and hands each complete frame to the writer task.
struct FrameSink {
    pending: Vec<u8>,
    frames: mpsc::UnboundedSender<Frame>,
}

impl AsyncWrite for FrameSink {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.pending.extend_from_slice(buf);
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let frame: Vec<u8> = self.pending.drain(..=end).collect();
            if self.frames.send((frame, None)).is_err() {
                return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The stdio transport: rmcp's reader, one writer task, the session's encoded listing.
pub struct StdioTransport<R: tokio::io::AsyncRead> {
    reader: AsyncRwTransport<RoleServer, R, FrameSink>,
    frames: mpsc::UnboundedSender<Frame>,
    session: Arc<SessionTools>,
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
        let sink = FrameSink {
            pending: Vec::new(),
            frames: frames.clone(),
        };
        StdioTransport {
            reader: AsyncRwTransport::new_server(read, sink),
            frames,
            session,
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

    fn receive(
        &mut self,
    ) -> impl Future<Output = Option<rmcp::service::RxJsonRpcMessage<RoleServer>>> + Send {
        self.reader.receive()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.close().await
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
