#include "sinew/proto_json.h"

#include <gtest/gtest.h>
#include <google/protobuf/any.pb.h>
#include <google/protobuf/api.pb.h>

namespace sinew {
namespace {

TEST(ProtoJsonLineTest, PrintsOneLineWithTheProtoFieldNamesAndNoDefaults) {
  google::protobuf::Method method;
  method.set_name("Append");
  method.set_request_type_url("type.googleapis.com/sinew.v1.AppendRequest");
  method.set_response_streaming(true);
  EXPECT_EQ(ProtoJsonLine(method),
            R"({"name":"Append","request_type_url":"type.googleapis.com/sinew.v1.AppendRequest",)"
            R"("response_streaming":true})");
}

TEST(ProtoJsonLineTest, AMessageProtobufCannotPrintIsAnEmptyObject) {
  google::protobuf::Any any;
  any.set_type_url("type.googleapis.com/no.such.Type");
  any.set_value("x");
  EXPECT_EQ(ProtoJsonLine(any), "{}");
}

}  // namespace
}  // namespace sinew
