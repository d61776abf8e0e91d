#!/usr/bin/env python3
"""A test double of an OpenAI-compatible model server for scripts/tsan-harness.sh: POST
.../chat/completions, streamed (server-sent events) when the request says "stream": true,
whole otherwise. While the conversation holds fewer than two tool results it answers with
one http_request call to URL, then it answers "done"; each answer takes 30 ms.
Usage: tsan_model_double.py PORT URL"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

URL = ""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, content_type, body):
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        tools = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        time.sleep(0.03)
        call = None
        if tools < 2:
            call = {"id": "call_%d" % tools, "type": "function",
                    "function": {"name": "http_request", "arguments": json.dumps({"url": URL})}}
        if not body.get("stream"):
            message = {"role": "assistant", "content": "fetching" if call else "done"}
            if call:
                message["tool_calls"] = [call]
            self.send("application/json", json.dumps({"choices": [{"index": 0, "message": message,
                      "finish_reason": "tool_calls" if call else "stop"}]}))
            return
        delta = {"content": "fetching" if call else "done"}
        if call:
            delta["tool_calls"] = [dict(call, index=0)]
        chunks = [{"choices": [{"index": 0, "delta": delta}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if call else "stop"}]}]
        self.send("text/event-stream", "".join("data: %s\n\n" % json.dumps(c) for c in chunks) + "data: [DONE]\n\n")


if __name__ == "__main__":
    URL = sys.argv[2]
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
