#!/bin/sh
# Regenerates the test-only certificates in this directory (see README.md).
# Shaped like meshperf pilot's CA: a self-signed P-256 root (CA, keyCertSign),
# leaves whose only identity is one URI SAN (SPIFFE), EKU serverAuth+clientAuth.
# Valid for 100 years so the tests never expire.
set -eu
cd "$(dirname "$0")"
days=36500
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

root() { # name subject
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$1-key.pem" -out "$1-cert.pem" -days $days -subj "$2" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}

leaf() { # name spiffe-id issuer
	openssl genpkey -algorithm ec -pkeyopt ec_paramgen_curve:prime256v1 -out "$1-key.pem"
	openssl req -new -key "$1-key.pem" -subj /O=meshperf-test -out "$tmp/$1.csr"
	cat >"$tmp/$1.ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=critical,URI:$2
EXT
	openssl x509 -req -in "$tmp/$1.csr" -CA "$3-cert.pem" -CAkey "$3-key.pem" -CAcreateserial \
		-days $days -extfile "$tmp/$1.ext" -out "$1-cert.pem" 2>/dev/null
}

root root "/O=cluster.local/CN=meshperf test root CA"
root other-root "/O=other.example/CN=meshperf test other root CA"
leaf cart spiffe://cluster.local/ns/shop/sa/cart root
leaf cart-rotated spiffe://cluster.local/ns/shop/sa/cart root
leaf catalog spiffe://cluster.local/ns/shop/sa/catalog root
leaf foreign-domain spiffe://other.example/ns/shop/sa/catalog root
leaf rogue spiffe://cluster.local/ns/shop/sa/catalog other-root
rm -f ./*.srl
