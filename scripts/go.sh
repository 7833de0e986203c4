#!/bin/sh
# Prints the path of a Go toolchain that can build and test clients/go
# (Go >= 1.21), installing one with apt if none is found:
#   Debian 12 (bookworm) ships Go 1.19 as golang-go, too old: Go 1.23 comes
#   from bookworm-backports (golang-1.23-go); elsewhere golang-go.
# Usage: GO=$(scripts/go.sh)
set -eu

MIN_MINOR=21

sudo_cmd() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# new_enough GO: the toolchain reports go1.N with N >= MIN_MINOR (or go2+).
new_enough() {
    v=$("$1" env GOVERSION 2>/dev/null) || return 1
    v=${v#go}
    major=${v%%.*}
    minor=${v#*.}
    minor=${minor%%[!0-9]*}
    [ -n "$major" ] && [ -n "$minor" ] || return 1
    [ "$major" -gt 1 ] || [ "$minor" -ge "$MIN_MINOR" ]
}

find_go() {
    for g in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go \
        $(ls -d /usr/lib/go-1.*/bin/go 2>/dev/null | sort -t. -k2 -n -r); do
        if [ -n "$g" ] && [ -x "$g" ] && new_enough "$g"; then
            echo "$g"
            return 0
        fi
    done
    return 1
}

find_go && exit 0

codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
if [ "$codename" = bookworm ]; then
    echo "deps: installing Go 1.23 (apt, bookworm-backports: bookworm's golang-go is 1.19)" >&2
    list=/etc/apt/sources.list.d/bookworm-backports.list
    grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/ ||
        echo "deb http://deb.debian.org/debian bookworm-backports main" | sudo_cmd tee "$list" >/dev/null
    sudo_cmd apt-get update -qq >&2
    sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports golang-1.23-go >&2
elif command -v apt-get >/dev/null 2>&1; then
    echo "deps: installing golang-go (apt)" >&2
    sudo_cmd apt-get update -qq >&2
    sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >&2
fi

find_go && exit 0
echo "clients/go needs Go >= 1.$MIN_MINOR: install it (https://go.dev/doc/install) and put it on PATH" >&2
exit 1
