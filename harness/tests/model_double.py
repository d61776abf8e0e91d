#!/usr/bin/env python3
"""A test double of an OpenAI-compatible model server, as a process that tests can
SIGKILL (harness/tests/cluster_test.cc) or run beside a harness (scripts/tsan-harness.sh).
POST .../chat/completions: while the conversation holds fewer than two tool results it
answers with one tool call, then it answers "done". The call is a bash command that counts
its runs in a file of the sandbox or, with FETCH_URL, an http_request to FETCH_URL. The
answer is streamed (server-sent events) when the request says "stream": true, whole
otherwise. Each answer takes DELAY_MS (default 300) milliseconds.
Usage: model_double.py [PORT [DELAY_MS [FETCH_URL]]]; prints
"model double listening on 127.0.0.1:PORT" once it serves (port 0: any free one)."""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COUNT = "echo run >> runs; wc -l < runs"
DELAY = 0.3
FETCH_URL = ""


def tool_call(n):
    if FETCH_URL:
        name, arguments = "http_request", {"url": FETCH_URL}
    else:
        name, arguments = "bash", {"command": COUNT}
    return {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, content_type, data):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = {}
        tools = sum(1 for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "tool")
        message = {"role": "assistant"}
        if tools < 2:
            message["content"] = "counting"
            message["tool_calls"] = [tool_call(tools)]
            finish = "tool_calls"
        else:
            message["content"] = "done"
            finish = "stop"
        time.sleep(DELAY)
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if body.get("stream") is True:
            delta = {"content": message["content"]}
            if "tool_calls" in message:
                delta["tool_calls"] = [dict(message["tool_calls"][0], index=0)]
            chunks = [{"choices": [{"index": 0, "delta": delta}]},
                      {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage}]
            events = "".join("data: %s\n\n" % json.dumps(c) for c in chunks) + "data: [DONE]\n\n"
            self.send("text/event-stream", events.encode())
            return
        out = json.dumps({"id": "chatcmpl-double", "object": "chat.completion",
                          "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                          "usage": usage}).encode()
        self.send("application/json", out)


def main():
    global DELAY, FETCH_URL
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if len(sys.argv) > 2:
        DELAY = int(sys.argv[2]) / 1000.0
    if len(sys.argv) > 3:
        FETCH_URL = sys.argv[3]
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"model double listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
