// A gRPC status as a person reads it in a log line or an error: "UNAVAILABLE: failed to connect".
#pragma once

#include <grpcpp/support/status.h>

#include <string>

namespace accelmon {

// The code's name (its number when gRPC adds codes we do not know), then the message if any.
std::string DescribeStatus(const grpc::Status& status);

}  // namespace accelmon
