#!/bin/bash
# Runs on a test host, called over ssh by capture.sh (which copies it to /usr/local/sbin): one step of
# the capture of the real vLLM unit. Writes its files under /root/capture; prints one result line.
#
#   host-capture.sh cursor UNIT              the cursor of UNIT's last journal entry, or - if none
#   host-capture.sh start UNIT               start, poll /health every 0.2 s: "ready S" or "exited S"
#   host-capture.sh wait-exit UNIT [MAX_S]   poll until the unit is no longer active: "exited S"
#   host-capture.sh stop UNIT                systemctl stop, timed: "stopped S"
#   host-capture.sh journal UNIT CURSOR NAME journalctl -u UNIT after CURSOR (all of it for -), -o cat
#                                            to NAME.log and -o json to NAME.journal.json
#   host-capture.sh show UNIT                the unit's state as systemctl show prints it
#   host-capture.sh memory UNIT              PSS and RSS of each process in the unit, and their sum
#   host-capture.sh requests                 models, completion, two SSE streams, /metrics idle and busy
#   host-capture.sh pp2-request              one completion that PP2 answers with HTTP 500
#   host-capture.sh kill9 UNIT               kill -9 the EngineCore, /health timeline at ~0.2 s steps
set -euo pipefail

OUT=/root/capture
URL=http://127.0.0.1:8000
mkdir -p "$OUT"

now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
code() { curl -s -o /dev/null -m 2 -w '%{http_code}' "$URL/health" || true; }
post() { curl -s -H 'Content-Type: application/json' "$@"; }

cmd_start() {
    local unit=$1 t0 c
    systemctl reset-failed "$unit" 2>/dev/null || true
    t0=$(now)
    systemctl start "$unit"
    while :; do
        c=$(code)
        [ "$c" = 200 ] && { echo "ready $(since "$t0")"; return 0; }
        systemctl is-active -q "$unit" || { echo "exited $(since "$t0")"; return 0; }
        awk -v s="$(since "$t0")" 'BEGIN { exit !(s > 180) }' && { echo "timeout $(since "$t0")"; return 1; }
        sleep 0.2
    done
}

cmd_wait_exit() {
    local unit=$1 max=${2:-120} t0
    t0=$(now)
    while systemctl is-active -q "$unit"; do
        awk -v s="$(since "$t0")" -v m="$max" 'BEGIN { exit !(s > m) }' && { echo "still-active $(since "$t0")"; return 1; }
        sleep 0.2
    done
    echo "exited $(since "$t0")"
}

cmd_stop() {
    local t0
    t0=$(now)
    systemctl stop "$1"
    echo "stopped $(since "$t0")"
}

# The cursor is one of UNIT's own entries on purpose: systemd 252's journalctl, given -u UNIT and
# --after-cursor=C where C's entry is not UNIT's, skips UNIT's first entry after C as well (it steps
# over two entries assuming the first is C), which loses the "Started ..." line.
cmd_cursor() {
    journalctl -u "$1" -n 1 -o json --no-pager |
        python3 -c 'import json, sys
line = sys.stdin.readline()
print(json.loads(line)["__CURSOR"] if line.strip() else "-")'
}

cmd_journal() {
    local unit=$1 cursor=$2 name=$3 after=()
    [ "$cursor" = - ] || after=(--after-cursor="$cursor")
    journalctl -u "$unit" "${after[@]}" --no-pager -o cat >"$OUT/$name.log"
    journalctl -u "$unit" "${after[@]}" --no-pager -o json >"$OUT/$name.journal.json"
    echo "journal $(wc -l <"$OUT/$name.log") lines"
}

cmd_memory() {
    local cg pid pss rss comm total_pss=0 total_rss=0 procs
    cg=$(systemctl show -p ControlGroup --value "$1")
    for procs in "/sys/fs/cgroup/systemd$cg/cgroup.procs" "/sys/fs/cgroup$cg/cgroup.procs" \
        "/sys/fs/cgroup/unified$cg/cgroup.procs"; do
        [ -f "$procs" ] && break
    done
    while read -r pid; do
        comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
        pss=$(awk '/^Pss:/ {print $2}' "/proc/$pid/smaps_rollup")
        rss=$(awk '/^Rss:/ {print $2}' "/proc/$pid/smaps_rollup")
        total_pss=$((total_pss + pss))
        total_rss=$((total_rss + rss))
        printf '%s %s pss_kib=%s rss_kib=%s\n' "$pid" "$comm" "$pss" "$rss"
    done <"$procs"
    printf 'total pss_mib=%s rss_mib=%s\n' $((total_pss / 1024)) $((total_rss / 1024))
}

