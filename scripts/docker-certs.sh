#!/usr/bin/env bash
# Certificates for docker-compose.sasl-ssl.yml: a CA and the server's certificate for the
# service name and localhost, as PEM files (what kcoord's ssl.keystore.type=PEM reads).
#   bash scripts/docker-certs.sh [DIR (./secrets)] [EXTRA_HOSTNAME...]
# DIR/ca.pem is the clients' truststore (librdkafka: ssl.ca.location; Java: ssl.truststore.type=PEM).
# For trying things out: the key is readable by the container's user (uid 1000) whoever made it.
set -euo pipefail
dir=${1:-secrets}
shift || true
mkdir -p "$dir"
cd "$dir"
san="DNS:kcoord,DNS:localhost,IP:127.0.0.1"
for h in "$@"; do san="$san,DNS:$h"; done
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
openssl req -x509 -new -key ca.key -sha256 -days 365 -subj "/O=kcoord/CN=kcoord demo CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.pem
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out server.key 2>/dev/null
openssl req -new -key server.key -subj "/O=kcoord/CN=kcoord" -out server.csr
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" >server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 -sha256 \
  -extfile server.ext -out server.pem 2>/dev/null
cat server.key server.pem >server-keystore.pem
rm -f server.csr server.ext ca.srl
chmod 600 ca.key
chmod 644 server-keystore.pem server.key server.pem ca.pem
echo "certificates in $PWD: ca.pem (truststore), server-keystore.pem (key + certificate)"
