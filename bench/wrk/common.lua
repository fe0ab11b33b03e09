-- Shared by the bench's wrk scripts: JSON request bodies, each request's own latency and a
-- machine-readable summary. Each script sets `make_request(n)` returning a request, and
-- may set `on_response(status, headers, body)`; requests are counted per thread.
--
-- wrk 4 corrects its latency histogram for coordinated omission: for every response
-- slower than the run's mean interval between requests it adds the samples a client
-- sending at that mean rate would have seen queued behind it, so one stall of 1.8 s
-- among 1,500 requests at one client puts wrk's p95 at 1.5 s. What each request took as
-- it was sent is timed here as well (the bench runs one connection per wrk thread, so a
-- thread's requests and responses alternate), and both are reported.
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock_id, bench_timespec *tp);
]]
local CLOCK_MONOTONIC = 1
local clock = ffi.new("bench_timespec")
local function now_us()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, clock)
  return tonumber(clock.tv_sec) * 1000000 + tonumber(clock.tv_nsec) / 1000
end

local threads = {}

function setup(thread)
  thread:set("index", #threads)
  table.insert(threads, thread)
end

counter = 0
latencies = {}  -- of this thread's requests, in microseconds (read by `done`)
local sent_at = nil

function request()
  counter = counter + 1
  local built = make_request(counter)
  sent_at = now_us()
  return built
end

function response(status, headers, body)
  if sent_at then
    latencies[#latencies + 1] = now_us() - sent_at
    sent_at = nil
  end
  if on_response then on_response(status, headers, body) end
end

function post_json(path, body, extra_headers)
  local headers = { ["Content-Type"] = "application/json" }
  if extra_headers then
    for k, v in pairs(extra_headers) do headers[k] = v end
  end
  return wrk.format("POST", path, headers, body)
end

claimed = 0
empty = 0

-- Counts pops that claimed a message and pops that found none, so the bench can check
-- exactly-once against the database.
function count_claims(status, body)
  if status == 200 then
    if string.find(body, '"message": null', 1, true) or string.find(body, '"message":null', 1, true)
      or string.find(body, '\\"message\\": null', 1, true) then
      empty = empty + 1
    else
      claimed = claimed + 1
    end
  end
end

-- The p-th percentile of the sorted list `sorted` (nearest rank), 0 if it is empty.
local function percentile(sorted, p)
  if #sorted == 0 then return 0 end
  return sorted[math.max(1, math.ceil(p / 100 * #sorted))]
end

function done(summary, latency, requests)
  local total_claimed, total_empty = 0, 0
  local all = {}
  for _, thread in ipairs(threads) do
    total_claimed = total_claimed + (thread:get("claimed") or 0)
    total_empty = total_empty + (thread:get("empty") or 0)
    for _, took in ipairs(thread:get("latencies") or {}) do all[#all + 1] = took end
  end
  table.sort(all)
  local slow = 0
  for _, took in ipairs(all) do
    if took >= 100000 then slow = slow + 1 end
  end
  local errors = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests": %d, "duration_us": %d, "p50_us": %d, "p95_us": %d, "p99_us": %d, '
    .. '"max_us": %d, "status_errors": %d, "socket_errors": %d, "claimed": %d, "empty": %d, '
    .. '"timed": %d, "sent_p50_us": %d, "sent_p95_us": %d, "sent_p99_us": %d, '
    .. '"sent_max_us": %d, "sent_over_100ms": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(95),
    latency:percentile(99), latency.max, errors.status,
    errors.connect + errors.read + errors.write + errors.timeout, total_claimed, total_empty,
    #all, percentile(all, 50), percentile(all, 95), percentile(all, 99),
    all[#all] or 0, slow))
end
