#!/usr/bin/env python3
"""A test double of an OpenAI-compatible model server, as a process that tests can
SIGKILL (harness/tests/cluster_test.cc). POST .../chat/completions, not streamed: while the
conversation holds fewer than two tool results it answers with one bash call that counts
its runs in a file of the sandbox, then it answers "done". Each answer takes DELAY_MS
(default 300) milliseconds. Usage: model_double.py [PORT [DELAY_MS]]; prints
"model double listening on 127.0.0.1:PORT" once it serves (port 0: any free one)."""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COUNT = "echo run >> runs; wc -l < runs"
DELAY = 0.3


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

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
            message["tool_calls"] = [{"id": f"call_{tools}", "type": "function",
                                      "function": {"name": "bash", "arguments": json.dumps({"command": COUNT})}}]
            finish = "tool_calls"
        else:
            message["content"] = "done"
            finish = "stop"
        time.sleep(DELAY)
        out = json.dumps({"id": "chatcmpl-double", "object": "chat.completion",
                          "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                          "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def main():
    global DELAY
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if len(sys.argv) > 2:
        DELAY = int(sys.argv[2]) / 1000.0
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"model double listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
