-- GET of one path (the floor: /healthz, a static file, a web page), keep-alive.
dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")
local path = os.getenv("BENCH_PATH")
function make_request(n)
  return wrk.format("GET", path)
end
