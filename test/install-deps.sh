#!/usr/bin/env bash
# Installs the Debian 12 packages changefeed builds, tests and demos with.
# Run as root; does nothing when everything is already there.
set -euo pipefail

packages=(postgresql-15 postgresql-server-dev-15 libpqxx-dev libboost-json1.81-dev
          libssl-dev libgtest-dev cmake g++ make pkg-config nats-server libnats-dev libcli11-dev
          python3-psycopg prometheus-cpp-dev debootstrap postgresql-15-partman postgresql-15-cron
          postgresql-15-repack pgbouncer prometheus prometheus-postgres-exporter
          pgbackrest patroni etcd-server python3-etcd
          clang-format)
# node and npm run the CloudEvents SDK in cloudevents_conformance_test; any
# node already on PATH will do.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
