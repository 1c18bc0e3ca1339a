#!/usr/bin/env bash
# Real test hosts: systemd (PID 1), journald and sshd in systemd-nspawn containers, one network
# namespace each, reachable by key. Recipe and traps: docs/testing.md, section "Test hosts".
#
#   tests/hosts/testbed.sh deps            install systemd-nspawn, mmdebstrap, ssh (apt, as root)
#   tests/hosts/testbed.sh build           build the cached root fs (no-op when its inputs are unchanged)
#   tests/hosts/testbed.sh up N            down, build if needed, boot tb1..tbN, wait for ssh
#   tests/hosts/testbed.sh down            stop and remove every host (safe to run twice)
#   tests/hosts/testbed.sh status          list the hosts and whether they answer ssh
#   tests/hosts/testbed.sh stop NAME [--kill]   power off (or kill) one host; its disk stays
#   tests/hosts/testbed.sh start NAME      boot a stopped host again and wait for ssh
#
# State lives in $SERVE_CONSOLE_TESTBED_DIR (default: REPO/.testbed): rootfs/ (the cache),
# hosts/tbI/ (overlay upper/work/root, pid file, console log), id_ed25519, ssh_config, known_hosts,
# hosts.json. Host i: netns tbI, veth tbI-h (10.231.I.1/30) <-> eth0 in the container (10.231.I.2/30).
# The cluster network (the hosts among themselves, as the nodes of a service over several hosts): netns
# tbnet holds bridge br0; host i's cl0 (10.232.0.I/24, in netns tbI) is a veth whose peer cl-tbI sits on
# br0 in tbnet. This machine's own namespace gets nothing (no route to 10.232.0.0/24, no forwarding), so
# only the hosts reach each other's cluster addresses. `down` deletes tbnet with the bridge and veths.
#
# Environment: SERVE_CONSOLE_TESTBED_DIR (state dir), SERVE_CONSOLE_TESTBED_SUITE (Debian release,
# default the machine's), SERVE_CONSOLE_TESTBED_SSH_WAIT_S (boot deadline, default 60),
# SERVE_CONSOLE_TESTBED_TMPFS=1 (hosts' writable layer on a tmpfs; automatic where the state dir's
# file system cannot hold one), SERVE_CONSOLE_TESTBED_LOCKED=1 (the caller holds session.lock).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
TB=${SERVE_CONSOLE_TESTBED_DIR:-$REPO/.testbed}
ROOTFS=$TB/rootfs
# Where each container gets its own cgroups: the named systemd hierarchy and the unified one on a
# hybrid (v1) machine like ours, or the one cgroup2 tree on a pure cgroup v2 machine.
if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then
    CG_ROOTS=(/sys/fs/cgroup)
else
    CG_ROOTS=()
    for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified; do [ -d "$h" ] && CG_ROOTS+=("$h"); done
fi
# libnuma1: the real vLLM (tests/hosts/vllm/) dies at import without it.
PACKAGES=systemd,systemd-sysv,dbus,openssh-server,python3,python3-aiohttp,iproute2,procps,curl,sudo,util-linux,libnuma1
SUITE=${SERVE_CONSOLE_TESTBED_SUITE:-$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2>/dev/null || true)}
SUITE=${SUITE:-bookworm}
SSH_WAIT_S=${SERVE_CONSOLE_TESTBED_SSH_WAIT_S:-60}
GPU_NAME="NVIDIA RTX PRO 6000 Blackwell Server Edition"
GPU_COUNT=8
GPU_TOTAL_MIB=97887
CLUSTER_NETNS=tbnet # the cluster network's own namespace (bridge br0); hosts are 10.232.0.I/24 on cl0

