#!/usr/bin/env bash
# Load run of `superpoint-rt serve` with wrk (loopback only, bounded durations).
#
#   bench/load_server.sh [BUILD_DIR]
#
# Env: SHARED (default ../shared), THREADS_LIST ("1 2": engine threads per run), WORKERS (2), DURATION (20s),
#      CONNS (connections at a load the server holds; default = WORKERS), OVER_CONNS (connections past capacity),
#      QUEUE (queue of the overload run), N_RSS (requests for the memory check, default 10000), RSS_QUERY.
# For each engine thread count: throughput and p50/p99 latency with CONNS connections (expect zero non-2xx), then
# OVER_CONNS connections against a short queue (expect 200s plus 503s only). Then the resident memory of one server
# before and after N_RSS requests (VmRSS from /proc; RSS_CONNS / RSS_QUEUE below).
# STAGES="load rss" selects the parts to run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
cli=$build/src/cli/superpoint-rt
shared=${SHARED:-$here/../../shared}
weights=$shared/weights/superpoint
image=${IMAGE:-$shared/images/icl_250.png}  # 640x480 PNG
workers=${WORKERS:-2}
duration=${DURATION:-20s}
conns=${CONNS:-$workers}
over_conns=${OVER_CONNS:-16}
queue=${QUEUE:-2}
n_rss=${N_RSS:-10000}
rss_query=${RSS_QUERY:-?max_keypoints=256&return_descriptors=false}
command -v wrk > /dev/null || { echo "wrk is not installed (apt-get install -y wrk)" >&2; exit 1; }

pid=""
port=""
start_server() {  # args: extra serve flags
  local out
  out=$(mktemp)
  "$cli" serve --host 127.0.0.1 --port 0 --weights "$weights" --warmup minimal "$@" > "$out" 2> "$out.err" &
  pid=$!
  for _ in $(seq 1 100); do
    port=$(grep -o '[0-9]*$' "$out" 2> /dev/null || true)
    [ -n "$port" ] && break
    sleep 0.1
  done
  for _ in $(seq 1 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ] && return 0
    sleep 0.2
  done
  echo "server did not become ready" >&2
  cat "$out.err" >&2
  exit 1
}
stop_server() {
  kill -TERM "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
}
trap stop_server EXIT
requests_all() {
  curl -s "http://127.0.0.1:$port/metrics" |
    awk '/^superpoint_rt_http_requests_total\{endpoint="\/v1\/keypoints"/ {n += $2} END {print n + 0}'
}
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
requests_done() {
  curl -s "http://127.0.0.1:$port/metrics" |
    awk -F' ' '/^superpoint_rt_http_requests_total\{endpoint="\/v1\/keypoints",status="200"\}/ {print $2}'
}

echo "# superpoint-rt serve load run: $(basename "$image"), $workers workers, wrk $duration, $(nproc) cores"
stages=${STAGES:-load rss}
[[ " $stages " == *" load "* ]] || THREADS_LIST=" "
for threads in ${THREADS_LIST:-1 2}; do
  start_server --threads "$threads" --workers "$workers" --queue 64
  echo "## engine threads $threads: $conns connections (a load the server holds)"
  wrk -t1 -c"$conns" -d"$duration" --timeout 30s -s "$here/load_server.lua" \
    "http://127.0.0.1:$port/v1/keypoints" -- "$image" image/png | grep -E "Requests/sec|status counts|latency p50|Non-2xx"
  stop_server
  start_server --threads "$threads" --workers "$workers" --queue "$queue"
  echo "## engine threads $threads: $over_conns connections against --queue $queue (past capacity: expect 503s)"
  wrk -t2 -c"$over_conns" -d"$duration" --timeout 30s -s "$here/load_server.lua" \
    "http://127.0.0.1:$port/v1/keypoints" -- "$image" image/png | grep -E "Requests/sec|status counts|latency p50"
  stop_server
done

# Memory: RSS_CONNS connections against --queue RSS_QUEUE until N_RSS requests were answered. With the default
# RSS_CONNS=2 / RSS_QUEUE=64 every request is a full 200 (needs a machine fast enough for N_RSS in minutes); with
# more connections than workers + queue most are refused with 503 AFTER their body was read and checked, which
# exercises the whole HTTP path at a high rate while some requests run the full image path.
[[ " $stages " == *" rss "* ]] || exit 0
rss_conns=${RSS_CONNS:-$workers}
rss_queue=${RSS_QUEUE:-64}
echo "## resident memory over $n_rss requests ($(basename "$image"), query '$rss_query', 2 engine threads," \
  "$rss_conns connections, --queue $rss_queue)"
start_server --threads 2 --workers "$workers" --queue "$rss_queue"
rss0=$(rss_kb)
echo "VmRSS after warm-up: $rss0 kB"
while :; do
  total=$(requests_all)
  [ "${total:-0}" -ge "$n_rss" ] && break
  wrk -t2 -c"$rss_conns" -d10s --timeout 30s -s "$here/load_server.lua" \
    "http://127.0.0.1:$port/v1/keypoints$rss_query" -- "$image" image/png > /dev/null
  echo "  $(requests_all) requests ($(requests_done) with 200), VmRSS $(rss_kb) kB"
done
echo "VmRSS after $(requests_all) requests ($(requests_done) with 200): $(rss_kb) kB (before: $rss0 kB)"
curl -s "http://127.0.0.1:$port/metrics" | grep -E '^superpoint_rt_http_requests_total|^superpoint_rt_in_flight'
