// Host work that every rank would repeat on the same payloads (TopkA sums the same P gathered selections on
// every rank), done once: the first rank to ask runs `compute`, the others take the same object. The key is
// the computation (the type of `compute`: each lambda has its own) and the exact list of input payloads; the
// entry holds the inputs (so no other payload can take their addresses while it lives) and is dropped once
// `users` ranks have taken it. Only for pure, deterministic functions of the inputs and of what the call site
// passes alike on every rank: the shared result is then bitwise what each rank would compute.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <typeindex>
#include <utility>
#include <vector>

namespace sparsim {

class SharedResults {
public:
  template <class T, class Compute>
  auto get(const std::vector<std::shared_ptr<const T>>& inputs, int users, const Compute& compute)
  {
    using Result = decltype(compute()); // a std::shared_ptr<const R>
    Key key{typeid(Compute), {}};
    key.second.reserve(inputs.size());
    for (const auto& input : inputs)
      key.second.push_back(reinterpret_cast<std::uintptr_t>(input.get()));
    // Only the rank that computes copies the inputs into the entry.
    auto keep = [&] { return std::make_shared<const std::vector<std::shared_ptr<const T>>>(inputs); };
    return std::static_pointer_cast<typename Result::element_type>(
        get_erased(std::move(key), users, keep, [&] { return compute(); }));
  }

  // Results computed, taken, and still waiting for ranks to take them (0 after every complete iteration).
  std::uint64_t computed() const { return computed_; }
  std::uint64_t taken() const { return taken_; }
  std::size_t pending() const { return entries_.size(); }

private:
  using Key = std::pair<std::type_index, std::vector<std::uintptr_t>>; // computation, input addresses
  using Make = std::function<std::shared_ptr<const void>()>;
  std::shared_ptr<const void> get_erased(Key key, int users, const Make& keep, const Make& compute);

  struct Entry {
    std::shared_ptr<const void> inputs; // kept alive: their addresses are the key
    std::shared_ptr<const void> result;
    int remaining = 0; // ranks yet to take it
  };
  std::map<Key, Entry> entries_;
  std::uint64_t computed_ = 0;
  std::uint64_t taken_ = 0;
};

} // namespace sparsim
