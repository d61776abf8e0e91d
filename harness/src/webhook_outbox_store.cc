#include "webhook_outbox_store.h"

namespace sinew::harness {
namespace {

class WebhookOutboxStore final : public store::SessionStore {
 public:
  WebhookOutboxStore(store::SessionStore* inner, const WebhookState* state)
      : inner_(inner), state_(state) {}

  Result<v1::AppendResponse> Append(const v1::AppendRequest& req) override {
    if (state_->any_endpoint.load()) {
      for (int i = 0; i < req.events_size(); ++i) {
        if (WebhookTypeOf(req.events(i)).empty()) continue;
        SINEW_RETURN_IF_ERROR(RecordWebhookIntent(
            inner_, req.session_id(), req.expected_next_seq() + static_cast<uint64_t>(i)));
      }
    }
    return inner_->Append(req);
  }

  Result<v1::Session> CreateSession(const v1::CreateSessionRequest& req) override {
    return inner_->CreateSession(req);
  }
  Result<v1::Session> GetSession(const std::string& id) override { return inner_->GetSession(id); }
  Result<v1::ListSessionsResponse> ListSessions(const v1::ListSessionsRequest& req) override {
    return inner_->ListSessions(req);
  }
  // The harness writes status changes through Append only; SetStatus sends no webhook.
  Result<v1::Session> SetStatus(const v1::SetStatusRequest& req) override {
    return inner_->SetStatus(req);
  }
  Result<v1::GetEventsResponse> GetEvents(const v1::GetEventsRequest& req) override {
    return inner_->GetEvents(req);
  }
  Result<v1::ReadEventBytesResponse> ReadEventBytes(const v1::ReadEventBytesRequest& req) override {
    return inner_->ReadEventBytes(req);
  }
  Result<std::unique_ptr<store::EventWatcher>> Watch(const std::string& id,
                                                     uint64_t from_seq) override {
    return inner_->Watch(id, from_seq);
  }
  Result<v1::Lease> AcquireLease(const std::string& id, const store::LeaseHolder& holder,
                                 std::chrono::milliseconds ttl) override {
    return inner_->AcquireLease(id, holder, ttl);
  }
  Result<v1::Lease> RenewLease(const std::string& id, const std::string& owner, uint64_t epoch,
                               std::chrono::milliseconds ttl) override {
    return inner_->RenewLease(id, owner, epoch, ttl);
  }
  Status ReleaseLease(const std::string& id, const std::string& owner, uint64_t epoch) override {
    return inner_->ReleaseLease(id, owner, epoch);
  }
  Status Checkpoint(const std::string& target_dir) override {
    return inner_->Checkpoint(target_dir);
  }
  Result<v1::AuditRecord> AppendAudit(const v1::AppendAuditRequest& req) override {
    return inner_->AppendAudit(req);
  }
  Result<v1::ListAuditResponse> ListAudit(const v1::ListAuditRequest& req) override {
    return inner_->ListAudit(req);
  }

 private:
  store::SessionStore* const inner_;
  const WebhookState* const state_;
};

}  // namespace

std::unique_ptr<store::SessionStore> MakeWebhookOutboxStore(store::SessionStore* inner,
                                                            const WebhookState* state) {
  return std::make_unique<WebhookOutboxStore>(inner, state);
}

}  // namespace sinew::harness
