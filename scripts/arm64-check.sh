#!/usr/bin/env bash
# Proves tars on arm64, a Raspberry Pi's architecture, from an x86_64 Linux machine: builds a
# Debian bookworm arm64 root with debootstrap, runs it under qemu-user-static (binfmt_misc), installs
# tars inside with `uv tool install` from this checkout (as the README says; uv from PyPI through
# Debian's pipx), starts tarsd on a copy of examples/vault with the offline model, and runs status,
# search in every mode, remember, forget, doctor and stop. Each step prints its time; the table at
# the end sums them up.
#
# Needs root (debootstrap, chroot and mounts), Debian's package mirror and PyPI. The root is built
# once and kept in ${TARS_ARM64_CACHE:-/var/cache/tars-arm64} (about 500 MB with uv's download
# cache), so later runs skip that step; delete the folder for a fresh one. Each run starts tars's
# own state afresh (the install, the index and the folded model) so that every step is proven again.
#
#   sudo bash scripts/arm64-check.sh          # TARS_MODEL_DIR: the model (default ../shared/models/all-MiniLM-L6-v2-int8)
#                                             # TARS_DEBIAN_MIRROR: another mirror; UV_DEFAULT_INDEX: another index
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "arm64-check: $*" >&2; }
fail() {
    say "FAILED: $*"
    exit 1
}

cache="${TARS_ARM64_CACHE:-/var/cache/tars-arm64}"
root="$cache/bookworm-arm64"
mirror="${TARS_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
model="${TARS_MODEL_DIR:-$(cd .. && pwd)/shared/models/all-MiniLM-L6-v2-int8}"
# Debian's own Python (3.11, as on Raspberry Pi OS Bookworm) and pipx, which brings uv.
packages="python3,python3-venv,pipx,ca-certificates"
# Emulation is slow: these bound each wait generously.
start_deadline=900
install_deadline=1800

# ---- before anything: what this needs ----
[ "$(uname -s)" = Linux ] || fail "this runs on Linux only (debootstrap, chroot, binfmt_misc); on a Mac, run it in a Linux VM"
[ "$(id -u)" = 0 ] || fail "this needs root (debootstrap, chroot and mounts): run it as sudo bash scripts/arm64-check.sh"
if [ ! -f "$model/model.onnx" ] || [ ! -f "$model/tokenizer.json" ]; then
    fail "no model at $model (model.onnx and tokenizer.json): set TARS_MODEL_DIR to a copy of all-MiniLM-L6-v2 as ONNX"
fi

# ---- steps, timed ----
summary=()
run_started=$EPOCHREALTIME
seconds_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
# step NAME COMMAND...: says what it does, runs it, prints its time; a failing step ends the run.
step() {
    local name="$1" started status=0
    shift
    say "step: $name"
    started=$EPOCHREALTIME
    "$@" || status=$?
    local took
    took="$(seconds_since "$started")"
    if [ "$status" != 0 ]; then
        summary+=("$(printf '%-28s %8s s  FAILED (exit %s)' "$name" "$took" "$status")")
        print_summary
        fail "$name (exit $status, after $took s)"
    fi
    summary+=("$(printf '%-28s %8s s  ok' "$name" "$took")")
    say "ok: $name ($took s)"
}
print_summary() {
    echo
    echo "arm64-check summary ($(date -u +%Y-%m-%dT%H:%MZ), host $(uname -m), $(nproc) cores, load average $(cut -d" " -f1-3 /proc/loadavg)):"
    printf '  %s\n' "${summary[@]}"
    echo "  total $(seconds_since "$run_started") s"
}

# ---- the host: tools and binfmt_misc ----
host_tools() {
    local missing=()
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
    [ "${#missing[@]}" = 0 ] && return 0
    command -v apt-get >/dev/null || fail "install ${missing[*]} with your package manager, then run this again"
    say "installing ${missing[*]} with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

binfmt() {
    local dir=/proc/sys/fs/binfmt_misc conf=/usr/lib/binfmt.d/qemu-aarch64.conf
    if [ ! -e "$dir/register" ]; then
        say "mounting binfmt_misc on $dir"
        mount -t binfmt_misc binfmt_misc "$dir" || fail "cannot mount binfmt_misc (in a container? run this on the host or a VM)"
    fi
    if [ ! -e "$dir/qemu-aarch64" ]; then
        [ -f "$conf" ] || fail "$conf is missing: reinstall qemu-user-static"
        say "registering qemu-aarch64 from $conf"
        # The F flag there opens the interpreter now, so it works inside the chroot without a copy.
        cat "$conf" >"$dir/register" || fail "cannot register qemu-aarch64 with binfmt_misc"
    fi
    grep -q '^enabled' "$dir/qemu-aarch64" || fail "$dir/qemu-aarch64 is registered but disabled: echo 1 > $dir/qemu-aarch64"
    local interpreter flags
    interpreter="$(sed -n 's/^interpreter //p' "$dir/qemu-aarch64")"
    flags="$(sed -n 's/^flags: //p' "$dir/qemu-aarch64")"
    echo "qemu-aarch64: $interpreter (flags $flags)"
    # Without F (registered by another tool) the kernel would look for the interpreter inside the root.
    case "$flags" in
        *F*) ;;
        *) fail "qemu-aarch64 is registered without the F flag: echo -1 > $dir/qemu-aarch64 (this script registers it again)" ;;
    esac
}

