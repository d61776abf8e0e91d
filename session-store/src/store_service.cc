#include "sinew/session_store/store_service.h"

#include <spdlog/spdlog.h>

#include "sinew/grpc_status.h"
#include "sinew/grpc_trace.h"

namespace sinew::store {
namespace {

using grpc::ServerContext;

// Copies a Result into a response message or returns its error as a gRPC status.
template <typename T>
grpc::Status Reply(Result<T> r, T* response) {
  if (!r.ok()) return ToGrpcStatus(r.status());
  *response = std::move(r).value();
  return grpc::Status::OK;
}

// Runs `fn` (the body of RPC `method` about `session`) with the caller's trace in the log
// context, and logs the call's start and end at debug level.
template <typename Fn>
grpc::Status Traced(const ServerContext* ctx, const char* method, const std::string& session, Fn&& fn) {
  if (!spdlog::should_log(spdlog::level::debug)) return fn();
  LogFields fields = FieldsForCall(*ctx);
  fields.session = session;
  ScopedLogContext scope(std::move(fields));
  spdlog::debug("store {} started", method);
  grpc::Status s = fn();
  spdlog::debug("store {} ended: {}", method, s.ok() ? "OK" : s.error_message());
  return s;
}

class StoreServiceImpl final : public v1::SessionStore::Service {
 public:
  explicit StoreServiceImpl(SessionStore* store) : store_(store) {}

  grpc::Status CreateSession(ServerContext* ctx, const v1::CreateSessionRequest* req,
                             v1::Session* resp) override {
    return Traced(ctx, "CreateSession", req->session_id(),
                  [&] { return Reply(store_->CreateSession(*req), resp); });
  }

  grpc::Status GetSession(ServerContext* ctx, const v1::GetSessionRequest* req,
                          v1::GetSessionResponse* resp) override {
    return Traced(ctx, "GetSession", req->session_id(), [&] { return DoGetSession(req, resp); });
  }

  grpc::Status DoGetSession(const v1::GetSessionRequest* req, v1::GetSessionResponse* resp) {
    auto meta = store_->GetSession(req->session_id());
    if (!meta.ok()) return ToGrpcStatus(meta.status());
    *resp->mutable_session() = std::move(meta).value();
    if (req->include_events()) {
      v1::GetEventsRequest er;
      er.set_session_id(req->session_id());
      er.set_limit(req->event_limit() == 0 ? 100000 : req->event_limit());
      auto events = store_->GetEvents(er);
      if (!events.ok()) return ToGrpcStatus(events.status());
      resp->mutable_events()->Swap(events->mutable_events());
    }
    return grpc::Status::OK;
  }

  grpc::Status AppendAudit(ServerContext* ctx, const v1::AppendAuditRequest* req, v1::AuditRecord* resp) override {
    return Traced(ctx, "AppendAudit", req->session_id(), [&] { return Reply(store_->AppendAudit(*req), resp); });
  }

  grpc::Status ListAudit(ServerContext*, const v1::ListAuditRequest* req, v1::ListAuditResponse* resp) override {
    return Reply(store_->ListAudit(*req), resp);
  }

  grpc::Status ListSessions(ServerContext*, const v1::ListSessionsRequest* req,
                            v1::ListSessionsResponse* resp) override {
    return Reply(store_->ListSessions(*req), resp);
  }

  grpc::Status SetStatus(ServerContext* ctx, const v1::SetStatusRequest* req,
                         v1::Session* resp) override {
    return Traced(ctx, "SetStatus", req->session_id(), [&] { return Reply(store_->SetStatus(*req), resp); });
  }

  grpc::Status Append(ServerContext* ctx, const v1::AppendRequest* req,
                      v1::AppendResponse* resp) override {
    return Traced(ctx, "Append", req->session_id(), [&] { return Reply(store_->Append(*req), resp); });
  }

  grpc::Status GetEvents(ServerContext* ctx, const v1::GetEventsRequest* req,
                         v1::GetEventsResponse* resp) override {
    return Traced(ctx, "GetEvents", req->session_id(), [&] { return Reply(store_->GetEvents(*req), resp); });
  }

  // The stored bytes go out as they came from RocksDB: the response is moved, not copied,
  // and gRPC writes each `bytes` element without looking inside it.
  grpc::Status ReadEventBytes(ServerContext* ctx, const v1::ReadEventBytesRequest* req,
                              v1::ReadEventBytesResponse* resp) override {
    return Traced(ctx, "ReadEventBytes", req->session_id(),
                  [&] { return Reply(store_->ReadEventBytes(*req), resp); });
  }

  grpc::Status Watch(ServerContext* ctx, const v1::WatchRequest* req,
                     grpc::ServerWriter<v1::Event>* writer) override {
    auto watcher = store_->Watch(req->session_id(), req->from_seq());
    if (!watcher.ok()) return ToGrpcStatus(watcher.status());
    v1::Event ev;
    while (!ctx->IsCancelled()) {
      // The timeout only bounds how long a cancelled client goes unnoticed; new events
      // wake the watcher at once.
      auto got = (*watcher)->Next(&ev, std::chrono::milliseconds(200));
      if (!got.ok()) return ToGrpcStatus(got.status());
      if (*got && !writer->Write(ev)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status AcquireLease(ServerContext* ctx, const v1::AcquireLeaseRequest* req,
                            v1::Lease* resp) override {
    return Traced(ctx, "AcquireLease", req->session_id(), [&] {
      return Reply(store_->AcquireLease(req->session_id(), {req->owner(), req->holder_url()},
                                        std::chrono::milliseconds(req->ttl_ms())),
                   resp);
    });
  }

  grpc::Status RenewLease(ServerContext* ctx, const v1::RenewLeaseRequest* req,
                          v1::Lease* resp) override {
    return Traced(ctx, "RenewLease", req->session_id(), [&] {
      return Reply(store_->RenewLease(req->session_id(), req->owner(), req->epoch(),
                                      std::chrono::milliseconds(req->ttl_ms())),
                   resp);
    });
  }

  grpc::Status ReleaseLease(ServerContext* ctx, const v1::ReleaseLeaseRequest* req,
                            v1::ReleaseLeaseResponse*) override {
    return Traced(ctx, "ReleaseLease", req->session_id(), [&] {
      return ToGrpcStatus(store_->ReleaseLease(req->session_id(), req->owner(), req->epoch()));
    });
  }

  grpc::Status Checkpoint(ServerContext*, const v1::CheckpointRequest* req,
                          v1::CheckpointResponse* resp) override {
    Status s = store_->Checkpoint(req->target_dir());
    if (s.ok()) resp->set_target_dir(req->target_dir());
    return ToGrpcStatus(s);
  }

  grpc::Status Health(ServerContext*, const v1::HealthRequest*, v1::HealthResponse* resp) override {
    resp->set_status("serving");
    return grpc::Status::OK;
  }

 private:
  SessionStore* const store_;  // not owned
};

}  // namespace

std::unique_ptr<v1::SessionStore::Service> NewStoreService(SessionStore* store) {
  return std::make_unique<StoreServiceImpl>(store);
}

void ConfigureStoreServer(grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  builder->SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveMs);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Clients ping as often as the server does; gRPC's default would call that abuse.
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, kKeepaliveMs / 2);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
}

}  // namespace sinew::store
