-- Shared by the bench's wrk scripts: JSON request bodies and a machine-readable summary.
-- Each script sets `make_request(n)` returning a request; requests are counted per thread.

local threads = {}

function setup(thread)
  thread:set("index", #threads)
  table.insert(threads, thread)
end

counter = 0

function request()
  counter = counter + 1
  return make_request(counter)
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

function done(summary, latency, requests)
  local total_claimed, total_empty = 0, 0
  for _, thread in ipairs(threads) do
    total_claimed = total_claimed + (thread:get("claimed") or 0)
    total_empty = total_empty + (thread:get("empty") or 0)
  end
  local errors = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests": %d, "duration_us": %d, "p50_us": %d, "p95_us": %d, "p99_us": %d, '
    .. '"max_us": %d, "status_errors": %d, "socket_errors": %d, "claimed": %d, "empty": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(95),
    latency:percentile(99), latency.max, errors.status,
    errors.connect + errors.read + errors.write + errors.timeout, total_claimed, total_empty))
end
