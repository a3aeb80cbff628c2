#include "proto/enum_labels.h"

namespace accelmon {

std::string_view HolderKindLabel(v1::HolderKind kind) {
  switch (kind) {
    case v1::HOLDER_KIND_POD:
      return "pod";
    case v1::HOLDER_KIND_SLURM:
      return "slurm";
    case v1::HOLDER_KIND_PROCESS:
      return "process";
    default:
      return "";
  }
}

std::string_view RankStateLabel(v1::RankState state) {
  switch (state) {
    case v1::RANK_STATE_OK:
      return "ok";
    case v1::RANK_STATE_MISSING:
      return "missing";
    case v1::RANK_STATE_UNRESPONSIVE:
      return "unresponsive";
    case v1::RANK_STATE_DEAD:
      return "dead";
    case v1::RANK_STATE_ERROR:
      return "error";
    default:
      return "unknown";
  }
}

std::string_view LinkKindLabel(v1::LinkKind kind) {
  switch (kind) {
    case v1::LINK_KIND_NVLINK:
      return "nvlink";
    case v1::LINK_KIND_HCCS:
      return "hccs";
    case v1::LINK_KIND_XGMI:
      return "xgmi";
    case v1::LINK_KIND_PCIE:
      return "pcie";
    case v1::LINK_KIND_INFINIBAND:
      return "infiniband";
    case v1::LINK_KIND_ROCE:
      return "roce";
    case v1::LINK_KIND_ETHERNET:
      return "ethernet";
    case v1::LINK_KIND_NVLINK_FABRIC:
      return "nvlink_fabric";
    default:
      return "unknown";
  }
}

std::string_view MemoryLocationLabel(v1::MemoryLocation location) {
  switch (location) {
    case v1::MEMORY_LOCATION_L1_CACHE:
      return "l1_cache";
    case v1::MEMORY_LOCATION_L2_CACHE:
      return "l2_cache";
    case v1::MEMORY_LOCATION_DRAM:
      return "dram";
    case v1::MEMORY_LOCATION_REGISTER_FILE:
      return "register_file";
    case v1::MEMORY_LOCATION_TEXTURE_MEMORY:
      return "texture_memory";
    case v1::MEMORY_LOCATION_TEXTURE_SHARED:
      return "texture_shared";
    case v1::MEMORY_LOCATION_CBU:
      return "cbu";
    case v1::MEMORY_LOCATION_SRAM:
      return "sram";
    default:
      return "unknown";
  }
}

}  // namespace accelmon
