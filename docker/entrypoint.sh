#!/bin/sh
# kbroker container entrypoint.
#
# `kbroker start` reads KBROKER_<PROPERTY> environment variables itself (dots become
# underscores: KBROKER_BROKER_ID -> broker.id). This script adds two things a container needs:
#   - a mounted properties file ($KBROKER_CONFIG_FILE, default /etc/kbroker/server.properties)
#     is used as the base configuration when present; environment variables override it;
#   - without KBROKER_ADVERTISED_LISTENERS, the listeners are advertised under this host's
#     name instead of a wildcard address, so other containers can reach the broker.
# Any other command (kbroker topics ..., sh) runs as given.
set -eu

config_file="${KBROKER_CONFIG_FILE:-/etc/kbroker/server.properties}"

if [ "$#" -eq 0 ]; then
    set -- kbroker start
fi

if [ "$1" = "kbroker" ] && [ "${2:-}" = "start" ]; then
    shift 2
    if [ -z "${KBROKER_ADVERTISED_LISTENERS:-}" ] && [ -n "${KBROKER_LISTENERS:-}" ]; then
        KBROKER_ADVERTISED_LISTENERS=$(printf '%s' "$KBROKER_LISTENERS" \
            | sed -e "s#://0\.0\.0\.0:#://$(uname -n):#g" -e "s#://:#://$(uname -n):#g")
        export KBROKER_ADVERTISED_LISTENERS
    fi
    case "${1:-}" in
        "" | -*)
            if [ -f "$config_file" ]; then
                set -- "$config_file" "$@"
            fi
            ;;
    esac
    exec kbroker start "$@"
fi

exec "$@"
