-- MCP tools/call (initialize era, as most clients speak it today): memory_message_send to
-- sink projects, or memory_message_pop from stocked inboxes (BENCH_TOOL).
dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")
local sinks = tonumber(os.getenv("BENCH_SINKS"))
local tool = os.getenv("BENCH_TOOL")
local body = os.getenv("BENCH_BODY")
local headers = { ["MCP-Protocol-Version"] = "2025-11-25", ["Accept"] = "application/json" }
local offset = 0
function init(args)
  offset = (wrk.thread:get("index") or 0) * 7919
end
function make_request(n)
  local k = (n + offset) % sinks
  local arguments
  if tool == "memory_message_send" then
    arguments = string.format(
      '{"to_workspace": "bench", "to_project": "sink-%d", "from_workspace": "bench", '
      .. '"from_project": "sender", "body": "%s"}', k, body)
  else
    arguments = string.format('{"workspace": "bench", "project": "stock-%d"}', k)
  end
  return post_json("/mcp", string.format(
    '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", '
    .. '"params": {"name": "%s", "arguments": %s}}', n, tool, arguments), headers)
end
function on_response(status, headers, body)
  if tool ~= "memory_message_send" then count_claims(status, body) end
end
