// The Transport of SimGrid's flow model: every message is one SimGrid transfer between the two ranks' hosts,
// timed by the engine's network model (CM02 by default: max-min sharing of every link of the route).
//
// Each unmatched message takes a SimGrid mailbox from a pool; the sender puts and the receiver gets on it
// (each waits on its own half) and the mailbox returns to the pool once both halves are posted. (SimGrid
// 3.32's host-to-host Comm::sendto_async is not used: it registers every transfer in one global list that
// each completion scans, which made the cost per message grow with the number of messages in flight; see
// docs/scale.md.)
#pragma once

#include "sim/comm/transport.hpp"

#include <simgrid/s4u/Barrier.hpp>
#include <simgrid/s4u/Comm.hpp>

#include <cstddef>
#include <vector>

namespace simgrid::s4u {
class Host;
class Mailbox;
} // namespace simgrid::s4u

namespace sparsim {

class SimGridTransport : public Transport {
public:
  // Ranks 0..P-1 on these hosts (rank_hosts.size() == P). Call from inside the engine's lifetime. Messages'
  // link loads are counted in `link_loads` when given, on the topology's static routes (SimGrid's flows follow
  // the platform's routes: no route is chosen per message, the config refuses adaptive routing).
  explicit SimGridTransport(std::vector<simgrid::s4u::Host*> rank_hosts, LinkLoadCounter* link_loads = nullptr);

  Seconds now() const override;
  void sleep_for(RankId rank, Seconds duration) override;
  void align_ranks(RankId /*rank*/) override { barrier_->wait(); }
  void rank_finished(RankId /*rank*/) override {}

  MessagePtr post_send(const PairFunction& pair, Outgoing outgoing) override;
  MessagePtr post_receive(const PairFunction& pair, RankId receiver, RankId source, Tag tag) override;
  void wait(Message& message, bool is_receive) override;

private:
  // A message's SimGrid state: its mailbox and each side's half of the transfer.
  struct SimGridMessage : Message {
    simgrid::s4u::Mailbox* mailbox = nullptr;
    void* landing = nullptr; // where the receive half stores the (unused) data pointer
    simgrid::s4u::CommPtr send_half;
    simgrid::s4u::CommPtr receive_half;
  };
  // Takes a mailbox and pairs: a new message keeps the mailbox, a matched one returns it. The mailbox is
  // taken before pairing because creating one yields to SimGrid, and the matcher's queues must not change
  // between the look-up and the filing.
  SimGridMessage& pair_with_mailbox(const PairFunction& pair, MessagePtr& message, bool& matched);
  // Mailboxes are reused: one is taken for each unmatched message and returned once both halves are posted.
  simgrid::s4u::Mailbox* take_mailbox();
  void return_mailbox(simgrid::s4u::Mailbox* mailbox) { free_mailboxes_.push_back(mailbox); }

  std::vector<simgrid::s4u::Host*> rank_hosts_;
  LinkLoadCounter* link_loads_;
  simgrid::s4u::BarrierPtr barrier_;
  std::vector<simgrid::s4u::Mailbox*> free_mailboxes_;
  std::size_t mailboxes_created_ = 0;
};

} // namespace sparsim
