#!/usr/bin/env bash
# Installs what wfgen's build, tests and demo need when it is missing:
# libtorch (Debian's libtorch-dev, CPU) for the cgo engine and Gloo's
# headers (libgloo-dev) for its process groups (runtime/dist), Debian's
# python3-torch / python3-torchvision for parity fixtures, the torchrun test
# and the side-by-side benchmarks, python3-fastapi / python3-uvicorn for
# the Python server the serving load test (make bench) compares wfserve with,
# python3-sklearn for the handwritten digits the demo's digits model is
# trained on (examples/digits), pkg-config for the test of a build
# against a relocated libtorch (e2e), and prometheus, the server the
# serving tests start on loopback to scrape wfserve's /metrics (its
# package's own service is not started where policy-rc.d forbids it, as in
# containers; the tests run their own), and python3-numpy /
# python3-rapidjson / python3-geventhttpclient, the dependencies of Triton's
# Python HTTP client, the third-party OIP client the binary tensor test
# drives (its source is not installed here: docs/serving.md), and
# python3-packaging / python3-grpcio / python3-grpc-tools, those of its
# gRPC client (the repository test generates the client's protobuf modules
# with protoc and grpc_tools.protoc, as its build does), and
# protobuf-compiler, the protoc that runtime/oip/oippb's Go files are
# generated with (its test checks they are current), and haproxy, the load
# balancer the replica test (cmd/wfserve) puts in front of two wfserve
# processes, and chromium, the headless browser the playground's tests
# (runtime/playground) drive. Idempotent: does nothing when all is there.
set -euo pipefail

need=()
[ -f /usr/include/torch/script.h ] || need+=(libtorch-dev)
[ -f /usr/include/gloo/config.h ] || need+=(libgloo-dev)
if ! /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then need+=(python3-torch); fi
if ! /usr/bin/python3 -c 'import torchvision' >/dev/null 2>&1; then need+=(python3-torchvision); fi
if ! /usr/bin/python3 -c 'import fastapi' >/dev/null 2>&1; then need+=(python3-fastapi); fi
if ! /usr/bin/python3 -c 'import uvicorn' >/dev/null 2>&1; then need+=(python3-uvicorn); fi
if ! /usr/bin/python3 -c 'import sklearn.datasets' >/dev/null 2>&1; then need+=(python3-sklearn); fi
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v pkg-config >/dev/null 2>&1 || need+=(pkgconf)
[ -x /usr/bin/prometheus ] || need+=(prometheus)
if ! /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1; then need+=(python3-numpy); fi
if ! /usr/bin/python3 -c 'import rapidjson' >/dev/null 2>&1; then need+=(python3-rapidjson); fi
if ! /usr/bin/python3 -c 'import geventhttpclient' >/dev/null 2>&1; then need+=(python3-geventhttpclient); fi
if ! /usr/bin/python3 -c 'import packaging' >/dev/null 2>&1; then need+=(python3-packaging); fi
if ! /usr/bin/python3 -c 'import grpc' >/dev/null 2>&1; then need+=(python3-grpcio); fi
if ! /usr/bin/python3 -c 'import grpc_tools.protoc' >/dev/null 2>&1; then need+=(python3-grpc-tools); fi
command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
[ -x /usr/sbin/haproxy ] || need+=(haproxy)
[ -x /usr/bin/chromium ] || need+=(chromium)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "setup: need root to install ${need[*]} (apt-get); run as root or install them yourself" >&2
    exit 1
  fi
fi
echo "setup: installing Debian packages: ${need[*]} (apt-get, this takes a few minutes once)"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "setup: done"
