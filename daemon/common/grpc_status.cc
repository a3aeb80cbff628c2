#include "daemon/common/grpc_status.h"

#include <iterator>

namespace accelmon {

std::string DescribeStatus(const grpc::Status& status) {
  static const char* const kCodes[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const auto code = static_cast<size_t>(status.error_code());
  std::string text = code < std::size(kCodes) ? kCodes[code] : std::to_string(code);
  if (!status.error_message().empty()) text += ": " + status.error_message();
  return text;
}

}  // namespace accelmon
