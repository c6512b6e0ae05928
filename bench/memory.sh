#!/usr/bin/env bash
# The memory sizing table of docs/operations.md ("Memory"): the resident
# memory of `cairn run` by devices, graph and window length. Each cell runs
# the built binary for RUN seconds on a generated pipeline fed by the
# built-in simulator (no broker, no network: the sinks publish to the
# agent's embedded broker, whose memory counts too), samples VmRSS from
# /proc/PID/status every half second, and prints one line: the largest
# VmRSS sampled, VmHWM at the end, the largest live heap `cairn status
# --json` reported, and how many readings the sources read.
#
#   bench/memory.sh                                  # the whole table, about 10 minutes
#   DEVICES="100 1000" GRAPHS=window WINDOWS=10s bench/memory.sh
#   CAIRN=/usr/bin/cairn RUN=30 bench/memory.sh     # another binary, longer runs
#   MEMORY_LIMIT=48MiB bench/memory.sh              # with agent.memory_limit
#
# Graphs: "window" is configs/gateway.yaml's shape (a source, a tumbling
# average per device, a sink); "4windows" four tumbling windows per device
# (avg, min, max, count), each with a sink; "demo" configs/demo.yaml's 11
# (two fleets of DEVICES devices, a filter, a tumbling average per device, a
# sliding count per site, a windowed join of the fleets, a threshold alarm,
# four sinks). The simulator's devices send together max(1000, DEVICES)
# readings a second, so every device has sent within the first seconds, and
# its event time runs at the wall clock's pace: a 10s window fires during a
# run of 12 s, a 1m or 1h one holds its open window for every device.
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICES=${DEVICES:-100 1000 10000 100000}
GRAPHS=${GRAPHS:-window 4windows demo}
WINDOWS=${WINDOWS:-10s 1m 1h}
RUN=${RUN:-12}
MEMORY_LIMIT=${MEMORY_LIMIT:-}

work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if [ -z "${CAIRN:-}" ]; then
  CAIRN=$work/cairn
  # The static gateway build, as .ci/release makes it.
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$CAIRN" ./cmd/cairn
fi

freeport() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# kib FIELD PID: the field (VmRSS, VmHWM) of /proc/PID/status, in KiB.
kib() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$2/status"; }

# pipeline GRAPH DEVICES WINDOW DIR PORT: the pipeline file's text.
pipeline() {
  local graph=$1 devices=$2 window=$3 dir=$4 port=$5
  local rate=$((devices > 1000 ? devices : 1000))
  cat <<EOF
agent:
  data_dir: $dir/data
EOF
  if [ -n "$MEMORY_LIMIT" ]; then echo "  memory_limit: $MEMORY_LIMIT"; fi
  cat <<EOF
brokers:
  local:
    embedded: true
    listen: 127.0.0.1:$port
checkpoints:
  interval: 1s
  incremental: true
sources:
  - id: fleet
    simulator: {devices: $devices, rate: $rate}
    out_of_orderness: 1s
EOF
  case $graph in
  window)
    cat <<EOF
operators:
  - id: avg
    type: window
    inputs: [fleet]
    key_by: key
    window: {kind: tumbling, size: $window}
    aggregate: avg
sinks:
  - {id: out, input: avg, broker: local, topic: "mem/avg/{key}"}
EOF
    ;;
  4windows)
    echo "operators:"
    for agg in avg min max count; do
      cat <<EOF
  - id: $agg
    type: window
    inputs: [fleet]
    key_by: key
    window: {kind: tumbling, size: $window}
    aggregate: $agg
EOF
    done
    echo "sinks:"
    for agg in avg min max count; do
      echo "  - {id: out-$agg, input: $agg, broker: local, topic: \"mem/$agg/{key}\"}"
    done
    ;;
  demo)
    local slide # half the window
    case $window in
    10s) slide=5s ;;
    1m) slide=30s ;;
    1h) slide=30m ;;
    *) echo "bench/memory.sh: the demo graph takes a window of 10s, 1m or 1h, not $window" >&2; exit 2 ;;
    esac
    cat <<EOF
  - id: reference
    simulator: {devices: $devices, rate: $rate, seed: 7}
    out_of_orderness: 1s
