// A protobuf message as one line of JSON, the form every Sinew tool and API prints
// events, sessions and other messages in.
#pragma once

#include <google/protobuf/message.h>

#include <string>

namespace sinew {

// `message` as a single-line JSON object with the .proto field names (snake_case), fields
// at their default values left out, 64-bit integers as strings and enums by name
// (protobuf's JSON mapping). A message protobuf cannot print (an Any of an unknown type)
// becomes "{}", so that the line is always valid JSON.
std::string ProtoJsonLine(const google::protobuf::Message& message);

}  // namespace sinew
