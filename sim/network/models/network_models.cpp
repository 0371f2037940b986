#include "sim/network/models/model_list.hpp"

#include <stdexcept>

namespace sparsim {

const std::vector<NetworkModel>& network_models()
{
  // SimGrid's "Constant" model is not offered: it has no links, and every platform here is made of links.
  static const std::vector<NetworkModel> models = {simgrid_flows_model("CM02"), simgrid_flows_model("LV08"),
                                                   simgrid_flows_model("SMPI"), link_level_model()};
  return models;
}

const NetworkModel& network_model(const std::string& name)
{
  for (const NetworkModel& model : network_models())
    if (model.name == name)
      return model;
  throw std::out_of_range("no network model \"" + name + "\"");
}

std::vector<std::string> network_model_names()
{
  std::vector<std::string> names;
  for (const NetworkModel& model : network_models())
    names.push_back(model.name);
  return names;
}

} // namespace sparsim
