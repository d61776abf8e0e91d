// JsonSchema::Compile: JSON schema -> SchemaNode graph for the JsonMatcher.
#include <boost/json/serialize.hpp>

#include "json_matcher.h"

namespace sinew::model {
namespace {

namespace json = boost::json;

Status Bad(const std::string& what) { return Status::InvalidArgument("json schema: " + what); }

Result<int32_t> Count(const json::object& o, const char* key, int32_t fallback) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return fallback;
  if (!v->is_int64() || v->as_int64() < 0 || v->as_int64() > 4096) {
    return Bad(std::string(key) + " must be an integer in [0, 4096]");
  }
  return static_cast<int32_t>(v->as_int64());
}

bool Known(std::string_view key) {
  for (std::string_view k : {"type", "properties", "required", "items", "minItems", "maxItems",
                             "minLength", "maxLength", "enum", "const", "anyOf", "oneOf",
                             "description", "title", "default", "examples", "$schema",
                             "additionalProperties", "format", "strict"}) {
    if (key == k) return true;
  }
  return false;
}

}  // namespace

Result<std::shared_ptr<const JsonSchema>> JsonSchema::Compile(const json::value& schema) {
  auto compiled = std::make_shared<JsonSchema>();
  SINEW_RETURN_IF_ERROR(compiled->Add(schema, 0).status());
  return std::shared_ptr<const JsonSchema>(std::move(compiled));
}

Result<int32_t> JsonSchema::Add(const json::value& schema, int depth) {
  if (depth > kMaxDepth) return Bad("nested deeper than " + std::to_string(kMaxDepth) + " levels");
  const int32_t id = static_cast<int32_t>(nodes_.size());
  nodes_.emplace_back();
  auto set = [this, id](SchemaNode n) { nodes_[static_cast<size_t>(id)] = std::move(n); };
  SchemaNode n;
  if (schema.is_bool() && schema.as_bool()) {  // `true`: any scalar
    n.kind = SchemaNode::Kind::kAnyOf;
    for (const char* t : {"string", "number", "boolean", "null"}) {
      SINEW_ASSIGN_OR_RETURN(int32_t c, Add(json::object{{"type", t}}, depth + 1));
      n.children.push_back(c);
    }
    set(std::move(n));
    return id;
  }
  if (!schema.is_object()) return Bad("a schema must be an object");
  const json::object& o = schema.as_object();
  for (const auto& kv : o) {
    if (!Known(kv.key())) return Bad("unsupported keyword '" + std::string(kv.key()) + "'");
  }
  if (const json::value* e = o.if_contains("enum")) {
    if (!e->is_array() || e->as_array().empty()) return Bad("enum must be a non-empty array");
    for (const json::value& v : e->as_array()) n.literals.push_back(json::serialize(v));
    set(std::move(n));
    return id;
  }
  if (const json::value* c = o.if_contains("const")) {
    n.literals.push_back(json::serialize(*c));
    set(std::move(n));
    return id;
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (const json::value* a = o.if_contains(key)) {
      if (!a->is_array() || a->as_array().empty()) {
        return Bad(std::string(key) + " must be a non-empty array");
      }
      n.kind = SchemaNode::Kind::kAnyOf;
      for (const json::value& option : a->as_array()) {
        SINEW_ASSIGN_OR_RETURN(int32_t child, Add(option, depth + 1));
        n.children.push_back(child);
      }
      set(std::move(n));
      return id;
    }
  }
  std::string type;
  if (const json::value* t = o.if_contains("type")) {
    if (t->is_array()) {  // ["string", "null"]: one branch per type
      n.kind = SchemaNode::Kind::kAnyOf;
      for (const json::value& one : t->as_array()) {
        json::object copy = o;
        copy["type"] = one;
        SINEW_ASSIGN_OR_RETURN(int32_t child, Add(copy, depth + 1));
        n.children.push_back(child);
      }
      if (n.children.empty()) return Bad("type must not be an empty list");
      set(std::move(n));
      return id;
    }
    if (!t->is_string()) return Bad("type must be a string or a list of strings");
    type = std::string(t->as_string());
  } else if (o.contains("properties")) {
    type = "object";
  } else if (o.contains("items")) {
    type = "array";
  } else {
    return Add(true, depth);
  }
  if (type == "object") {
    n.kind = SchemaNode::Kind::kObject;
    if (const json::value* p = o.if_contains("properties")) {
      if (!p->is_object()) return Bad("properties must be an object");
      for (const auto& kv : p->as_object()) {
        const std::string name(kv.key());
        for (char ch : name) {
          if (ch == '"' || ch == '\\' || static_cast<unsigned char>(ch) < 0x20) {
            return Bad("property name '" + name + "' needs escaping, which is not supported");
          }
        }
        SINEW_ASSIGN_OR_RETURN(int32_t child, Add(kv.value(), depth + 1));
        n.names.push_back(name);
        n.children.push_back(child);
        n.required.push_back(false);
      }
    }
    if (const json::value* r = o.if_contains("required")) {
      if (!r->is_array()) return Bad("required must be an array of property names");
      for (const json::value& name : r->as_array()) {
        if (!name.is_string()) return Bad("required must be an array of property names");
        auto it = std::find(n.names.begin(), n.names.end(), std::string(name.as_string()));
        if (it == n.names.end()) {
          return Bad("required property '" + std::string(name.as_string()) + "' is not defined");
        }
        n.required[static_cast<size_t>(it - n.names.begin())] = true;
      }
    }
  } else if (type == "array") {
    n.kind = SchemaNode::Kind::kArray;
    const json::value* items = o.if_contains("items");
    SINEW_ASSIGN_OR_RETURN(n.items, items != nullptr ? Add(*items, depth + 1) : Add(true, depth + 1));
    SINEW_ASSIGN_OR_RETURN(n.min_count, Count(o, "minItems", 0));
    SINEW_ASSIGN_OR_RETURN(n.max_count,
                           Count(o, "maxItems", std::max(n.min_count, kDefaultMaxItems)));
    if (n.max_count < n.min_count) return Bad("maxItems is below minItems");
  } else if (type == "string") {
    n.kind = SchemaNode::Kind::kString;
    SINEW_ASSIGN_OR_RETURN(n.min_count, Count(o, "minLength", 0));
    SINEW_ASSIGN_OR_RETURN(n.max_count,
                           Count(o, "maxLength", std::max(n.min_count, kDefaultMaxString)));
    if (n.max_count < n.min_count) return Bad("maxLength is below minLength");
  } else if (type == "number" || type == "integer") {
    n.kind = type == "number" ? SchemaNode::Kind::kNumber : SchemaNode::Kind::kInteger;
  } else if (type == "boolean") {
    n.literals = {"true", "false"};
  } else if (type == "null") {
    n.literals = {"null"};
  } else {
    return Bad("unsupported type '" + type + "'");
  }
  set(std::move(n));
  return id;
}

}  // namespace sinew::model
