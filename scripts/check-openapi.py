#!/usr/bin/env python3
"""Checks an OpenAPI 3.0 document's structure, and live answers of a server against it.

  check-openapi.py FILE    -> exit 0 and {"GET /path": ["200", ...], ...} as JSON on stdout,
                              or exit 1 and one problem per line on stderr.
  check-openapi.py FILE --answers ANSWERS.json
                           -> also checks the answers a server gave (a JSON array of
                              {"method", "route", "status", "content_type", "headers", "body",
                              "what"}; route as the document writes it, headers with lower-case
                              names): each status is documented for its operation; a documented
                              content is what came back (its media type; a JSON body valid
                              against its schema, each line of a line-delimited body against
                              the schema in `x-line-schema`; no body where none is documented);
                              documented required headers were sent. With --coverage, every
                              operation of the document must also have at least one success
                              (2xx) and one refusal (4xx or 5xx) among the answers, so that a
                              route added to the document without a live check fails.
                              --coverage-only=PREFIX / --coverage-except=PREFIX limit that to
                              the routes that start (or do not start) with PREFIX, for a
                              conformance test that checks part of the routes (the sandbox
                              routes need sinew-sandboxd and runc: harness_sandbox_api_test).
  check-openapi.py FILE --error-codes-in SOURCE...
                           -> also checks that every error code the sources emit (a string
                              literal passed to Error, Refuse, Refusal, ErrorBody or TooMany)
                              is in Error.error.code's enum.

Checked in FILE: the OpenAPI version and info; every path and operation; responses keyed by
three-digit statuses, each a resolvable $ref or an object with a description; parameters
with name and a valid `in` (path parameters required); every $ref resolves; no value is
null (a YAML flow mapping split at a comma leaves one). Needs python3-yaml, and for
--answers python3-jsonschema (Debian packages; scripts/install-deps.sh).
"""
import json
import re
import sys

import yaml

METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def main(path, answers_path=None, coverage=None, code_sources=()):
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    problems = []

    def walk(node, where):
        if node is None:
            problems.append(f"{where}: null value (an unquoted comma in a flow mapping?)")
        elif isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{where}/{key}")
                if key == "$ref":
                    resolve(value, where)
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}/{i}")

    def resolve(ref, where):
        if not isinstance(ref, str) or not ref.startswith("#/"):
            problems.append(f"{where}: $ref {ref!r} is not a local reference")
            return None
        node = doc
        for part in ref[2:].split("/"):
            if not isinstance(node, dict) or part not in node:
                problems.append(f"{where}: $ref {ref} does not resolve")
                return None
            node = node[part]
        return node

    def deref(node, where):
        return resolve(node["$ref"], where) if isinstance(node, dict) and "$ref" in node else node

    if not isinstance(doc, dict):
        print(f"{path}: not a mapping", file=sys.stderr)
        return 1
    if not re.fullmatch(r"3\.0\.\d+", str(doc.get("openapi", ""))):
        problems.append("openapi: must be 3.0.x")
    info = doc.get("info") or {}
    if not info.get("title") or not info.get("version"):
        problems.append("info: title and version are required")
    walk(doc, "")
    statuses = {}
    for route, item in (doc.get("paths") or {}).items():
        if not route.startswith("/"):
            problems.append(f"paths/{route}: must start with /")
        if not isinstance(item, dict):
            problems.append(f"paths/{route}: not a mapping")
            continue
        shared = item.get("parameters", [])
        for method, op in item.items():
            if method == "parameters":
                continue
            where = f"paths/{route}/{method}"
            if method not in METHODS:
                problems.append(f"{where}: unknown method")
                continue
            for param in list(shared) + list(op.get("parameters", [])):
                p = deref(param, where)
                if not isinstance(p, dict) or not p.get("name") or p.get("in") not in {"query", "header", "path", "cookie"}:
                    problems.append(f"{where}: a parameter lacks name or a valid 'in'")
                elif p["in"] == "path" and (p.get("required") is not True or "{" + p["name"] + "}" not in route):
                    problems.append(f"{where}: path parameter {p['name']} must be required and in the path")
            responses = op.get("responses")
            if not isinstance(responses, dict) or not responses:
                problems.append(f"{where}: no responses")
                continue
            for code, response in responses.items():
                if not re.fullmatch(r"[1-5]\d\d", str(code)):
                    problems.append(f"{where}/responses/{code}: not a status code")
                r = deref(response, where)
                if not isinstance(r, dict) or not r.get("description"):
                    problems.append(f"{where}/responses/{code}: needs a description")
            statuses[f"{method.upper()} {route}"] = sorted(str(c) for c in responses)
    if not problems and answers_path is not None:
        problems += check_answers(doc, resolve, answers_path, coverage)
    if not problems and code_sources:
        problems += check_error_codes(doc, code_sources)
    if problems:
        for p in problems:
            print(f"{path}: {p}", file=sys.stderr)
        return 1
    json.dump(statuses, sys.stdout, sort_keys=True)
    print()
    return 0


def media_type(content_type):
    return content_type.split(";")[0].strip().lower()


