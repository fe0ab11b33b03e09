-- agent-inbox (the peer, bench/peer.py): each request sends one 1 KB message from
-- PEER_SENDER to the recipient, POST PEER_SEND_PATH (/actors/<sender>/outbox) with the
-- AS2 Create document in PEER_SEND_BODY. Auth is off on the peer: X-Agent-Name is the
-- caller. Expects 201; wrk counts status >= 400 as "Non-2xx", and `bad` counts anything
-- but 201. Prints one WRK_JSON line (same keys as common.lua) at the end.

local threads = {}

function setup(thread)
  thread:set("index", #threads)
  table.insert(threads, thread)
end

created = 0
bad = 0
local req

function init(args)
  local path = assert(os.getenv("PEER_SEND_PATH"), "PEER_SEND_PATH is not set")
  local body = assert(os.getenv("PEER_SEND_BODY"), "PEER_SEND_BODY is not set")
  local sender = assert(os.getenv("PEER_SENDER"), "PEER_SENDER is not set")
  req = wrk.format("POST", path, {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json",
    ["X-Agent-Name"] = sender,
  }, body)
end

function request()
  return req
end

function response(status, headers, body)
  if status == 201 then created = created + 1 else bad = bad + 1 end
end

function done(summary, latency, requests)
  local total_created, total_bad = 0, 0
  for _, thread in ipairs(threads) do
    total_created = total_created + (thread:get("created") or 0)
    total_bad = total_bad + (thread:get("bad") or 0)
  end
  local errors = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests": %d, "duration_us": %d, "p50_us": %d, "p95_us": %d, "p99_us": %d, '
    .. '"max_us": %d, "status_errors": %d, "socket_errors": %d, "created": %d, "bad": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(95),
    latency:percentile(99), latency.max, errors.status,
    errors.connect + errors.read + errors.write + errors.timeout, total_created, total_bad))
end
