#!/usr/bin/env bash
# Creates a local certificate authority and certificates signed by it, with the openssl
# command, for TLS on the REST APIs and mTLS on the gRPC links (docs/security.md).
#
#   scripts/make-certs.sh DIR [NAME ...]
#
# DIR/ca.pem and DIR/ca-key.pem: the CA (made once; kept if present).
# DIR/NAME.pem and DIR/NAME-key.pem for each NAME (default: "server"): valid for the DNS
# name NAME, "localhost" and 127.0.0.1/::1, usable by a server and as a client identity.
# Keys are P-256 ECDSA, readable by their owner only. Re-running renews the NAME
# certificates (servers reload them without a restart).
set -euo pipefail
dir=${1:?usage: make-certs.sh DIR [NAME ...]}
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(server)
mkdir -p "$dir"
umask 077
days=${SINEW_CERT_DAYS:-825}

if [ ! -s "$dir/ca.pem" ] || [ ! -s "$dir/ca-key.pem" ]; then
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$dir/ca-key.pem" -out "$dir/ca.pem" -days "$days" \
    -subj "/CN=Sinew local CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi

for name in "${names[@]}"; do
  tmp=$(mktemp -d)
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$tmp/key.pem" -out "$tmp/req.csr" -subj "/CN=$name" 2>/dev/null
  cat > "$tmp/ext.cnf" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:$name,DNS:localhost,IP:127.0.0.1,IP:::1
EXT
  openssl x509 -req -in "$tmp/req.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca-key.pem" -CAcreateserial \
    -out "$tmp/cert.pem" -days "$days" -extfile "$tmp/ext.cnf" 2>/dev/null
  # Replace each file in one rename, so a server reloading meanwhile sees old or new.
  mv "$tmp/key.pem" "$dir/$name-key.pem.new" && mv "$dir/$name-key.pem.new" "$dir/$name-key.pem"
  mv "$tmp/cert.pem" "$dir/$name.pem.new" && mv "$dir/$name.pem.new" "$dir/$name.pem"
  rm -rf "$tmp"
done
chmod 644 "$dir/ca.pem"