log() { printf 'testbed: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || die "must run as root (overlay mounts, netns, nspawn)"; }

# ---------------------------------------------------------------- deps and build

cmd_deps() {
    need_root
    local missing=()
    command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
    command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
    command -v ssh >/dev/null || missing+=(openssh-client)
    command -v ip >/dev/null || missing+=(iproute2)
    [ ${#missing[@]} = 0 ] && { log "deps present"; return; }
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The mirror the machine itself uses: first URIs: of debian.sources, else first deb line.
apt_mirror() {
    local m=""
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        m=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    fi
    if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
        m=$(awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {print $i; exit}}' /etc/apt/sources.list)
    fi
    [ -n "$m" ] || die "no apt mirror found in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
    echo "$m"
}

# Everything the image depends on; a change in any of it rebuilds the cache.
build_key() {
    {
        echo "$SUITE $PACKAGES"
        declare -f customize_rootfs
        cat "$HERE"/image/*
    } | sha256sum | cut -d' ' -f1
}

customize_rootfs() {
    local root=$1
    local unit
    for unit in getty@tty1.service console-getty.service e2scrub_reap.service systemd-pstore.service \
        apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer fstrim.timer e2scrub_all.timer; do
        ln -sf /dev/null "$root/etc/systemd/system/$unit"
    done
    install -m 644 "$HERE/image/sshd-testbed.conf" "$root/etc/ssh/sshd_config.d/testbed.conf"
    mkdir -p "$root/etc/systemd/journald.conf.d"
    install -m 644 "$HERE/image/journald-testbed.conf" "$root/etc/systemd/journald.conf.d/testbed.conf"
    install -m 440 "$HERE/image/sudoers-testbed" "$root/etc/sudoers.d/testbed"
    # Debian already has a group "operator"; reuse a same-named group where one exists.
    local user groups
    for user in operator:sudo,systemd-journal deploy:systemd-journal; do
        groups=${user#*:}
        user=${user%%:*}
        if grep -q "^$user:" "$root/etc/group"; then
            chroot "$root" /usr/sbin/useradd -m -s /bin/bash -g "$user" -G "$groups" "$user"
        else
            chroot "$root" /usr/sbin/useradd -m -s /bin/bash -U -G "$groups" "$user"
        fi
    done
    # "*" (no usable password) instead of useradd's "!" (locked), which sshd may refuse for keys.
    chroot "$root" /usr/sbin/usermod -p '*' operator
    chroot "$root" /usr/sbin/usermod -p '*' deploy
    local home
    for home in root home/operator home/deploy; do
        mkdir -p "$root/$home/.ssh" && chmod 700 "$root/$home/.ssh"
    done
    chroot "$root" chown operator:operator /home/operator/.ssh
    chroot "$root" chown deploy:deploy /home/deploy/.ssh
    rm -f "$root"/etc/ssh/ssh_host_*
    : >"$root/etc/machine-id"
    mkdir -p "$root/var/log/journal"
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
}

cmd_build() {
    need_root
    command -v mmdebstrap >/dev/null || die "mmdebstrap missing: run '$0 deps'"
    local key
    key=$(build_key)
    if [ -f "$ROOTFS/.testbed-key" ] && [ "$(cat "$ROOTFS/.testbed-key")" = "$key" ]; then
        log "root fs up to date ($ROOTFS)"
        return
    fi
    if compgen -G "$TB/hosts/tb*" >/dev/null; then
        die "hosts are using the old root fs: run '$0 down' first"
    fi
    local mirror tmp start=$SECONDS
    mirror=$(apt_mirror)
    tmp=$TB/rootfs.new
    rm -rf "$tmp"
    mkdir -p "$TB"
    log "building root fs ($SUITE from $mirror) ..."
    mmdebstrap --quiet --variant=minbase --include="$PACKAGES" "$SUITE" "$tmp" "$mirror"
    customize_rootfs "$tmp"
    echo "$key" >"$tmp/.testbed-key"
    rm -rf "$ROOTFS"
    mv "$tmp" "$ROOTFS"
    log "root fs built in $((SECONDS - start)) s ($(du -sh "$ROOTFS" | cut -f1))"
}

# ---------------------------------------------------------------- one host

host_dir() { echo "$TB/hosts/tb$1"; }

ensure_client_key() {
    [ -f "$TB/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C serve-console-testbed -f "$TB/id_ed25519"
}

# A model's config.json by its Hugging Face id (ORG--NAME.json in tests/models or console/sim/models).
model_config() {
    local f
    for f in "$REPO/tests/models/$1.json" "$REPO/console/sim/models/$1.json"; do
        [ -f "$f" ] && { echo "$f"; return; }
    done
    die "config.json of $1 not found (tests/models/$1.json)"
}

# The GPU inventory, through the sim's own ensure_inventory when it is there.
write_inventory() {
    local ledger=$1
    mkdir -p "$ledger"
    if [ -f "$REPO/console/sim/ledger.py" ] &&
        PYTHONPATH=$REPO python3 -c 'import sys; from console.sim.ledger import ensure_inventory
ensure_inventory(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])' \
            "$ledger" "$GPU_COUNT" "$GPU_TOTAL_MIB" "$GPU_NAME" 2>"$ledger/../inventory.err"; then
        rm -f "$ledger/../inventory.err"
        return
    fi
    python3 - "$ledger" "$GPU_COUNT" "$GPU_TOTAL_MIB" "$GPU_NAME" <<'EOF'
import json, sys, uuid
ledger, count, total, name = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
buses = [0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB]
gpus = [{"index": i, "uuid": f"GPU-{uuid.uuid4()}", "name": name, "total_mib": total,
         "pci_bus_id": f"00000000:{buses[i % 8] + i // 8:02X}:00.0"} for i in range(count)]
with open(f"{ledger}/gpus.json", "w") as f:
    json.dump({"gpus": gpus}, f, indent=1)
EOF
}

# Mount host i's overlay and write everything that makes it host i with this tree's code.
prepare_host() {
    local i=$1 d root
    d=$(host_dir "$i")
    root=$d/root
    mkdir -p "$d/upper" "$d/work" "$root"
    if [ "${SERVE_CONSOLE_TESTBED_TMPFS:-}" = 1 ] ||
        ! mount -t overlay overlay -o "lowerdir=$ROOTFS,upperdir=$d/upper,workdir=$d/work" "$root" 2>/dev/null; then
        # $TB's file system cannot hold an overlay upper dir (it is an overlay itself, say): use a tmpfs.
        mkdir -p "$d/rw"
        mount -t tmpfs -o size=2g,mode=755 testbed-rw "$d/rw"
        mkdir -p "$d/rw/upper" "$d/rw/work"
        mount -t overlay overlay -o "lowerdir=$ROOTFS,upperdir=$d/rw/upper,workdir=$d/rw/work" "$root"
    fi
    systemd-id128 new >"$root/etc/machine-id"
    echo "tb$i" >"$root/etc/hostname"
    printf '127.0.0.1 localhost\n127.0.1.1 tb%s\n' "$i" >"$root/etc/hosts"
    ssh-keygen -q -t ed25519 -N '' -C "root@tb$i" -f "$root/etc/ssh/ssh_host_ed25519_key"
    local home owner
    for home in root:0 home/operator:operator home/deploy:deploy; do
        owner=${home#*:}
        home=${home%%:*}
        install -m 600 "$TB/id_ed25519.pub" "$root/$home/.ssh/authorized_keys"
        [ "$owner" = 0 ] || chown --reference="$root/$home/.ssh" "$root/$home/.ssh/authorized_keys"
    done
    # The project's code, fresh from the working tree.
    mkdir -p "$root/opt/serve-console"
    tar -C "$REPO" --exclude=__pycache__ -cf - console | tar -C "$root/opt/serve-console" -xf -
    install -m 755 "$HERE/nvidia-smi" "$root/usr/local/bin/nvidia-smi"
    install -D -m 644 "$HERE/noisy.py" "$root/usr/local/lib/serve-console-testbed/noisy.py"
    install -m 644 "$HERE"/units/*.service "$root/etc/systemd/system/"
    install -D -m 644 -t "$root/etc/serve-console/layouts" "$HERE"/layouts/*.env
    # The real vLLM's unit and layouts; its venv and models come in as read-only binds (vllm_binds).
    install -m 644 "$HERE"/vllm/*.service "$root/etc/systemd/system/"
    install -D -m 644 -t "$root/etc/serve-console/vllm-tiny" "$HERE"/vllm/layouts/*.env
    install -D -m 644 "$(model_config moonshotai--Kimi-K2.6)" "$root/opt/models/kimi-k2.6/config.json"
    # DeepSeek-V3 over two hosts (sglang-ds3@, vllm-ds3@.service): their layouts; the node files are the
    # console's to write (ds3.node.env, ds3-vllm.node.env).
    install -D -m 644 "$(model_config deepseek-ai--DeepSeek-V3)" "$root/opt/models/deepseek-v3/config.json"
    install -D -m 644 -t "$root/etc/serve-console/ds3-layouts" "$HERE"/ds3-layouts/*.env
    install -D -m 644 -t "$root/etc/serve-console/ds3-vllm-layouts" "$HERE"/ds3-vllm-layouts/*.env
    write_inventory "$root/var/lib/serve-console-sim/ledger"
}

setup_net() {
    local i=$1
    ip netns add "tb$i"
    ip link add "tb$i-h" type veth peer name eth0 netns "tb$i"
    ip addr add "10.231.$i.1/30" dev "tb$i-h"
    ip link set "tb$i-h" up
    ip -n "tb$i" link set lo up
    ip -n "tb$i" addr add "10.231.$i.2/30" dev eth0
    ip -n "tb$i" link set eth0 up
    setup_cluster_port "$i"
}

# The cluster network's switch: bridge br0 in a namespace of its own (tbnet), made once per `up`.
setup_cluster_switch() {
    ip netns add "$CLUSTER_NETNS"
    ip -n "$CLUSTER_NETNS" link set lo up
    ip -n "$CLUSTER_NETNS" link add br0 type bridge
    ip -n "$CLUSTER_NETNS" link set br0 up
}

# Host i's port on it: veth cl-tbI on br0 (in tbnet) <-> cl0 10.232.0.I/24 in the host's namespace.
# Both ends are made in namespaces of ours; neither passes through this machine's namespace.
setup_cluster_port() {
    local i=$1
    ip -n "$CLUSTER_NETNS" link add "cl-tb$i" type veth peer name cl0 netns "tb$i"
    ip -n "$CLUSTER_NETNS" link set "cl-tb$i" master br0 up
    ip -n "tb$i" addr add "10.232.0.$i/24" dev cl0
    ip -n "tb$i" link set cl0 up
}

# nspawn options that bind the real vLLM (tests/hosts/vllm/) into a host, read-only, once its
# install.sh has built it (the stamp is written last): the venv at /opt/vllm/venv, the Python
# installation its interpreter links to at its own path, the models at /opt/models/vllm-tiny. None
# before that. (The hosts' open-file hard limit stays the machine's, 20000 here: root on these machines
# lacks CAP_SYS_RESOURCE, so neither nspawn --rlimit nor the unit's LimitNOFILE can raise it.)
vllm_binds() {
    local venv=$TB/vllm/venv home
    [ -f "$venv/.serve-console-installed" ] && [ -d "$TB/vllm/models" ] || return 0
    home=$(awk '$1 == "python_home" {print $2; exit}' "$venv/.serve-console-installed")
    [ -n "$home" ] && [ -d "$home" ] || return 0
    case "$venv$home" in *:*) log "warning: not binding the real vLLM: ':' in $venv or $home"; return 0 ;; esac
    printf '%s\n' "--bind-ro=$venv:/opt/vllm/venv" "--bind-ro=$home" "--bind-ro=$TB/vllm/models:/opt/models/vllm-tiny"
}

# Boot host i in its own cgroups (two containers sharing one collide on teardown).
launch_host() {
    local i=$1 d h extra
    d=$(host_dir "$i")
    for h in "${CG_ROOTS[@]}"; do mkdir -p "$h/testbed/tb$i"; done
    mapfile -t extra < <(vllm_binds)
    rm -f "$d/pid"
    setsid bash -c '
        d=$1 i=$2 ncg=$3
        shift 3
        echo $$ >"$d/pid"
        for cg in "${@:1:ncg}"; do echo $$ >"$cg/testbed/tb$i/cgroup.procs" || exit 1; done
        SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 exec systemd-nspawn -q -D "$d/root" --boot --register=no \
            --keep-unit --machine="tb$i" --link-journal=no --network-namespace-path="/run/netns/tb$i" \
            --console=read-only "${@:ncg+1}"' launch "$d" "$i" "${#CG_ROOTS[@]}" "${CG_ROOTS[@]}" \
        "${extra[@]+"${extra[@]}"}" </dev/null >>"$d/console.log" 2>&1 8>&- 9>&- &
}

wait_ssh() {
    local deadline=$((SECONDS + SSH_WAIT_S)) name
    local pending=("$@")
    while [ ${#pending[@]} -gt 0 ]; do
        local left=()
        for name in "${pending[@]}"; do
            local pid_file=$TB/hosts/$name/pid
            if [ -s "$pid_file" ] && ! kill -0 "$(cat "$pid_file")" 2>/dev/null; then
                tail -n 20 "$TB/hosts/$name/console.log" >&2 || true
                die "$name: systemd-nspawn exited during boot (log: $TB/hosts/$name/console.log)"
            fi
            ssh -n -F "$TB/ssh_config" -o ConnectTimeout=1 "$name" true 2>/dev/null || left+=("$name")
        done
        pending=("${left[@]+"${left[@]}"}")
        [ ${#pending[@]} = 0 ] && break
        if [ $SECONDS -ge $deadline ]; then
            for name in "${pending[@]}"; do tail -n 20 "$TB/hosts/$name/console.log" >&2 || true; done
            die "no ssh answer within ${SSH_WAIT_S} s from: ${pending[*]}"
        fi
        sleep 0.1
    done
}

write_client_files() {
    local n=$1 i pub
    : >"$TB/known_hosts"
    {
        for i in $(seq 1 "$n"); do
            printf 'Host tb%s\n  HostName 10.231.%s.2\n  User root\n  IdentityFile %s\n' "$i" "$i" "$TB/id_ed25519"
            printf '  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n' "$TB/known_hosts"
            printf '  BatchMode yes\n  ConnectTimeout 5\n  LogLevel ERROR\n\n'
        done
    } >"$TB/ssh_config"
    for i in $(seq 1 "$n"); do
        pub=$(cut -d' ' -f1,2 "$(host_dir "$i")/root/etc/ssh/ssh_host_ed25519_key.pub")
        echo "tb$i,10.231.$i.2 $pub" >>"$TB/known_hosts"
    done
    python3 - "$TB" "$n" <<'EOF'
import json, sys
tb, n = sys.argv[1], int(sys.argv[2])
hosts = [{"name": f"tb{i}", "address": f"10.231.{i}.2", "machine_address": f"10.231.{i}.1",
          "netns": f"tb{i}", "veth": f"tb{i}-h", "root": f"{tb}/hosts/tb{i}/root",
          "pid_file": f"{tb}/hosts/tb{i}/pid", "console_log": f"{tb}/hosts/tb{i}/console.log",
          "cluster_address": f"10.232.0.{i}", "cluster_interface": "cl0", "cluster_veth": f"cl-tb{i}"}
         for i in range(1, n + 1)]
doc = {"hosts": hosts, "ssh_config": f"{tb}/ssh_config", "known_hosts": f"{tb}/known_hosts",
       "identity": f"{tb}/id_ed25519", "users": ["root", "operator", "deploy"],
       "cluster_network": {"netns": "tbnet", "bridge": "br0", "prefix": "10.232.0.0/24"}}
with open(f"{tb}/hosts.json", "w") as f:
    json.dump(doc, f, indent=1)
EOF
}

# ---------------------------------------------------------------- up, down, status

cmd_up() {
    need_root
    local n=${1:-}
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 250 ] || die "usage: $0 up N (1..250)"
    command -v systemd-nspawn >/dev/null || die "systemd-nspawn missing: run '$0 deps'"
    local start=$SECONDS i
    cmd_down
    cmd_build
    mkdir -p "$TB/hosts"
    ensure_client_key
    for i in $(seq 1 "$n"); do prepare_host "$i" & done
    wait_all "preparing hosts"
    setup_cluster_switch
    for i in $(seq 1 "$n"); do setup_net "$i"; done
    write_client_files "$n"
    for i in $(seq 1 "$n"); do launch_host "$i"; done
    local names=()
    for i in $(seq 1 "$n"); do names+=("tb$i"); done
    wait_ssh "${names[@]}"
    log "$n host(s) up in $((SECONDS - start)) s; ssh -F $TB/ssh_config tb1"
}

# Wait for every background job; fail if any failed.
wait_all() {
    local pid failed=0
    for pid in $(jobs -p); do wait "$pid" || failed=1; done
    [ $failed = 0 ] || die "$1 failed"
}

nspawn_pid() {
    local f pid
    f="$(host_dir "$1")/pid"
    [ -f "$f" ] || return 1
    pid=$(cat "$f")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = systemd-nspawn ] || return 1
    echo "$pid"
}

cgroup_pids() {
    local h
    for h in "${CG_ROOTS[@]}"; do
        [ -d "$h/testbed/$1" ] || continue
        find "$h/testbed/$1" -name cgroup.procs -exec cat {} + 2>/dev/null
    done
}

# Kill whatever is left in host NAME's cgroups and remove them.
clean_cgroups() {
    local name=$1 pids h
    for _ in $(seq 1 50); do
        pids=$(cgroup_pids "$name" | sort -u)
        [ -z "$pids" ] && break
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null || true
        sleep 0.1
    done
    for h in "${CG_ROOTS[@]}"; do
        [ -d "$h/testbed/$name" ] && find "$h/testbed/$name" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    return 0
}

# Power off hosts (SIGTERM to nspawn), SIGKILL after a grace period, then clear their cgroups.
stop_hosts() {
    local sig=$1 grace=$2
    shift 2
    local name pids=() pid deadline
    for name in "$@"; do
        pid=$(nspawn_pid "${name#tb}") || continue
        kill "-$sig" "$pid" 2>/dev/null || true
        pids+=("$pid")
    done
    deadline=$((SECONDS + grace))
    for pid in "${pids[@]+"${pids[@]}"}"; do
        while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    for name in "$@"; do clean_cgroups "$name"; done
}

# Every host we may have left behind: host dirs, namespaces, cgroups.
known_hosts_names() {
    {
        [ -d "$TB/hosts" ] && find "$TB/hosts" -mindepth 1 -maxdepth 1 -name 'tb*' -printf '%f\n'
        ip netns list 2>/dev/null | awk '$1 ~ /^tb[0-9]+$/ {print $1}'
        for h in "${CG_ROOTS[@]}"; do
            [ -d "$h/testbed" ] &&
                find "$h/testbed" -mindepth 1 -maxdepth 1 -name 'tb*' -printf '%f\n'
        done
    } | grep -E '^tb[0-9]+$' | sort -u
    return 0
}

cmd_down() {
    need_root
    local start=$SECONDS name names root h mnt
    mapfile -t names < <(known_hosts_names)
    if [ ${#names[@]} -gt 0 ]; then
        stop_hosts TERM 5 "${names[@]}"
        for name in "${names[@]}"; do
            root=$TB/hosts/$name/root
            for mnt in "$root" "$TB/hosts/$name/rw"; do
                if mountpoint -q "$mnt" 2>/dev/null; then
                    umount "$mnt" 2>/dev/null || umount -l "$mnt"
                fi
            done
            ip netns del "$name" 2>/dev/null || true
            ip link del "$name-h" 2>/dev/null || true
            rm -rf "/run/systemd/nspawn/propagate/$name" "${TB:?}/hosts/$name"
        done
        log "down: removed ${names[*]} in $((SECONDS - start)) s"
    fi
    # The cluster network: deleting its namespace deletes the bridge and every veth with an end there.
    ip netns del "$CLUSTER_NETNS" 2>/dev/null || true
    for h in "${CG_ROOTS[@]}"; do rmdir "$h/testbed" 2>/dev/null || true; done
    rm -f "$TB/ssh_config" "$TB/known_hosts" "$TB/hosts.json"
}

cmd_status() {
    local name any=0
    while read -r name; do
        any=1
        local state=stopped answer=no
        nspawn_pid "${name#tb}" >/dev/null && state=running
        [ -f "$TB/ssh_config" ] && ssh -n -F "$TB/ssh_config" -o ConnectTimeout=1 "$name" true 2>/dev/null && answer=yes
        printf '%-6s %-12s %-12s %-8s ssh=%s\n' "$name" "10.231.${name#tb}.2" "10.232.0.${name#tb}" "$state" "$answer"
    done < <(known_hosts_names)
    [ $any = 1 ] || echo "no test hosts"
}

cmd_stop() {
    need_root
    local name=${1:-} sig=TERM
    [[ "$name" =~ ^tb[0-9]+$ ]] && [ -d "$TB/hosts/$name" ] || die "usage: $0 stop tbI [--kill] (no such host: $name)"
    [ "${2:-}" = --kill ] && sig=KILL
    stop_hosts "$sig" 10 "$name"
}

cmd_start() {
    need_root
    local name=${1:-}
    [[ "$name" =~ ^tb[0-9]+$ ]] && mountpoint -q "$TB/hosts/$name/root" || die "usage: $0 start tbI (no such host: $name)"
    nspawn_pid "${name#tb}" >/dev/null && die "$name is already running"
    clean_cgroups "$name"
    launch_host "${name#tb}"
    wait_ssh "$name"
}

# One mutating command at a time (pytest sessions and shells may overlap on this machine). A pytest
# session holds session.lock while it uses the hosts and sets SERVE_CONSOLE_TESTBED_LOCKED=1 for us;
# anyone else waits for that session to end instead of tearing its hosts down under it.
case ${1:-} in
build | up | down | stop | start)
    mkdir -p "$TB"
    if [ "${SERVE_CONSOLE_TESTBED_LOCKED:-}" != 1 ]; then
        exec 8>"$TB/session.lock"
        flock -w 1800 8 || die "a test session has held $TB/session.lock for 30 min"
    fi
    exec 9>"$TB/testbed.lock"
    flock -w 600 9 || die "another testbed.sh holds $TB/testbed.lock"
    ;;
esac

case ${1:-} in
deps) cmd_deps ;;
build) cmd_build ;;
up) cmd_up "${2:-}" ;;
down) cmd_down ;;
status) cmd_status ;;
stop) cmd_stop "${2:-}" "${3:-}" ;;
start) cmd_start "${2:-}" ;;
*) die "usage: $0 deps | build | up N | down | status | stop NAME [--kill] | start NAME" ;;
esac
