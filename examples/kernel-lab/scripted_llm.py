#!/usr/bin/env python3
"""A scripted OpenAI-compatible endpoint for the GPU demonstration of
aisp_benchmark_kernel_improve: answers /v1/chat/completions with the replies
in improve_script.json, in order, and logs each request's last user message
to requests.jsonl. (No real model is reachable from the GPU host; the point
is that every reply is compiled, checked and timed for real.)"""
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

replies = json.load(open(sys.argv[1]))
log = open(sys.argv[2], "a")


class H(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        log.write(json.dumps(body.get("messages", [])[-1:]) + "\n")
        log.flush()
        text = replies.pop(0) if replies else "(script exhausted)"
        out = json.dumps({"id": "c", "object": "chat.completion", "created": 1, "model": "scripted",
                          "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                       "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


HTTPServer(("127.0.0.1", int(sys.argv[3])), H).serve_forever()
