# server/ sources of the OpenAI-compatible /v1 endpoint (openai_api.h) in front of an
# inference::Backend.
list(APPEND ENVFORGE_SERVER_SOURCES
  openai_api.cc
  internal/openai_error.cc
  internal/openai_request.cc
  internal/openai_response.cc
  internal/openai_stream.cc
  internal/worker_pool.cc
)
