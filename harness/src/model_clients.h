// The ModelClient implementations and the retry loop they share (internal).
#pragma once

#include <functional>
#include <memory>

#include "curl_http.h"
#include "sinew/harness/model_client.h"

namespace sinew::harness {

std::unique_ptr<ModelClient> NewOpenAiClient(const ModelEndpointConfig& config, std::string api_key);
std::unique_ptr<ModelClient> NewAnthropicClient(const ModelEndpointConfig& config,
                                                std::string api_key);
// The scripted model (a test double of a language model): replays the responses of a
// JSON file, response number ModelCall::turn for each call. Errors: the file's.
Result<std::unique_ptr<ModelClient>> NewScriptedModel(const ModelEndpointConfig& config);

// One HTTP attempt of a model call: returns the HTTP response (the body may have been
// consumed by streaming) or a transport error; fills *reply.
using ModelAttempt = std::function<Result<HttpResponse>(ModelReply* reply)>;

// Runs attempts until one succeeds, retrying 429, 5xx and transport errors with
// exponential backoff (Retry-After honoured) up to config.max_retries times.
Result<ModelReply> RunWithRetries(const ModelEndpointConfig& config, const ModelCall& call,
                                  const ModelAttempt& attempt);

}  // namespace sinew::harness
