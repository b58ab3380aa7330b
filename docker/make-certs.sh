#!/bin/sh
# Certificates for docker/docker-compose.secure.yml: a private CA, one certificate for the
# three brokers (names kbroker-1, kbroker-2, kbroker-3, localhost and 127.0.0.1, so clients
# inside the compose network and on the host can check the host name) and a client
# certificate (CN=client), all PEM, written to docker/secrets/ (or the directory given):
#
#   ca.pem                 the CA certificate: the clients' ssl.ca.location / truststore
#   broker.keystore.pem    the brokers' key and certificate (ssl.keystore.type=PEM)
#   client.pem, client.key a client certificate, for mutual TLS if you turn it on
#
# Needs openssl. Re-running replaces everything; the CA key stays in the directory, so keep
# that directory private (it is in .gitignore).
set -eu

dir="${1:-$(dirname "$0")/secrets}"
days="${KBROKER_CERT_DAYS:-825}"
mkdir -p "$dir"
cd "$dir"
umask 077

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$days" \
    -subj "/CN=kbroker compose CA" -keyout ca.key -out ca.pem 2>/dev/null

sign() {  # sign NAME SUBJECT [SAN]
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj "$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
    if [ -n "${3:-}" ]; then
        printf 'subjectAltName=%s\n' "$3" > "$1.ext"
        set -- "$1" "$2" -extfile "$1.ext"
    else
        set -- "$1" "$2"
    fi
    name="$1"
    shift 2
    openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
        -days "$days" -out "$name.pem" "$@" 2>/dev/null
    rm -f "$name.csr" "$name.ext"
}

sign broker "/CN=kbroker" \
    "DNS:kbroker-1,DNS:kbroker-2,DNS:kbroker-3,DNS:localhost,IP:127.0.0.1"
cat broker.key broker.pem > broker.keystore.pem
sign client "/CN=client"
# The brokers run as uid 10001 in their containers: let them read what is mounted.
chmod 644 ca.pem broker.keystore.pem client.pem
chmod 600 ca.key broker.key client.key
echo "certificates in $dir"
