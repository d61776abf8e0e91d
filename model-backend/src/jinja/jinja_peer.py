#!/usr/bin/env python3
"""The reference renderer for sinew_jinja_test: Python's jinja2 configured exactly as
Hugging Face transformers renders chat templates (transformers' _compile_jinja_template):
ImmutableSandboxedEnvironment, trim_blocks and lstrip_blocks, the loopcontrols extension,
tojson as json.dumps(ensure_ascii=False) without HTML escaping, and the globals
raise_exception and strftime_now.

Input (stdin): {"cases": [{"template": str, "context": {...}, "now": unix seconds}]}
Output (stdout): [{"ok": true, "text": str} | {"ok": false, "error": str}, ...]
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTracker(Extension):
    """transformers' {% generation %} block: renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def compile_template(source, now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.fromtimestamp(now).strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                       extensions=[GenerationTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def main():
    request = json.load(sys.stdin)
    results = []
    compiled = {}
    for case in request["cases"]:
        try:
            key = (case["template"], case["now"])
            if key not in compiled:
                compiled[key] = compile_template(case["template"], case["now"])
            results.append({"ok": True, "text": compiled[key].render(**case["context"])})
        except Exception as error:  # every failure is a result the C++ side compares
            results.append({"ok": False, "error": f"{type(error).__name__}: {error}"})
    json.dump(results, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
