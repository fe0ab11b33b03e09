-- agent-inbox (the peer, bench/peer.py): each request read+acks the next stocked message,
-- POST /objects/<id>/read as PEER_READER (one request both returns the Note and marks it
-- handled; auth is off, X-Agent-Name is the caller).
--
-- Ids come one a line from the file PEER_WRK_IDS. PEER_WRK_THREADS must equal wrk's -t:
-- thread i (0-based, from setup) takes lines i+1, i+1+T, i+1+2T, ... so no id is read
-- twice (the peer answers 200 to a repeat read, so a reused id would look like work).
-- When a thread's ids run out it requests PEER_CHEAP_PATH (/health) instead and counts it
-- in `empty`. `claimed` counts 200s whose body is a Note; `bad` counts any other answer to
-- a real read. `issued` lists, per thread, how many ids it handed out (including requests
-- still in flight at the end), so the caller can drop exactly those before the next run.

local threads = {}

function setup(thread)
  thread:set("index", #threads)
  table.insert(threads, thread)
end

claimed = 0
empty = 0
bad = 0
issued = 0
local mine = {}
local reader, cheap, headers

function init(args)
  local index = wrk.thread:get("index")
  local nthreads = tonumber(os.getenv("PEER_WRK_THREADS") or "")
  assert(nthreads and nthreads > 0, "PEER_WRK_THREADS is not set")
  assert(index < nthreads, "wrk started more threads than PEER_WRK_THREADS="
    .. nthreads .. ": ids would be read twice")
  reader = assert(os.getenv("PEER_READER"), "PEER_READER is not set")
  cheap = os.getenv("PEER_CHEAP_PATH") or "/health"
  headers = { ["Accept"] = "application/json", ["X-Agent-Name"] = reader }
  local path = assert(os.getenv("PEER_WRK_IDS"), "PEER_WRK_IDS is not set")
  local file = assert(io.open(path, "r"))
  local k = 0
  for line in file:lines() do
    if line ~= "" then
      if k % nthreads == index then
        mine[#mine + 1] = line
      end
      k = k + 1
    end
  end
  file:close()
end

function request()
  if issued < #mine then
    issued = issued + 1
    return wrk.format("POST", "/objects/" .. mine[issued] .. "/read", headers)
  end
  empty = empty + 1
  return wrk.format("GET", cheap, headers)
end

function response(status, headers, body)
  if string.find(body, '"type":"Note"', 1, true) then
    if status == 200 then claimed = claimed + 1 else bad = bad + 1 end
  elseif status ~= 200 or not string.find(body, '"status"', 1, true) then
    bad = bad + 1
  end
end

function done(summary, latency, requests)
  local total_claimed, total_empty, total_bad, per_thread = 0, 0, 0, {}
  for _, thread in ipairs(threads) do
    total_claimed = total_claimed + (thread:get("claimed") or 0)
    total_empty = total_empty + (thread:get("empty") or 0)
    total_bad = total_bad + (thread:get("bad") or 0)
    per_thread[#per_thread + 1] = tostring(thread:get("issued") or 0)
  end
  local errors = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests": %d, "duration_us": %d, "p50_us": %d, "p95_us": %d, "p99_us": %d, '
    .. '"max_us": %d, "status_errors": %d, "socket_errors": %d, "claimed": %d, "empty": %d, '
    .. '"bad": %d, "issued": [%s]}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(95),
    latency:percentile(99), latency.max, errors.status,
    errors.connect + errors.read + errors.write + errors.timeout, total_claimed, total_empty,
    total_bad, table.concat(per_thread, ", ")))
end