operators:
  - {id: hot, type: filter, inputs: [fleet], expr: value > 27.5}
  - id: device-avg
    type: window
    inputs: [fleet]
    key_by: key
    window: {kind: tumbling, size: $window}
    aggregate: avg
  - id: hot-per-site
    type: window
    inputs: [hot]
    key_by: site
    window: {kind: sliding, size: $window, slide: $slide}
    aggregate: count
  - id: drift
    type: join
    inputs: [fleet, reference]
    key_by: key
    window: {kind: tumbling, size: $window}
    aggregate: avg
  - {id: alarm, type: threshold, inputs: [fleet], key_by: key, high: 29.5, low: 27}
sinks:
  - {id: averages, input: device-avg, broker: local, topic: "mem/avg/{key}"}
  - {id: alerts, input: hot-per-site, broker: local, topic: "mem/hot/{key}"}
  - {id: drift-out, input: drift, broker: local, topic: "mem/drift/{key}"}
  - {id: alarms, input: alarm, broker: local, topic: "mem/alarm/{key}"}
EOF
    ;;
  *)
    echo "bench/memory.sh: unknown graph $graph (window, 4windows, demo)" >&2
    exit 2
    ;;
  esac
}

# measure GRAPH DEVICES WINDOW: one cell's line.
measure() {
  local graph=$1 devices=$2 window=$3
  local dir=$work/$graph-$devices-$window
  mkdir -p "$dir"
  pipeline "$graph" "$devices" "$window" "$dir" "$(freeport)" >"$dir/pipeline.yaml"
  "$CAIRN" run -c "$dir/pipeline.yaml" 2>"$dir/log" &
  pid=$!
  local st= tries=0
  until st=$("$CAIRN" status --json -c "$dir/pipeline.yaml" 2>/dev/null) && [ "$(jq -r .state <<<"$st")" = running ]; do
    tries=$((tries + 1))
    if [ "$tries" -gt 150 ] || ! kill -0 "$pid" 2>/dev/null; then
      echo "bench/memory.sh: $graph $devices $window: the agent did not start; its log:" >&2
      cat "$dir/log" >&2
      exit 1
    fi
    sleep 0.2
  done
  local rss=0 heap=0 now h
  for ((i = 0; i < RUN * 2; i++)); do
    sleep 0.5
    now=$(kib VmRSS "$pid")
    rss=$((now > rss ? now : rss))
    if h=$("$CAIRN" status --json -c "$dir/pipeline.yaml" 2>/dev/null | jq .memory.heap_live_bytes); then
      heap=$((h > heap ? h : heap))
    fi
  done
  local hwm read
  hwm=$(kib VmHWM "$pid")
  read=$("$CAIRN" status --json -c "$dir/pipeline.yaml" | jq '[.operators[] | select(.id == "fleet" or .id == "reference") | .subtasks[].records_out] | add')
  kill -TERM "$pid"
  wait "$pid" || { echo "bench/memory.sh: $graph $devices $window: the agent exited with $? after SIGTERM; its log:" >&2; cat "$dir/log" >&2; exit 1; }
  pid=
  awk -v g="$graph" -v d="$devices" -v w="$window" -v rss="$rss" -v hwm="$hwm" -v heap="$heap" -v read="$read" \
    'BEGIN { printf "%-9s %8s %5s %8.1f %8.1f %8.1f %10s\n", g, d, w, rss / 1024, hwm / 1024, heap / 1048576, read }'
  rm -rf "$dir"
}

echo "# $("$CAIRN" version), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f MB", $2 / 1024 }' /proc/meminfo); $(uname -sr); RUN=${RUN}s${MEMORY_LIMIT:+, memory_limit $MEMORY_LIMIT}"
printf '%-9s %8s %5s %8s %8s %8s %10s\n' graph devices win rss_mib hwm_mib heap_mib readings
for graph in $GRAPHS; do
  for devices in $DEVICES; do
    for window in $WINDOWS; do
      measure "$graph" "$devices" "$window"
    done
  done
done