# ---- the arm64 root, built once and cached ----
build_root() {
    if [ -f "$root/.tars-root-complete" ]; then
        echo "reusing $root (built $(cat "$root/.tars-root-complete"))"
        return 0
    fi
    local partial="$root.partial"
    if grep -q " $partial/" /proc/mounts; then
        fail "$partial has mounts left by an interrupted run: umount them (grep $partial /proc/mounts), then run this again"
    fi
    rm -rf "$partial"
    mkdir -p "$cache"
    say "debootstrap: Debian bookworm arm64 ($packages) from $mirror into $partial (minutes; only on the first run)"
    debootstrap --arch=arm64 --variant=minbase --include="$packages" bookworm "$partial" "$mirror" >"$cache/debootstrap.log" 2>&1 \
        || { tail -20 "$cache/debootstrap.log" >&2; fail "debootstrap failed (its log: $cache/debootstrap.log)"; }
    date -u +%Y-%m-%dT%H:%MZ >"$partial/.tars-root-complete" && mv "$partial" "$root"
}

# ---- inside the root ----
mounted=()
unmount_all() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[$i]}" 2>/dev/null || say "could not unmount ${mounted[$i]}"
    done
    mounted=()
}
tarsd_pid=""
cleanup() {
    if [ -n "$tarsd_pid" ] && kill -0 "$tarsd_pid" 2>/dev/null; then
        kill "$tarsd_pid" 2>/dev/null || true
        wait "$tarsd_pid" 2>/dev/null || true
    fi
    unmount_all
}
trap cleanup EXIT

prepare_root() {
    local target
    # No /sys: with it, onnxruntime's CPU probe crashed the model's load under qemu-user (qemu 7.2);
    # without it, the probe warns ("Error in cpuinfo") and onnxruntime goes on.
    for target in proc dev dev/pts; do
        grep -q " $root/$target " /proc/mounts && continue
        case "$target" in
            proc) mount -t proc proc "$root/proc" || return 1 ;;
            *) mount --bind "/$target" "$root/$target" || return 1 ;;
        esac
        mounted+=("$root/$target")
    done
    cp /etc/resolv.conf "$root/etc/resolv.conf" || return 1
    # The host's own CAs (a company or proxy CA in /usr/local/share/ca-certificates), so that pipx
    # and uv inside trust what the host trusts. update-ca-certificates takes a minute under emulation:
    # only when they changed.
    local cert changed=""
    for cert in /usr/local/share/ca-certificates/*.crt; do
        [ -f "$cert" ] || continue
        cmp -s "$cert" "$root$cert" && continue
        cp "$cert" "$root$cert" || return 1
        changed="$changed ${cert##*/}"
    done
    if [ -n "$changed" ]; then
        local out
        out="$(inside update-ca-certificates 2>&1)" || { echo "$out"; return 1; }
        echo "added the host's CAs:$changed"
    fi
}

