// Config refusals checked in process: parse_config must throw a ConfigError naming the JSON path and the value.
#pragma once

#include "sim/run/config.hpp"

#include <filesystem>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>

namespace sparsim::testing {

// parse_config(config, config_dir) refuses `config` with a message that names `path` and `value`.
inline void expect_config_error(const nlohmann::json& config, const std::filesystem::path& config_dir,
                                const std::string& path, const std::string& value)
{
  try {
    parse_config(config, config_dir);
    ADD_FAILURE() << "accepted: " << config.dump();
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(value), std::string::npos) << what;
  }
}

} // namespace sparsim::testing
