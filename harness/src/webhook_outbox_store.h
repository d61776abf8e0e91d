// WebhookOutboxStore: the session store as the harness's drivers and API use it, writing
// the webhook outbox ahead of the events it names (docs/harness.md, "Webhooks").
//
// Before an Append that carries an event a webhook may be sent for (a status change, an
// error: WebhookTypeOf), it records one outbox entry per such event with the seq the
// event will get (expected_next_seq + its index); then it appends. An entry whose
// append was refused, or whose seq a later driver filled with another event, is dropped
// by the deliverer, which sends only what the session's log holds at that seq. So an
// event in a log always had its entry first, whichever harness wrote it and whenever it
// crashed. Nothing is written while no endpoint exists (WebhookState::any_endpoint).
//
// Thread-safety: as SessionStore.
#pragma once

#include <memory>

#include "sinew/session_store/session_store.h"
#include "webhooks.h"

namespace sinew::harness {

// `inner` and `state` are not owned and outlive the result.
std::unique_ptr<store::SessionStore> MakeWebhookOutboxStore(store::SessionStore* inner,
                                                            const WebhookState* state);

}  // namespace sinew::harness
