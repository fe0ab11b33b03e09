-- REST send of a 1 KB body, spread over BENCH_SINKS recipient projects (sink-0 ...) so no
-- inbox reaches its bound of 256 during a run.
dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")
local sinks = tonumber(os.getenv("BENCH_SINKS"))
local body = os.getenv("BENCH_BODY")
local offset = 0
function init(args)
  offset = (wrk.thread:get("index") or 0) * 7919
end
function make_request(n)
  local to = string.format("sink-%d", (n + offset) % sinks)
  return post_json("/api/v1/messages", string.format(
    '{"to_workspace": "bench", "to_project": "%s", "from_workspace": "bench", '
    .. '"from_project": "sender", "body": "%s"}', to, body))
end
