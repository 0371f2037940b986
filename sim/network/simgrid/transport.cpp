#include "sim/network/simgrid/transport.hpp"

#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Mailbox.hpp>

#include <stdexcept>
#include <string>
#include <utility>

namespace sparsim {

SimGridTransport::SimGridTransport(std::vector<simgrid::s4u::Host*> rank_hosts, LinkLoadCounter* link_loads)
    : rank_hosts_(std::move(rank_hosts))
    , link_loads_(link_loads)
    , barrier_(simgrid::s4u::Barrier::create(static_cast<unsigned>(rank_hosts_.size())))
{
  if (link_loads_ && link_loads_->routes_chosen_at_start())
    throw std::logic_error("SimGridTransport: SimGrid's flows keep static routes; adaptive routing needs the "
                           "link-level model");
}

Seconds SimGridTransport::now() const { return simgrid::s4u::Engine::get_clock(); }

void SimGridTransport::sleep_for(RankId /*rank*/, Seconds duration) { simgrid::s4u::this_actor::sleep_for(duration); }

simgrid::s4u::Mailbox* SimGridTransport::take_mailbox()
{
  if (free_mailboxes_.empty())
    return simgrid::s4u::Mailbox::by_name("sparsim/" + std::to_string(mailboxes_created_++));
  simgrid::s4u::Mailbox* mailbox = free_mailboxes_.back();
  free_mailboxes_.pop_back();
  return mailbox;
}

SimGridTransport::SimGridMessage& SimGridTransport::pair_with_mailbox(const PairFunction& pair, MessagePtr& message,
                                                                      bool& matched)
{
  simgrid::s4u::Mailbox* mailbox = take_mailbox();
  auto fresh = std::make_shared<SimGridMessage>();
  fresh->mailbox = mailbox;
  Pairing pairing = pair(std::move(fresh));
  if (pairing.matched)
    return_mailbox(mailbox);
  message = std::move(pairing.message);
  matched = pairing.matched;
  return static_cast<SimGridMessage&>(*message);
}

MessagePtr SimGridTransport::post_send(const PairFunction& pair, Outgoing outgoing)
{
  if (link_loads_)
    link_loads_->add(outgoing.source, outgoing.dest, outgoing.bytes, outgoing.iteration);
  MessagePtr message;
  bool matched = false;
  SimGridMessage& m = pair_with_mailbox(pair, message, matched);
  m.source = outgoing.source;
  m.dest = outgoing.dest;
  m.bytes = outgoing.bytes;
  m.payload = std::move(outgoing.payload);
  m.type = outgoing.type;
  m.phase = outgoing.phase;
  m.send_half = m.mailbox->put_async(&m, outgoing.bytes);
  if (matched)
    return_mailbox(m.mailbox); // both halves are posted: SimGrid has emptied it
  return message;
}

MessagePtr SimGridTransport::post_receive(const PairFunction& pair, RankId /*receiver*/, RankId /*source*/, Tag /*tag*/)
{
  MessagePtr message;
  bool matched = false;
  SimGridMessage& m = pair_with_mailbox(pair, message, matched);
  m.receive_half = m.mailbox->get_async(&m.landing);
  if (matched)
    return_mailbox(m.mailbox); // both halves are posted: SimGrid has emptied it
  return message;
}

void SimGridTransport::wait(Message& message, bool is_receive)
{
  auto& m = static_cast<SimGridMessage&>(message);
  simgrid::s4u::CommPtr& half = is_receive ? m.receive_half : m.send_half;
  half->wait();
  half = nullptr;
}

} // namespace sparsim