cmd_requests() {
    curl -s "$URL/v1/models" >"$OUT/models.json"
    post "$URL/v1/completions" -o "$OUT/completion.json" \
        -d '{"model": "tiny-moe", "prompt": "hello world", "max_tokens": 16, "temperature": 0}'
    curl -sN -H 'Content-Type: application/json' "$URL/v1/completions" -o "$OUT/stream-completion.txt" \
        -d '{"model": "tiny-moe", "prompt": "The quick brown fox", "max_tokens": 12, "temperature": 0,
             "stream": true, "stream_options": {"include_usage": true}}'
    curl -sN -H 'Content-Type: application/json' "$URL/v1/chat/completions" -o "$OUT/stream-chat.txt" \
        -d '{"model": "tiny-moe", "messages": [{"role": "user", "content": "hello world"}], "max_tokens": 12,
             "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}'
    curl -s "$URL/metrics" -o "$OUT/metrics-idle.txt"
    # Four long streams at once (about 3 s in all on two cores), and meanwhile /metrics fetched 40
    # times back to back by one curl (no `sleep` between probes: during such a burst a sleeping process
    # on this 2-core machine, in the host or outside it, was seen to wake 1.5-7 s late). Whether a
    # sample lands while all four run is luck, so up to three bursts; metrics-busy.txt is the earliest
    # sample counting the most running requests.
    local pids=() i best=-1 running sample counts burst
    for burst in 1 2 3; do
        rm -f "$OUT"/busy-*.sse "$OUT"/busy-*.prom
        pids=()
        counts=""
        for i in 1 2 3 4; do
            curl -sN -H 'Content-Type: application/json' "$URL/v1/completions" -o "$OUT/busy-$i.sse" \
                -d '{"model": "tiny-moe", "prompt": "stream number '"$i"'", "max_tokens": 1536, "ignore_eos": true,
                     "stream": true, "stream_options": {"include_usage": true}}' &
            pids+=($!)
        done
        curl -s "$URL/metrics?sample=[01-40]" -o "$OUT/busy-#1.prom"
        wait "${pids[@]}"
        for sample in "$OUT"/busy-[0-9][0-9].prom; do
            running=$(awk '/^vllm:num_requests_running\{/ {print int($2)}' "$sample")
            counts="$counts${running:-?} "
            if [ "${running:-0}" -gt "$best" ]; then
                best=${running:-0}
                cp "$sample" "$OUT/metrics-busy.txt"
            fi
        done
        echo "burst $burst: running in the 40 /metrics samples: $counts" >&2
        [ "$best" -ge 4 ] && break
    done
    echo "requests done; metrics-busy.txt counts $best running (burst $burst);" \
        "the four streams: $(cat "$OUT"/busy-*.sse | wc -c) bytes"
}

cmd_pp2_request() {
    local c
    c=$(post "$URL/v1/completions" -o "$OUT/pp2-http500.json" -w '%{http_code}' \
        -d '{"model": "tiny-moe", "prompt": "hello world", "max_tokens": 16, "temperature": 0}' || true)
    echo "http $c"
}

cmd_kill9() {
    local unit=$1 pid t0 tk c state n_dead=0 i
    pid=$(ps -eo pid=,comm= | awk '$2 ~ /^VLLM::EngineCor/ {print $1; exit}')
    [ -n "$pid" ] || { echo "no EngineCore process"; return 1; }
    {
        echo "# t_s is seconds since kill -9 of the EngineCore (pid $pid); one /health probe then a 0.2 s sleep"
        echo "# t_s http_code unit_active_state"
        t0=$(now)
        for i in 1 2 3 4 5; do
            echo "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", (b - a) - 1.05 }') $(code) $(systemctl is-active "$unit" || true)"
            sleep 0.2
        done
        kill -9 "$pid"
        tk=$(now)
        echo "# kill -9 $pid"
        while :; do
            c=$(code)
            state=$(systemctl is-active "$unit" || true)
            echo "$(since "$tk") $c $state"
            if [ "$state" != active ] && [ "$state" != deactivating ]; then
                n_dead=$((n_dead + 1))
                [ $n_dead -ge 5 ] && break
            fi
            awk -v s="$(since "$tk")" 'BEGIN { exit !(s > 60) }' && break
            sleep 0.2
        done
    } >"$OUT/kill9-health.txt"
    echo "kill9 done"
}

cmd=${1:-}
shift || true
case $cmd in
cursor) cmd_cursor "$@" ;;
start) cmd_start "$@" ;;
wait-exit) cmd_wait_exit "$@" ;;
stop) cmd_stop "$@" ;;
journal) cmd_journal "$@" ;;
show) systemctl show -p ActiveState,SubState,Result,ExecMainStatus,ExecMainCode "$1" ;;
memory) cmd_memory "$@" ;;
requests) cmd_requests ;;
pp2-request) cmd_pp2_request ;;
kill9) cmd_kill9 "$@" ;;
*) echo "usage: see the head of $0" >&2; exit 2 ;;
esac
