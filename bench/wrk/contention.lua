-- Every client pops the one inbox `bench/hot` (the bench keeps it refilled).
dofile(os.getenv("BENCH_WRK_DIR") .. "/common.lua")
function make_request(n)
  return post_json("/api/v1/messages/pop", '{"workspace": "bench", "project": "hot"}')
end
function on_response(status, headers, body)
  count_claims(status, body)
end
