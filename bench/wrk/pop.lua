-- REST pop, round robin over BENCH_SINKS stocked inboxes (stock-0 ...).
dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")
local sinks = tonumber(os.getenv("BENCH_SINKS"))
local prefix = os.getenv("BENCH_INBOX_PREFIX") or "stock"
local offset = 0
function init(args)
  offset = (wrk.thread:get("index") or 0) * 7919
end
function make_request(n)
  return post_json("/api/v1/messages/pop", string.format(
    '{"workspace": "bench", "project": "%s-%d"}', prefix, (n + offset) % sinks))
end
function on_response(status, headers, body)
  count_claims(status, body)
end
