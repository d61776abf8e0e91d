#!/usr/bin/env python3
"""Checks an OpenAPI 3.0 document's structure and prints its operations' statuses.

  check-openapi.py FILE    -> exit 0 and {"GET /path": ["200", ...], ...} as JSON on stdout,
                              or exit 1 and one problem per line on stderr.

Checked: the OpenAPI version and info; every path and operation; responses keyed by
three-digit statuses, each a resolvable $ref or an object with a description; parameters
with name and a valid `in` (path parameters required); every $ref resolves; no value is
null (a YAML flow mapping split at a comma leaves one). Needs python3-yaml.
"""
import json
import re
import sys

import yaml

METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def main(path):
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
    if problems:
        for p in problems:
            print(f"{path}: {p}", file=sys.stderr)
        return 1
    json.dump(statuses, sys.stdout, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