def with_nullable_types(node):
    """A copy of node where every schema with nullable: true and a type also allows null."""
    if isinstance(node, list):
        return [with_nullable_types(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: with_nullable_types(v) for k, v in node.items()}
    if out.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def check_answers(doc, resolve, answers_path, coverage):
    """The problems of the live answers in answers_path against doc (see the module doc)."""
    import jsonschema  # python3-jsonschema; only this mode needs it

    with open(answers_path, encoding="utf-8") as f:
        answers = json.load(f)
    # OpenAPI 3.0's `nullable: true` is not JSON Schema: a copy of the document says it as
    # JSON Schema does (null among the types) for the validator.
    doc = with_nullable_types(doc)
    # $refs in schemas resolve against the whole document.
    resolver = jsonschema.RefResolver(base_uri="", referrer=doc)

    def schema_problems(schema, value):
        validator = jsonschema.Draft4Validator(schema, resolver=resolver)
        return [f"{'/'.join(str(p) for p in e.absolute_path) or '(body)'}: {e.message}"
                for e in validator.iter_errors(value)]

    def deref(node):
        while isinstance(node, dict) and "$ref" in node:
            node = resolve(node["$ref"], "answers")
        return node

    problems = []
    seen = {}  # "METHOD /route" -> set of status classes answered
    for a in answers:
        key = f"{a['method'].upper()} {a['route']}"
        status = str(a["status"])
        where = f"{key} answered {status} ({a.get('what', '')})"
        seen.setdefault(key, set()).add(status[0])
        op = ((doc.get("paths") or {}).get(a["route"]) or {}).get(a["method"].lower())
        if not isinstance(op, dict):
            problems.append(f"{where}: the document has no operation {key}")
            continue
        response = deref((op.get("responses") or {}).get(status))
        if response is None:
            problems.append(f"{where}, which the document does not list for it; body: {a.get('body', '')[:300]}")
            continue
        headers = a.get("headers") or {}
        for name, header in (response.get("headers") or {}).items():
            header = deref(header)
            if header.get("required") and name.lower() not in headers:
                problems.append(f"{where}: the documented header {name} is missing")
        content = response.get("content")
        body = a.get("body", "")
        if not content:
            if body:
                problems.append(f"{where}: a body came back where the document has none: {body[:200]}")
            continue
        mt = media_type(a.get("content_type", ""))
        if mt not in content:
            problems.append(f"{where}: content type {a.get('content_type')!r} is not one of {sorted(content)}")
            continue
        media = content[mt] or {}
        if mt == "application/json" or mt.endswith("+json"):
            try:
                value = json.loads(body)
            except ValueError as e:
                problems.append(f"{where}: the body is not JSON ({e}): {body[:200]}")
                continue
            if "schema" in media:
                problems += [f"{where}: {p}" for p in schema_problems(media["schema"], value)]
        elif "x-line-schema" in media:
            # One JSON value per line (NDJSON), or per `data:` line of a server-sent event.
            for n, line in enumerate(body.split("\n"), 1):
                if mt == "text/event-stream":
                    if not line.startswith("data:"):
                        continue
                    line = line[len("data:"):].strip()
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except ValueError as e:
                    problems.append(f"{where}: line {n} is not JSON ({e}): {line[:200]}")
                    continue
                problems += [f"{where}: line {n}: {p}" for p in schema_problems(media["x-line-schema"], value)]
    if coverage:
        for route, item in (doc.get("paths") or {}).items():
            if not coverage(route):
                continue
            for method in item:
                if method not in METHODS:
                    continue
                key = f"{method.upper()} {route}"
                classes = seen.get(key, set())
                if "2" not in classes:
                    problems.append(f"{key}: no live success (2xx) was checked; add a case for it to the conformance test")
                if not classes & {"4", "5"}:
                    problems.append(f"{key}: no live refusal (4xx, 5xx) was checked; add one to the conformance test")
    return problems


ERROR_CALL = re.compile(r'\b(?:Error|Refuse|Refusal|ErrorBody|TooMany)\(\s*(?:[0-9]{3}\s*,\s*)?"([a-z_]+)"')


def check_error_codes(doc, sources):
    """The error codes emitted in `sources` that Error.error.code's enum lacks."""
    enum = set(doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"])
    problems = []
    found = 0
    for source in sources:
        with open(source, encoding="utf-8") as f:
            text = f.read()
        for m in ERROR_CALL.finditer(text):  # calls may span lines
            found += 1
            if m.group(1) not in enum:
                n = text.count("\n", 0, m.start()) + 1
                problems.append(f"{source}:{n}: error code {m.group(1)!r} is not in Error.error.code's enum")
    if found == 0:
        problems.append("no error code found in the sources given (did their calls change shape?)")
    return problems


if __name__ == "__main__":
    args = sys.argv[1:]
    answers_path, coverage, code_sources = None, None, []
    if len(args) >= 3 and args[1] == "--answers":
        answers_path = args[2]
        rest = []
        for a in args[3:]:
            if a == "--coverage":
                coverage = lambda route: True
            elif a.startswith("--coverage-only="):
                coverage = lambda route, p=a.split("=", 1)[1]: route.startswith(p)
            elif a.startswith("--coverage-except="):
                coverage = lambda route, p=a.split("=", 1)[1]: not route.startswith(p)
            else:
                rest.append(a)
        if rest:
            print(__doc__, file=sys.stderr)
            sys.exit(2)
    elif len(args) >= 3 and args[1] == "--error-codes-in":
        code_sources = args[2:]
    elif len(args) != 1:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(args[0], answers_path, coverage, code_sources))
