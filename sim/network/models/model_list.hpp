// Each model's entry for the registry (network_models.cpp), defined in the model's own file.
#pragma once

#include "sim/network/models/network_model.hpp"

#include <string>

namespace sparsim {

NetworkModel simgrid_flows_model(const std::string& name); // simgrid_flows_model.cpp
NetworkModel link_level_model();                           // link_level_model.cpp

} // namespace sparsim
