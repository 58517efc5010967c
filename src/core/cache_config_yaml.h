// The `cache:` section's YAML reading and checks, for config.cc. Both throw
// yaml_fields::FieldError (caught by the config loader, which names the file).
#pragma once

#include <yaml-cpp/yaml.h>

#include "core/cache_config.h"

namespace hengshi {

void parse_cache(const YAML::Node& node, CacheConfig& config);
void check_cache(const CacheConfig& config);

}  // namespace hengshi
