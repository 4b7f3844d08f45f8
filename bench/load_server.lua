-- wrk script for bench/load_server.sh: POSTs one image file as the raw body and counts responses by status.
-- Usage: wrk ... -s load_server.lua URL -- IMAGE_PATH [CONTENT_TYPE]
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  local f = assert(io.open(args[1], "rb"))
  wrk.method = "POST"
  wrk.body = f:read("*all")
  f:close()
  wrk.headers["Content-Type"] = args[2] or "application/octet-stream"
  counts = {}
end

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    local c = t:get("counts")
    for status, n in pairs(c) do
      total[status] = (total[status] or 0) + n
    end
  end
  local line = "status counts:"
  for status, n in pairs(total) do
    line = line .. " " .. status .. "=" .. n
  end
  io.write(line .. "\n")
  io.write(string.format("latency p50=%.1fms p90=%.1fms p99=%.1fms max=%.1fms\n", latency:percentile(50) / 1000,
                         latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
