#include "sinew/proto_json.h"

#include <google/protobuf/util/json_util.h>

namespace sinew {

std::string ProtoJsonLine(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(message, &out, options).ok()) return "{}";
  return out;
}

}  // namespace sinew