# A command in the root runs as after a fresh login: HOME, PATH with ~/.local/bin (where uv puts
# tarsd and tarsctl), the model; nothing else from this shell.
# QEMU_CPU: a Raspberry Pi 4's core (Cortex-A72). Under qemu's default CPU ("max": SVE and every
# newer extension) the model took 71 s for a 32-token passage, against 2.8 s with a Pi's core.
login_env=(/usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb TARS_MODEL_DIR=/opt/tars-model QEMU_CPU=cortex-a72
    PATH=/root/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
# uv trusts the system's CAs (the host's among them, see prepare_root) and never downloads a Python.
login_env+=(SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt UV_PYTHON_DOWNLOADS=never)
[ -n "${UV_DEFAULT_INDEX:-}" ] && login_env+=(UV_DEFAULT_INDEX="$UV_DEFAULT_INDEX")
inside() { chroot "$root" "${login_env[@]}" "$@"; }

machine() {
    local arch
    arch="$(inside uname -m)"
    echo "uname -m inside: $arch (qemu CPU cortex-a72); $(inside python3 --version)"
    [ "$arch" = aarch64 ] || fail "uname -m inside the root says $arch, not aarch64"
}

uv_in_root() {
    if [ ! -d "$root/root/.local/pipx/venvs/uv" ]; then
        say "installing uv in the root with pipx (once; kept with the root)"
        inside pipx install uv || return 1
    fi
    inside uv --version
}

copy_in() {
    # tars's state from an earlier run goes (the install, the index, the folded model), so that this
    # run installs, indexes and folds afresh; uv's download cache stays (downloads are not what is proven).
    rm -rf "$root/opt/tars-src" "$root/opt/tars-model" "$root/root/vault" "$root/root/.local/share/tars" \
        "$root/root/.local/share/uv/tools/tars" "$root/root/.local/bin/tarsd" "$root/root/.local/bin/tarsctl" \
        "$root/root/.cache/tars" "$root/tmp/tars-0" || return 1
    mkdir -p "$root/opt/tars-src" || return 1
    # The checkout's files as git sees them (committed or not, ignored ones such as the venvs left out).
    if [ -e .git ]; then
        git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$root/opt/tars-src" || return 1
    else
        tar --exclude=./.venv --exclude=./.venv-demo -cf - . | tar -xf - -C "$root/opt/tars-src" || return 1
    fi
    cp -R "$model" "$root/opt/tars-model" && cp -R examples/vault "$root/root/vault" || return 1
    echo "copied the checkout to /opt/tars-src, $model to /opt/tars-model, examples/vault to /root/vault"
}

install_tars() {
    # Without the list of every package it installed (" + name==version"): its count is enough here.
    timeout "$install_deadline" chroot "$root" "${login_env[@]}" uv tool install --python /usr/bin/python3 /opt/tars-src 2>&1 \
        | sed '/^ + /d' || return 1
    inside tarsctl --version
}

start_tarsd() {
    # chroot itself in the background (not a function's subshell), so $! is tarsd's process.
    chroot "$root" "${login_env[@]}" tarsd --vault /root/vault >"$cache/tarsd.log" 2>&1 &
    tarsd_pid=$!
    local waited=0
    until inside tarsctl ping >/dev/null 2>&1; do
        if ! kill -0 "$tarsd_pid" 2>/dev/null; then
            tail -20 "$cache/tarsd.log" >&2
            fail "tarsd exited before answering (its log: $cache/tarsd.log)"
        fi
        [ "$waited" -lt "$start_deadline" ] || fail "tarsd did not answer within $start_deadline s (its log: $cache/tarsd.log)"
        sleep 1
        waited=$((waited + 1))
    done
    inside tarsctl ping
}

# expect TEXT COMMAND...: runs the command inside, shows its output, fails unless TEXT is in it.
expect() {
    local text="$1" out
    shift
    out="$(inside "$@" 2>&1)" || {
        echo "$out"
        return 1
    }
    echo "$out"
    grep -qF -- "$text" <<<"$out" || {
        echo "expected to see: $text"
        return 1
    }
}

# expect_first PATH COMMAND...: a search whose first hit (on stdout; warnings go to stderr) must be PATH.
expect_first() {
    local path="$1" out status=0
    shift
    out="$(inside "$@" 2>"$cache/stderr")" || status=$?
    cat "$cache/stderr" >&2
    echo "$out"
    [ "$status" = 0 ] || return "$status"
    case "$(head -1 <<<"$out")" in
        "$path":*) ;;
        *)
            echo "expected the first hit to be $path"
            return 1
            ;;
    esac
}

fact_gone() {
    if grep -n Brompton "$root/root/vault/Memory.md"; then
        echo "forget left the line in Memory.md"
        return 1
    fi
    echo "Memory.md no longer has the line"
}

stop_tarsd() {
    inside tarsctl stop
    local status=0
    wait "$tarsd_pid" || status=$?
    tarsd_pid=""
    echo "tarsd exited with $status"
    [ "$status" = 0 ]
}

say "checking tars on Debian bookworm arm64 under qemu; root cached in $root"
step "host tools" host_tools
step "binfmt_misc qemu-aarch64" binfmt
step "arm64 root (debootstrap)" build_root
step "mounts, DNS, CAs" prepare_root
step "uname -m = aarch64" machine
step "uv (pipx install uv, once)" uv_in_root
step "copy checkout, model, vault" copy_in
step "uv tool install tars" install_tars
step "tarsd start (socket up)" start_tarsd
step "index and embed (--wait)" expect "0 pending" tarsctl index --wait
step "status" expect "/root/vault" tarsctl status
step "search --mode fts" expect_first Sourdough.md tarsctl search --mode fts "sourdough starter"
step "search --mode vec" expect_first Sourdough.md tarsctl search --mode vec "what temperature to bake bread at"
step "search --mode hybrid" expect_first "Home automation.md" tarsctl search --mode hybrid "zigbee dongle usb port"
step "remember" expect "remembered in Memory.md" tarsctl remember "My bike is a blue Brompton"
step "search finds the fact" expect_first Memory.md tarsctl search --mode fts "Brompton"
step "forget" expect "forgot from Memory.md: My bike is a blue Brompton" tarsctl forget --yes "blue Brompton bike"
step "the line is gone" fact_gone
step "doctor" expect "0 problems" tarsctl doctor
step "stop" stop_tarsd
print_summary
