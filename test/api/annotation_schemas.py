#!/usr/bin/env python3
"""Keep the annotation schemas in api/openapi.yaml equal to api/*.schema.json.

The annotations flextopo reads and writes are specified as JSON Schema 2020-12
(api/topology.schema.json, api/allocation.schema.json). OpenAPI 3.0 has its own
dialect, so this script converts them (const -> enum, examples -> example,
$defs -> components named <Prefix>.<def>, a $ref with siblings -> allOf) and
writes the result between the BEGIN/END markers of api/openapi.yaml.

    annotation_schemas.py --write   regenerate the block
    annotation_schemas.py           check it is up to date (exit 1 if not)
"""
import json
import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "api" / "openapi.yaml"
SOURCES = [
    ("TopologyAnnotation", "Topology", ROOT / "api" / "topology.schema.json"),
    ("AllocationAnnotation", "Allocation", ROOT / "api" / "allocation.schema.json"),
]
BEGIN = "    # BEGIN annotation schemas"
END = "    # END annotation schemas"
SUPPORTED = {
    "type", "description", "title", "properties", "required", "items", "enum",
    "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems",
    "pattern", "oneOf", "anyOf", "allOf", "additionalProperties", "format",
}


def convert(node, prefix):
    """One JSON Schema 2020-12 object as an OpenAPI 3.0 Schema Object."""
    if not isinstance(node, dict):
        return node
    out = {}
    ref = None
    for key, value in node.items():
        if key in ("$schema", "$id", "$defs"):
            continue
        if key == "$ref":
            assert value.startswith("#/$defs/"), value
            ref = "#/components/schemas/%s.%s" % (prefix, value[len("#/$defs/"):])
        elif key == "const":
            out["enum"] = [value]
        elif key == "examples":
            out["example"] = value[0]
        elif key == "properties":
            out[key] = {k: convert(v, prefix) for k, v in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = convert(value, prefix)
        elif key in ("oneOf", "anyOf", "allOf"):
            out[key] = [convert(v, prefix) for v in value]
        elif key == "type" and isinstance(value, list):
            kinds = [t for t in value if t != "null"]
            if len(kinds) == 1:
                out["type"] = kinds[0]
            else:
                out["oneOf"] = [{"type": t} for t in kinds]
            if "null" in value:
                out["nullable"] = True
        else:
            if key not in SUPPORTED:
                raise SystemExit("unsupported JSON Schema keyword %r" % key)
            out[key] = value
    if ref and not out:
        return {"$ref": ref}
    if ref:
        out["allOf"] = [{"$ref": ref}]
    return out


def components():
    schemas = {}
    for name, prefix, path in SOURCES:
        doc = json.loads(path.read_text())
        schemas[name] = convert(doc, prefix)
        for key, value in doc.get("$defs", {}).items():
            schemas["%s.%s" % (prefix, key)] = convert(value, prefix)
    return schemas


def block():
    text = yaml.safe_dump(components(), sort_keys=False, width=100, allow_unicode=True)
    body = "".join("    " + line + "\n" if line else "\n" for line in text.splitlines())
    head = ("    # BEGIN annotation schemas: generated from api/topology.schema.json and\n"
            "    # api/allocation.schema.json by test/api/annotation_schemas.py --write; do not edit.\n")
    return head + body + END + "\n"


def main():
    text = OPENAPI.read_text()
    start = text.index(BEGIN)
    end = text.index(END) + len(END) + 1
    want = block()
    if "--write" in sys.argv[1:]:
        OPENAPI.write_text(text[:start] + want + text[end:])
        return 0
    if text[start:end] != want:
        print("api/openapi.yaml: annotation schemas differ from api/*.schema.json; "
              "run test/api/annotation_schemas.py --write", file=sys.stderr)
        return 1
    spec = yaml.safe_load(text)
    for name in components():
        assert name in spec["components"]["schemas"], name
    print("annotation schemas: api/openapi.yaml matches api/*.schema.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
